// VALIDATION: a header line, then "epoch valid test" per evaluated epoch, the accuracies as
// hexadecimal floats so that a resumed run compares exactly the values the first run had.
#include "runtime/train/validation_history.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "model/data_error.hpp"
#include "model/durable_file.hpp"

namespace degnn {

namespace {
constexpr const char* kHeader = "DEGNN validation history 1";
}

std::vector<validation_point> read_validation_history(const std::filesystem::path& file,
                                                      int last_epoch) {
  std::vector<validation_point> out;
  std::ifstream in(file);
  if (!in) return out;
  std::string line;
  if (!std::getline(in, line) || line != kHeader)
    throw data_error::at(file.string(), 1,
                         "not a validation history (expected '" + std::string(kHeader) + "')");
  int previous = 0;
  for (std::int64_t n = 2; std::getline(in, line); ++n) {
    validation_point p;
    char extra = 0;
    if (std::sscanf(line.c_str(), "%d %la %la %c", &p.epoch, &p.valid, &p.test, &extra) != 3 ||
        p.epoch <= previous)
      throw data_error::at(file.string(), n, "expected 'epoch valid test', epochs ascending");
    previous = p.epoch;
    if (p.epoch <= last_epoch) out.push_back(p);
  }
  return out;
}

void write_validation_history(const std::filesystem::path& file,
                              const std::vector<validation_point>& points) {
  std::string text = std::string(kHeader) + "\n";
  char line[96];
  for (const auto& p : points) {
    std::snprintf(line, sizeof line, "%d %a %a\n", p.epoch, p.valid, p.test);
    text += line;
  }
  write_file_durably(file, text);
}

}  // namespace degnn
