// The background batch preparation: one thread, a queue of at most `depth` batches.
#include "model/batch_prefetcher.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "model/sampler.hpp"

namespace degnn {

prepared_batch prepare_batch(neighbor_sampler& sampler, const dataset& d,
                             std::span<const node_id> seeds, std::span<const int> fanouts,
                             std::uint64_t seed, std::uint64_t step, bool gather_dense) {
  const auto began = std::chrono::steady_clock::now();
  prepared_batch p;
  p.batch = sampler.sample(seeds, fanouts, seed, step);
  const auto& inputs = p.batch.inputs();
  if (d.sparse_features) {
    p.xs = gather_rows(*d.sparse_features, inputs);
  } else if (gather_dense) {
    const auto n = static_cast<std::int64_t>(inputs.size());
    p.x.resize(n, d.features.cols());
    // Random reads of whole rows: threads overlap their memory latency.
#pragma omp parallel for schedule(static) if (n >= 4096)
    for (std::int64_t r = 0; r < n; ++r)
      p.x.row(r) = d.features.row(inputs[static_cast<size_t>(r)]);
  }
  p.labels.resize(seeds.size());
  for (size_t r = 0; r < seeds.size(); ++r)
    p.labels[r] = d.labels[static_cast<size_t>(seeds[r])];
  p.prepare_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return p;
}

batch_prefetcher::batch_prefetcher(const dataset& d, std::vector<int> fanouts, std::uint64_t seed,
                                   std::vector<job> jobs, std::size_t depth, bool gather_dense)
    : d_(d),
      fanouts_(std::move(fanouts)),
      seed_(seed),
      jobs_(std::move(jobs)),
      depth_(depth),
      gather_dense_(gather_dense) {
  if (depth_ == 0)
    sampler_ = std::make_unique<neighbor_sampler>(d_.graph);
  else
    worker_ = std::thread([this] { run(); });
}

batch_prefetcher::~batch_prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void batch_prefetcher::run() {
  // Half the cores sample; the training loop's kernels keep theirs.
  omp_set_num_threads(std::max(1, omp_get_num_procs() / 2));
  neighbor_sampler sampler(d_.graph);
  try {
    for (const job& j : jobs_) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
        if (stop_) return;
      }
      prepared_batch p =
          prepare_batch(sampler, d_, j.seeds, fanouts_, seed_, j.step, gather_dense_);
      {
        std::lock_guard lock(mutex_);
        ready_.push_back(std::move(p));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

prepared_batch batch_prefetcher::next() {
  if (taken_ >= jobs_.size()) throw std::out_of_range("batch_prefetcher: no job left");
  if (depth_ == 0) {
    const job& j = jobs_[taken_++];
    return prepare_batch(*sampler_, d_, j.seeds, fanouts_, seed_, j.step, gather_dense_);
  }
  std::unique_lock lock(mutex_);
  // An error ends the queue: batches prepared before it are still handed out in order.
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);
  prepared_batch p = std::move(ready_.front());
  ready_.pop_front();
  ++taken_;
  lock.unlock();
  changed_.notify_all();
  return p;
}

}  // namespace degnn
