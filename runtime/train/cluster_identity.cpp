// The cluster identity: every setting that must agree, in text, and its hash.
#include "runtime/train/cluster_identity.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "model/hashing.hpp"
#include "serialization/wire.hpp"

namespace degnn {

namespace {

// The shortest text that reads back as the same value: 0.01f is "0.01", not "0.00999999978".
template <class T>
std::string number(T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::pair<std::string, std::string> split(const std::string& line) {
  const auto eq = line.find('=');
  if (eq == std::string::npos) return {line, ""};
  return {line.substr(0, eq), line.substr(eq + 1)};
}

}  // namespace

cluster_identity identity_of(const train_settings& s, const partition_meta& meta) {
  std::string fanouts;
  for (size_t i = 0; i < s.fanouts.size(); ++i)
    fanouts += (i ? "," : "") + std::to_string(s.fanouts[i]);
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(meta.owner_checksum));
  // Settings that only change what one node prints or writes (metrics, trace, progress, threads,
  // timeouts) are left out: nodes may differ there.
  const std::vector<std::pair<std::string, std::string>> kv = {
      {"protocol", std::to_string(wire::kProtocolVersion)},
      {"dataset", meta.dataset_name},
      {"partition_set", sum},
      {"parts", std::to_string(meta.num_parts)},
      {"model", s.model.model},
      {"layers", std::to_string(s.model.num_layers)},
      {"hidden", std::to_string(s.model.hidden)},
      {"fanouts", fanouts},
      {"lr", number(s.model.lr)},
      {"weight_decay", number(s.model.weight_decay)},
      {"dropout", number(s.model.dropout)},
      {"normalize_features", s.normalize_features},
      {"sparse_features", s.sparse_features ? "true" : "false"},
      {"seed", std::to_string(s.seed)},
      {"pipeline", s.pipeline},
      {"batch_size", std::to_string(s.batch_size)},
      {"epochs", std::to_string(s.epochs)},
      {"max_batches", std::to_string(s.max_batches)},
      {"eval_every", std::to_string(s.eval_every)},
      {"history_bits", std::to_string(s.history_bits)},
      {"history_setup", s.history_setup},
      {"staleness", std::to_string(s.staleness)},
      {"fusion", std::to_string(s.fusion)},
      {"stochastic_rounding", s.stochastic_rounding ? "true" : "false"},
      {"overlap", s.overlap ? "true" : "false"},
      {"allreduce", s.allreduce},
      {"local_bias", number(s.local_bias)},
  };
  cluster_identity id;
  for (const auto& [k, v] : kv)
    id.lines.push_back(k + "=" + v);
  // GAT's settings only for GAT runs: the identity (and so the run id of checkpoints) of the
  // other models stays what it was.
  if (s.model.model == "gat") {
    id.lines.push_back("heads=" + std::to_string(s.model.heads));
    id.lines.push_back("output_heads=" + std::to_string(s.model.output_heads));
    id.lines.push_back("attention_dropout=" + number(s.model.attention_dropout));
    id.lines.push_back("input_dropout=" + number(s.model.input_dropout));
  }
  return id;
}

std::uint64_t cluster_identity::hash() const {
  std::uint64_t h = mix64(0x6465676e6e);  // "degnn"
  for (const auto& line : lines) {
    for (unsigned char c : line)
      h = mix64(h ^ c);
    h = mix64(h ^ 0x0a);
  }
  return h;
}

std::uint64_t cluster_identity::checkpoint_run_id() const {
  cluster_identity kept;
  for (const auto& line : lines) {
    const std::string key = line.substr(0, line.find('='));
    if (key != "epochs" && key != "eval_every" && key != "resume" && key != "resume_step" &&
        key != "checkpoints")
      kept.lines.push_back(line);
  }
  return kept.hash();
}

std::string cluster_identity::difference(const std::vector<std::string>& theirs,
                                         const std::string& me, const std::string& them) const {
  auto on = [](const std::string& who) { return who == "here" ? who : "on " + who; };
  std::map<std::string, std::string> other;
  for (const auto& line : theirs)
    other.insert(split(line));
  for (const auto& line : lines) {
    const auto [key, mine] = split(line);
    const auto it = other.find(key);
    if (it == other.end()) return key + " is " + mine + " " + on(me) + " and missing " + on(them);
    if (it->second != mine) {
      std::string why = key + " is " + mine + " " + on(me) + " and " + it->second + " " + on(them);
      // Nodes that stopped during a commit: some wrote the record, some not. The newer step is
      // safe: a commit is written only after every node saved that step's file.
      auto numeric = [](const std::string& v) {
        return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
      };
      if (key == "resume_step" && numeric(mine) && numeric(it->second))
        why +=
            " (the run stopped during a checkpoint commit; restart every node with "
            "--resume-step " +
            std::max(mine, it->second,
                     [](const auto& a, const auto& b) {
                       return a.size() != b.size() ? a.size() < b.size() : a < b;
                     }) +
            ", whose file every node saved before any wrote its commit; a node that lacks it "
            "says so, then take the other step)";
      return why;
    }
    other.erase(it);
  }
  if (!other.empty())
    return other.begin()->first + " is set " + on(them) + " and unknown " + on(me);
  return {};
}

}  // namespace degnn
