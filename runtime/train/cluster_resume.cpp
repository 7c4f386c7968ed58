// Resuming a cluster from its checkpoint folder.
#include "runtime/train/cluster_resume.hpp"

#include <cstdio>

#include "model/commit_record.hpp"
#include "model/crc32.hpp"
#include "model/durable_file.hpp"
#include "model/model_file.hpp"
#include "runtime/process/config_error.hpp"

namespace degnn {

namespace {

cluster_start start_from(committed_checkpoint c, const replica_config& rc, std::uint64_t cluster_id,
                         int parts) {
  const std::string where = (c.folder / "COMMIT").string();
  // A folder without any commit record (a crash during the run's first commit) cannot say whose
  // file it holds; the file's own checksum and the model check below still apply.
  const bool unrecorded = c.record.cluster_id == 0 && c.record.parts == 0;
  if (!unrecorded && c.record.cluster_id != cluster_id)
    throw config_error(where +
                       ": a checkpoint of another run (the dataset, its partitions or a "
                       "training setting other than --epochs and --eval-every differ)");
  if (!unrecorded && c.record.parts != parts)
    throw config_error(where + ": a checkpoint of " + std::to_string(c.record.parts) +
                       " partitions, this run has " + std::to_string(parts));
  model_replica fresh(rc);
  if (!(c.state.model.config() == fresh.model().config()))
    throw config_error(where +
                       ": the checkpoint holds a different model than the options describe");
  fresh.model() = std::move(c.state.model);
  auto state = std::make_shared<replica_start>();
  state->parameters = fresh.parameters();
  state->optimizer = c.state.optimizer.state();
  std::printf("resuming at step %llu from %s\n",
              static_cast<unsigned long long>(c.record.next_step),
              (c.folder / c.record.file).c_str());
  return {c.record.next_step, std::move(state)};
}

}  // namespace

cluster_start load_cluster_start(const train_settings& s, const replica_config& rc,
                                 std::uint64_t cluster_id, int parts) {
  if (s.resume.empty() && !s.init.empty()) {  // every replica from the file, optimiser fresh
    model_replica fresh(rc);
    init_from_model_file(fresh.model(), s.init, s.normalize_features);
    auto state = std::make_shared<replica_start>();
    state->parameters = fresh.parameters();
    return {0, std::move(state)};
  }
  if (s.resume.empty()) return {};
  if (s.resume_step) return load_cluster_start_at(s, rc, cluster_id, parts, *s.resume_step);
  return start_from(load_committed_checkpoint(s.resume), rc, cluster_id, parts);
}

cluster_start load_cluster_start_at(const train_settings& s, const replica_config& rc,
                                    std::uint64_t cluster_id, int parts, std::uint64_t next_step) {
  return start_from(load_checkpoint_of_step(s.resume, next_step), rc, cluster_id, parts);
}

cluster_start load_cluster_start_in(const std::string& dir, const replica_config& rc,
                                    std::uint64_t cluster_id, int parts, std::uint64_t next_step) {
  return start_from(load_checkpoint_of_step(dir, next_step), rc, cluster_id, parts);
}

void add_resume_identity(cluster_identity& identity, const train_settings& s, bool static_peers,
                         const cluster_start& start) {
  const std::string resumes = s.resume.empty() ? "none" : std::to_string(start.next_step);
  identity.lines.push_back(static_peers ? "resume_step=" + resumes
                                        : "resume=" + std::string(s.resume.empty() ? "no" : "yes"));
  identity.lines.push_back("checkpoints=" + std::string(s.checkpoint_dir.empty() ? "off" : "on") +
                           " every " + std::to_string(s.checkpoint_every));
  if (!s.init.empty()) {  // every node must start from the same weights
    const auto bytes = read_whole_file(s.init);
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08x",
                  bytes ? crc32_update(0, bytes->data(), bytes->size()) : 0u);
    identity.lines.push_back(std::string("init=") + crc);
  }
  if (s.epochs == 0) identity.lines.push_back("infer=yes");
}

}  // namespace degnn
