// Parsing and typed access for option_set.
#include "runtime/cli/cli_options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>

namespace degnn {

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string unquote(std::string s) {
  if (s.size() >= 2 &&
      ((s.front() == '"' && s.back() == '"') || (s.front() == '\'' && s.back() == '\''))) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

}  // namespace

option_set::option_set(std::string command, std::string usage, std::vector<option_spec> specs)
    : command_(std::move(command)), usage_(std::move(usage)), specs_(std::move(specs)) {
  specs_.push_back({"config-file", "", "read options from this file (INI: key = value)"});
  for (const auto& s : specs_) {
    if (!s.default_value.empty()) values_[s.name] = s.default_value;
  }
}

const option_spec* option_set::find(const std::string& name) const {
  for (const auto& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

void option_set::set(const std::string& name, const std::string& value, const std::string& where) {
  values_[name] = value;
  where_[name] = where;
}

std::string option_set::origin(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? "default of --" + name : it->second;
}

bool option_set::parse(int argc, char** argv, int first) {
  // Two passes: the config file first, so the command line overrides it whatever the order.
  std::vector<std::pair<std::string, std::string>> given;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage();
      return false;
    }
    if (arg == "--help-markdown") {
      print_markdown();
      return false;
    }
    if (arg.rfind("--", 0) != 0)
      throw config_error(command_ + ": unexpected argument '" + arg + "' (options start with --)");
    arg = arg.substr(2);
    std::string value;
    const auto eq = arg.find('=');
    const option_spec* spec = find(eq == std::string::npos ? arg : arg.substr(0, eq));
    if (!spec) {
      throw config_error(command_ + ": unknown option --" +
                         (eq == std::string::npos ? arg : arg.substr(0, eq)) + " (see degnn " +
                         command_ + " --help)");
    }
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (spec->is_flag) {
      value = "true";
    } else {
      if (i + 1 >= argc) throw config_error(command_ + ": --" + arg + " needs a value");
      value = argv[++i];
    }
    given.emplace_back(spec->name, value);
  }
  for (const auto& [k, v] : given) {
    if (k == "config-file") read_config_file(v);
  }
  for (const auto& [k, v] : given) {
    if (k != "config-file") set(k, v, "--" + k);
  }
  return true;
}

void option_set::read_config_file(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw config_error(file + ": cannot open config file");
  std::string line;
  std::string section;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    const std::string where = file + ":" + std::to_string(no);
    std::string s = trim(line);
    if (s.empty() || s[0] == '#' || s[0] == ';') continue;
    if (s[0] == '[') {
      if (s.back() != ']') throw config_error(where + ": malformed section header '" + s + "'");
      section = trim(s.substr(1, s.size() - 2));
      continue;
    }
    const auto eq = s.find('=');
    if (eq == std::string::npos)
      throw config_error(where + ": expected key = value, got '" + s + "'");
    std::string key = trim(s.substr(0, eq));
    std::string value = unquote(trim(s.substr(eq + 1)));
    // CAF-style dotted keys (train.epochs) are accepted as well as [train] sections.
    std::string sec = section;
    if (const auto dot = key.rfind('.'); dot != std::string::npos) {
      sec = key.substr(0, dot);
      key = key.substr(dot + 1);
    }
    // [faults] seed = 7 is --faults-seed 7.
    if (sec == "faults") {
      key = "faults-" + key;
      sec.clear();
    }
    if (!sec.empty() && sec != command_ && sec != "degnn" && sec != "global") {
      throw config_error(where + ": unknown section '" + sec + "' (use [" + command_ + "])");
    }
    std::replace(key.begin(), key.end(), '_', '-');
    const option_spec* spec = find(key);
    if (!spec || key == "config-file") {
      throw config_error(where + ": unknown key '" + key + "' for degnn " + command_);
    }
    set(key, value, where);
  }
}

const std::string& option_set::str(const std::string& name) const {
  static const std::string empty;
  auto it = values_.find(name);
  return it == values_.end() ? empty : it->second;
}

bool option_set::given(const std::string& name) const {
  return where_.count(name) != 0;
}

std::int64_t option_set::integer(const std::string& name, std::int64_t min,
                                 std::int64_t max) const {
  const std::string& s = str(name);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    throw config_error(origin(name) + ": --" + name + " expects an integer, got '" + s + "'");
  }
  if (v < min || v > max) {
    throw config_error(origin(name) + ": --" + name + " = " + s + " is out of range [" +
                       std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

double option_set::real(const std::string& name, double min, double max) const {
  const std::string& s = str(name);
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    throw config_error(origin(name) + ": --" + name + " expects a number, got '" + s + "'");
  }
  if (v < min || v > max) {
    throw config_error(origin(name) + ": --" + name + " = " + s + " is out of range [" +
                       std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

bool option_set::flag(const std::string& name) const {
  const std::string& s = str(name);
  if (s.empty() || s == "false" || s == "0" || s == "no") return false;
  if (s == "true" || s == "1" || s == "yes") return true;
  throw config_error(origin(name) + ": --" + name + " expects true or false, got '" + s + "'");
}

std::vector<int> option_set::int_list(const std::string& name) const {
  std::string s = str(name);
  if (!s.empty() && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const auto comma = s.find(',', pos);
    const std::string item =
        trim(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    int v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size()) {
      throw config_error(origin(name) + ": --" + name +
                         " expects a comma-separated list of integers, got '" + str(name) + "'");
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

const std::string& option_set::choice(const std::string& name,
                                      const std::vector<std::string>& choices) const {
  const std::string& s = str(name);
  for (const auto& c : choices) {
    if (s == c) return s;
  }
  std::string list;
  for (const auto& c : choices)
    list += (list.empty() ? "" : "|") + c;
  throw config_error(origin(name) + ": --" + name + " must be one of " + list + ", got '" + s +
                     "'");
}

void option_set::print_markdown() const {
  // A table cell: Markdown would read a bare | as the cell's end.
  auto cell = [](const std::string& text) {
    std::string out;
    for (char c : text)
      out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  std::printf("| option | default | what |\n| --- | --- | --- |\n");
  for (const auto& s : specs_) {
    const std::string value = s.is_flag ? "" : " V";
    std::printf("| `--%s%s` | %s | %s |\n", s.name.c_str(), value.c_str(),
                s.is_flag                 ? (s.default_value == "true" ? "on" : "off")
                : s.default_value.empty() ? "-"
                                          : cell(s.default_value).c_str(),
                cell(s.help).c_str());
  }
}

void option_set::print_usage() const {
  std::printf("usage: %s\n\noptions:\n", usage_.c_str());
  for (const auto& s : specs_) {
    std::string left = "  --" + s.name + (s.is_flag ? "" : " V");
    std::printf("%-26s %s%s\n", left.c_str(), s.help.c_str(),
                s.default_value.empty() ? "" : (" (default " + s.default_value + ")").c_str());
  }
}

}  // namespace degnn
