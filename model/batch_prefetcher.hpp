// Prepares mini-batches (sampling, the input-feature gather, labels) on a background thread, one
// ahead of the training loop, so that sampling overlaps compute. The batches are exactly those
// the loop would make itself: sampling is keyed by (seed, step), never by thread or timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "model/block.hpp"
#include "model/dataset.hpp"
#include "model/sparse_input.hpp"
#include "model/tensor.hpp"

namespace degnn {

struct prepared_batch {
  sampled_batch batch;
  Matrix x;  ///< input features, one row per batch.inputs() entry (dense features, if gathered)
  sparse_rows xs;  ///< the same rows when the dataset's features are sparse (x is then empty)
  std::vector<std::int32_t> labels;  ///< one per seed
  double prepare_s = 0;              ///< time the background thread spent on it
};

class neighbor_sampler;

/// One batch prepared in the calling thread: sampled with (seed, step), its input features
/// gathered and its labels looked up. What the prefetcher does in the background.
/// gather_dense false: dense features are not gathered (the model reads them in place through a
/// feature_table); compressed ones always are.
prepared_batch prepare_batch(neighbor_sampler& sampler, const dataset& d,
                             std::span<const node_id> seeds, std::span<const int> fanouts,
                             std::uint64_t seed, std::uint64_t step, bool gather_dense = true);

class batch_prefetcher {
 public:
  struct job {
    std::vector<node_id> seeds;
    std::uint64_t step = 0;
  };

  /// Starts preparing `jobs` in order, at most `depth` ahead of next(); depth 0: no thread, next()
  /// prepares each batch itself (the same batches). d must outlive this.
  batch_prefetcher(const dataset& d, std::vector<int> fanouts, std::uint64_t seed,
                   std::vector<job> jobs, std::size_t depth = 1, bool gather_dense = true);
  ~batch_prefetcher();  ///< stops the thread (a batch being sampled is finished first)
  batch_prefetcher(const batch_prefetcher&) = delete;
  batch_prefetcher& operator=(const batch_prefetcher&) = delete;

  /// The next job's batch, waiting for it if needed; rethrows an error of its preparation.
  /// Throws std::out_of_range after the last job.
  prepared_batch next();

 private:
  void run();

  const dataset& d_;
  std::vector<int> fanouts_;
  std::uint64_t seed_;
  std::vector<job> jobs_;
  std::size_t depth_;
  bool gather_dense_;
  std::size_t taken_ = 0;                      ///< jobs handed out by next()
  std::unique_ptr<neighbor_sampler> sampler_;  ///< depth 0: next()'s own

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<prepared_batch> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;  ///< started in the constructor's body, once every member exists
};

}  // namespace degnn
