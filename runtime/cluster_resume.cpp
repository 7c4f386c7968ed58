// Resuming a cluster from its checkpoint folder.
#include "runtime/cluster_resume.hpp"

#include <cstdio>

#include "model/commit_record.hpp"
#include "runtime/cli_options.hpp"

namespace degnn {

cluster_start load_cluster_start(const train_settings& s, const replica_config& rc,
                                 std::uint64_t cluster_id, int parts) {
  if (s.resume.empty()) return {};
  committed_checkpoint c = load_committed_checkpoint(s.resume);
  const std::string where = (c.folder / "COMMIT").string();
  if (c.record.cluster_id != cluster_id)
    throw config_error(where + ": a checkpoint of another run (dataset or --seed differ)");
  if (c.record.parts != parts)
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

}  // namespace degnn
