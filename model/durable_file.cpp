// durable_file: temporary file, fsync, rename, fsync of the folder (POSIX calls, as std::ofstream
// reports neither the cause of a failure nor a way to fsync).
#include "model/durable_file.hpp"

#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/data_error.hpp"

namespace degnn {

namespace {

// Special files (a character device such as /dev/full, a pipe) cannot be synced and need not be.
bool sync_fd(int fd) {
  return ::fsync(fd) == 0 || errno == EINVAL || errno == EROFS;
}

}  // namespace

bool sync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = sync_fd(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

durable_file::durable_file(std::filesystem::path file)
    : file_(std::move(file)), tmp_(file_.string() + ".tmp" + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw data_error::at(
        file_.string(), 0,
        std::string("cannot create ") + tmp_.string() + ": " + std::strerror(errno));
}

durable_file::~durable_file() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void durable_file::fail(const std::string& what) {
  const std::string cause = std::strerror(errno);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  throw data_error::at(file_.string(), 0, what + ": " + cause);
}

void durable_file::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw data_error::at(file_.string(), 0, "write after the file was closed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // write() made no progress without setting errno
    if (n <= 0) fail("writing failed");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void durable_file::commit() {
  if (fd_ < 0) throw data_error::at(file_.string(), 0, "commit after the file was closed");
  if (!sync_fd(fd_)) fail("fsync failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const std::string cause = std::strerror(errno);
    ::unlink(tmp_.c_str());
    throw data_error::at(file_.string(), 0, "closing failed: " + cause);
  }
  if (::rename(tmp_.c_str(), file_.c_str()) != 0) {
    const std::string cause = std::strerror(errno);
    ::unlink(tmp_.c_str());
    throw data_error::at(file_.string(), 0, "cannot rename into place: " + cause);
  }
  committed_ = true;
  const auto folder =
      file_.parent_path().empty() ? std::filesystem::path(".") : file_.parent_path();
  if (!sync_path(folder))
    throw data_error::at(file_.string(), 0,
                         std::string("fsync of its folder failed: ") + std::strerror(errno));
}

void write_file_durably(const std::filesystem::path& file, std::string_view bytes) {
  durable_file f(file);
  f.write(bytes);
  f.commit();
}

std::optional<std::string> read_whole_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace degnn
