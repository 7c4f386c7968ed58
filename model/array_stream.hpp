// One large array read a piece at a time from a memory-mapped .npy file or .npz entry (a stored
// entry is read in place, a deflated one inflated as it is read), its elements converted to the
// caller's type: a reader holds its destination and one piece, never a copy of the whole array.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/array_file.hpp"
#include "model/mapped_file.hpp"

namespace degnn {

class array_stream {
 public:
  /// The array of a .npy file. Throws data_error naming the file for a bad header or a file
  /// shorter than its shape says.
  static array_stream of_npy(std::shared_ptr<const mapped_file> file);
  /// Entry NAME (without ".npy") of an .npz archive; a data_error listing the entries there are
  /// when it is absent.
  static array_stream of_npz(std::shared_ptr<const mapped_file> file, const std::string& name);
  /// The entry names of an .npz archive.
  static std::vector<std::string> npz_names(const mapped_file& file);

  array_stream(array_stream&&) noexcept;
  array_stream& operator=(array_stream&&) noexcept;
  ~array_stream();

  array_dtype dtype() const;
  const std::vector<std::int64_t>& shape() const;
  std::int64_t elements() const;
  /// "FILE" or "FILE (NAME.npy)", for errors.
  const std::string& where() const;

  /// The next `count` elements, converted: integers to int64 (a float array is refused, naming
  /// the file), anything to float or double. Throws data_error when fewer remain or the bytes run
  /// out (a truncated or damaged file).
  void read(std::int64_t* out, std::size_t count);
  void read(float* out, std::size_t count);
  void read(double* out, std::size_t count);
  /// Passes over the next `count` elements: a jump in a .npy file or stored entry (its CRC is
  /// then not checked), an inflation into scratch space in a deflated one. For readers of a slice
  /// (a rank's share of the edges).
  void skip(std::int64_t count);
  /// After the last read: an .npz entry's CRC-32 is checked (its whole data must have been read).
  void finish();

 private:
  struct state;
  explicit array_stream(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

}  // namespace degnn
