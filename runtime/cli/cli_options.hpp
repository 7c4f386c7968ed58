// Command-line and config-file options of the degnn commands. One declared schema per command;
// values come from defaults, then a config file (CAF's INI format, `--config-file=F`), then the
// command line (`--key value` or `--key=value`). Unknown keys are errors, in files too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/process/config_error.hpp"

namespace degnn {

struct option_spec {
  std::string name;           ///< without dashes, e.g. "fanouts"
  std::string default_value;  ///< as text; "" for no default
  std::string help;
  bool is_flag = false;  ///< `--name` alone means true
};

class option_set {
 public:
  option_set(std::string command, std::string usage, std::vector<option_spec> specs);

  /// Parses argv[first..argc). Returns false when --help was given (usage printed to stdout).
  /// Throws config_error naming the option, file and line of any problem.
  bool parse(int argc, char** argv, int first);
  /// Reads a config file; keys may sit at top level, or in [COMMAND] or [degnn] sections.
  void read_config_file(const std::string& file);

  const std::string& str(const std::string& name) const;
  std::int64_t integer(const std::string& name, std::int64_t min = INT64_MIN,
                       std::int64_t max = INT64_MAX) const;
  double real(const std::string& name, double min = -1e300, double max = 1e300) const;
  bool flag(const std::string& name) const;
  std::vector<int> int_list(const std::string& name) const;  ///< "10,25" or "[10, 25]"
  bool given(const std::string& name) const;                 ///< set by file or command line
  /// Returns the value of one of `choices`, or throws naming the option.
  const std::string& choice(const std::string& name, const std::vector<std::string>& choices) const;

  void print_usage() const;
  /// `--help-markdown`: the same options as a Markdown table (docs/options.md is made of them,
  /// scripts/options_doc.sh).
  void print_markdown() const;

 private:
  void set(const std::string& name, const std::string& value, const std::string& where);
  const option_spec* find(const std::string& name) const;
  std::string origin(const std::string& name) const;

  std::string command_;
  std::string usage_;
  std::vector<option_spec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> where_;  ///< "--x" or "FILE:LINE", for error messages
};

}  // namespace degnn
