// The settings of a training run (`degnn train`, `bench train`, `node`): a plain struct that
// runtime/cli/train_options.cpp fills from the options and validates, naming the option.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/faults/link_faults.hpp"
#include "actors/worker_settings.hpp"
#include "model/replica.hpp"

namespace degnn {

struct train_settings {
  std::string data;
  std::string partitions;  ///< pre-made partition set; empty = partition in memory
  std::string cache_dir;   ///< folder of the parsed-dataset cache; empty = the per-user default
  std::string pipeline;    ///< single | centralized | decentralized
  int parts = 1;
  std::string partition_method = "metis";
  replica_config model;
  std::string normalize_features = "none";  ///< none | row (model/feature_transform.hpp)
  bool sparse_features = false;  ///< one process: features as compressed rows (sparse_input.hpp)
  /// Part files' feature rows read into memory instead of mapped (part_loading).
  bool partition_in_memory = false;
  std::vector<int> fanouts;   ///< seed-first
  int batch_size = 1024;      ///< seeds per step and worker
  int global_batch_size = 0;  ///< seeds per step over all workers, until resolve_batch_size
  int epochs = 10;
  int eval_every = 1;
  std::uint64_t max_batches = 0;  ///< stop each epoch after this many steps (0 = all): measurements
  std::uint64_t seed = 1;
  std::string metrics;     ///< JSON lines file, empty = none
  std::string trace;       ///< Chrome trace event file of a cluster run, empty = none
  std::string checkpoint;  ///< best-validation checkpoint file, empty = none
  std::string resume;      ///< checkpoint to start from (clusters: a checkpoint folder)
  std::string init;        ///< model file whose weights the run starts from, empty = none
  std::string save_model;  ///< model file written when training ends, empty = none
  /// Every evaluation writes the nodes' predictions here (clusters: DIR/part-K per partition),
  /// with layer predictions_embeddings's output when > 0; empty = none.
  std::string predictions;
  std::int32_t predictions_embeddings = 0;
  std::optional<std::uint64_t> resume_step;  ///< clusters: that step's checkpoint, not the newest
  std::string checkpoint_dir;                ///< clusters: coordinated checkpoints, empty = none
  std::uint64_t checkpoint_every = 0;        ///< clusters: also every N steps of an epoch
  bool progress = true;                      ///< live progress line on a terminal
  int timeout_s = 120;                       ///< limit of every request between actors
  int history_bits = 8;                 ///< decentralized: bits per historical value (32 = off)
  std::string history_setup = "exact";  ///< decentralized: exact or quantized (halo rows)
  /// Rows per halo or feature message are capped near this many payload bytes
  /// (actors/worker_settings.hpp). No option: tests lower it.
  std::size_t max_row_payload_bytes = kMaxRowPayloadBytes;
  int evaluation_range = 8192;  ///< owned nodes per range of an evaluation layer (tests lower it)
  int staleness = 1;  ///< decentralized: a halo row used was confirmed at most this many steps ago
  /// clusters: bytes of halo rows a worker keeps (--halo-cache-mb); -1 = decentralized every
  /// row, centralized none
  std::int64_t halo_cache_bytes = -1;
  double local_bias =
      1;                ///< decentralized: remote share of a local expansion's fanout (1 = uniform)
  int threads = 0;      ///< OpenMP threads per worker, 0 = automatic
  bool overlap = true;  ///< decentralized: prepare step i+1 during step i's all-reduce
  std::string allreduce = "ring";  ///< clusters: ring among the workers, or star (coordinator)
  int fusion = 2;  ///< decentralized CG fusion: 2 = both levels, 1 = within a push, 0 = none
  bool stochastic_rounding = false;
  std::shared_ptr<const fault_policy> faults;  ///< clusters: faults on the send path, null = none
};

/// Once the number of workers is known: --global-batch-size B becomes B / workers seeds per
/// worker (B must be a multiple); nothing to do without it.
void resolve_batch_size(train_settings& s, int workers);

}  // namespace degnn
