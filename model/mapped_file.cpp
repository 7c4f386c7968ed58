// mapped_file: mmap(2) of a whole file, read-only and shared; see mapped_file.hpp.
#include "model/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "model/data_error.hpp"

namespace degnn {

mapped_file::mapped_file(const std::filesystem::path& file) : name_(file.string()) {
  const int fd = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw data_error::at(name_, 0, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw data_error::at(name_, 0, std::string("cannot stat: ") + std::strerror(e));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw data_error::at(name_, 0, std::string("cannot map: ") + std::strerror(e));
    }
    data_ = static_cast<const char*>(p);
  }
  ::close(fd);  // the mapping keeps the file
}

mapped_file::~mapped_file() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

void mapped_file::release(std::size_t offset, std::size_t length) const {
  if (!data_ || offset >= size_) return;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages inside the range only: a page shared with bytes still to come stays.
  const std::size_t begin = (offset + page - 1) / page * page;
  const std::size_t end = std::min(size_, offset + length) / page * page;
  if (end > begin) ::madvise(const_cast<char*>(data_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace degnn
