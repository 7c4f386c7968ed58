// Seed discovery from Slurm, Kubernetes and DEGNN_SEED.
#include "runtime/node/seed_discovery.hpp"

#include <netdb.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstring>

#include "runtime/process/config_error.hpp"

namespace degnn {

namespace {

[[noreturn]] void bad_list(const std::string& list, const std::string& why) {
  throw config_error("SLURM_JOB_NODELIST '" + list + "': " + why);
}

bool parse_uint(const std::string& s, long& out) {
  if (s.empty() || s.size() > 9) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One host pattern without top-level commas: expands its first bracket group, then the rest.
void expand_pattern(const std::string& list, const std::string& pattern,
                    std::vector<std::string>& out) {
  const auto open = pattern.find('[');
  if (open == std::string::npos) {
    if (pattern.find(']') != std::string::npos) bad_list(list, "']' without '['");
    out.push_back(pattern);
    return;
  }
  const auto close = pattern.find(']', open);
  if (close == std::string::npos) bad_list(list, "'[' without ']'");
  const std::string prefix = pattern.substr(0, open);
  const std::string suffix = pattern.substr(close + 1);
  const std::string ranges = pattern.substr(open + 1, close - open - 1);
  if (ranges.empty()) bad_list(list, "empty brackets");
  size_t pos = 0;
  while (pos <= ranges.size()) {
    const auto comma = ranges.find(',', pos);
    const std::string item =
        ranges.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const auto dash = item.find('-');
    const std::string lo_text = item.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    long lo = 0, hi = 0;
    if (!parse_uint(lo_text, lo) || !parse_uint(hi_text, hi))
      bad_list(list, "'" + item + "' is not a number or a range of numbers");
    if (hi < lo) bad_list(list, "range '" + item + "' runs backwards");
    if (hi - lo > 100000) bad_list(list, "range '" + item + "' is too long");
    // Slurm keeps the lower bound's width: [08-11] gives 08 09 10 11.
    const size_t width = lo_text.size();
    for (long v = lo; v <= hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      expand_pattern(list, prefix + digits + suffix, out);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) bad_list(list, "unbalanced or nested brackets");
    if (c == ',' && depth == 0) {
      const std::string pattern = list.substr(start, i - start);
      if (pattern.empty()) bad_list(list, "an empty host name");
      expand_pattern(list, pattern, out);
      start = i + 1;
    }
  }
  if (depth != 0) bad_list(list, "'[' without ']'");
  return out;
}

std::optional<std::pair<std::string, int>> statefulset_seed(const std::string& fqdn) {
  const auto dot = fqdn.find('.');
  const std::string first = fqdn.substr(0, dot);
  const std::string domain = dot == std::string::npos ? "" : fqdn.substr(dot);
  const auto dash = first.rfind('-');
  if (dash == std::string::npos || dash == 0) return std::nullopt;
  long ordinal = 0;
  if (!parse_uint(first.substr(dash + 1), ordinal)) return std::nullopt;
  return std::make_pair(first.substr(0, dash) + "-0" + domain, static_cast<int>(ordinal));
}

discovered_seed discover_seed(const std::function<const char*(const char*)>& env,
                              const std::string& hostname, const std::string& fqdn,
                              std::uint16_t port) {
  auto get = [&](const char* key) -> std::string {
    const char* v = env(key);
    return v ? std::string(v) : std::string();
  };
  auto number = [&](const char* key) {
    long v = -1;
    const std::string text = get(key);
    if (!text.empty() && !parse_uint(text, v))
      throw config_error(std::string(key) + " is '" + text + "', not a number");
    return static_cast<int>(v);
  };
  discovered_seed d;
  if (const std::string seed = get("DEGNN_SEED"); !seed.empty()) {
    d.seed = parse_endpoint(seed, "DEGNN_SEED");
    d.source = "DEGNN_SEED";
    d.is_seed = get("DEGNN_IS_SEED") == "1";
    d.rank_hint = number("DEGNN_RANK");
    return d;
  }
  // The step's own hosts when srun ran on a subset of the job's (SLURM_STEP_NODELIST).
  const std::string step_list = get("SLURM_STEP_NODELIST");
  if (const std::string list = step_list.empty() ? get("SLURM_JOB_NODELIST") : step_list;
      !list.empty()) {
    if (port == 0) throw config_error("--join auto under Slurm needs --listen with a fixed port");
    const auto hosts = expand_slurm_nodelist(list);
    // Several tasks on one host: task with local id L listens on the port + L.
    d.listen_offset = std::max(0, number("SLURM_LOCALID"));
    d.seed = {hosts.front(), port};
    d.source = "Slurm";
    d.rank_hint = number("SLURM_PROCID");
    d.expected_nodes = std::max(0, number("SLURM_NTASKS"));
    // The task with rank 0 is the seed; without SLURM_PROCID, the job's first host is.
    d.is_seed = d.rank_hint >= 0 ? d.rank_hint == 0 : hostname == hosts.front();
    return d;
  }
  if (!get("KUBERNETES_SERVICE_HOST").empty()) {
    if (port == 0)
      throw config_error("--join auto under Kubernetes needs --listen with a fixed port");
    std::string name = fqdn;
    // Without a resolvable subdomain, DEGNN_SERVICE names the headless service.
    if (name.find('.') == std::string::npos && !get("DEGNN_SERVICE").empty())
      name += "." + get("DEGNN_SERVICE");
    const auto pod0 = statefulset_seed(name);
    if (!pod0) {
      throw config_error("--join auto: Kubernetes pod '" + name +
                         "' is not named like a StatefulSet's pod (NAME-K)");
    }
    if (pod0->first.find('.') == std::string::npos) {
      throw config_error("--join auto: pod '" + name +
                         "' has no domain; set the StatefulSet's serviceName (a headless "
                         "service) or DEGNN_SERVICE");
    }
    d.seed = {pod0->first, port};
    d.source = "Kubernetes";
    d.rank_hint = pod0->second;
    d.is_seed = pod0->second == 0;
    return d;
  }
  throw config_error(
      "--join auto: no seed in the environment (looked for DEGNN_SEED=HOST:PORT, Slurm's "
      "SLURM_JOB_NODELIST and Kubernetes' KUBERNETES_SERVICE_HOST); give --join HOST:PORT");
}

std::pair<std::string, std::string> local_host_names() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {"localhost", "localhost"};
  std::string shortname = buf;
  std::string fqdn = shortname;
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  addrinfo* res = nullptr;
  if (::getaddrinfo(buf, nullptr, &hints, &res) == 0 && res) {
    if (res->ai_canonname) fqdn = res->ai_canonname;
    ::freeaddrinfo(res);
  }
  return {shortname, fqdn};
}

}  // namespace degnn
