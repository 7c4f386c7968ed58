// Tests of model/batch_prefetcher.hpp: the background batches equal the sampler's and the gather
// done in the loop, in job order; an error reaches next(); stopping early does not hang.
#include "model/batch_prefetcher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "model/sampler.hpp"

using namespace degnn;

namespace {

const dataset& cora() {
  static const dataset d = load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora");
  return d;
}

}  // namespace

class BatchPrefetcherDepth : public ::testing::TestWithParam<std::size_t> {};

// Depth 0 prepares each batch in next() itself, on the caller's thread: the same batches.
TEST_P(BatchPrefetcherDepth, HandsOutExactlyTheBatchesTheLoopWouldMakeInOrder) {
  const dataset& d = cora();
  const std::vector<int> fanouts = {5, 10};
  const auto batches = make_batches(d.train, 16, 3, 0);
  std::vector<batch_prefetcher::job> jobs;
  for (size_t i = 0; i < batches.size(); ++i)
    jobs.push_back({batches[i], 100 + i});
  batch_prefetcher prefetch(d, fanouts, 3, jobs, GetParam());
  neighbor_sampler sampler(d.graph);
  for (size_t i = 0; i < batches.size(); ++i) {
    const prepared_batch p = prefetch.next();
    const sampled_batch want = sampler.sample(batches[i], fanouts, 3, 100 + i);
    ASSERT_EQ(p.batch.blocks.size(), want.blocks.size());
    for (size_t l = 0; l < want.blocks.size(); ++l) {
      EXPECT_EQ(p.batch.blocks[l].src_nodes, want.blocks[l].src_nodes) << i << " " << l;
      EXPECT_EQ(p.batch.blocks[l].indices, want.blocks[l].indices) << i << " " << l;
    }
    ASSERT_EQ(p.x.rows(), static_cast<Eigen::Index>(want.inputs().size()));
    for (size_t r = 0; r < want.inputs().size(); ++r)
      EXPECT_TRUE(p.x.row(static_cast<Eigen::Index>(r)) == d.features.row(want.inputs()[r]));
    ASSERT_EQ(p.labels.size(), batches[i].size());
    for (size_t r = 0; r < batches[i].size(); ++r)
      EXPECT_EQ(p.labels[r], d.labels[static_cast<size_t>(batches[i][r])]);
  }
  EXPECT_THROW(prefetch.next(), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(BatchPrefetcher, BatchPrefetcherDepth, ::testing::Values(0, 1, 2),
                         [](const auto& info) { return "Depth" + std::to_string(info.param); });

TEST(BatchPrefetcher, AnErrorReachesNextAfterTheBatchesBeforeIt) {
  const dataset& d = cora();
  std::vector<batch_prefetcher::job> jobs = {{{1, 2}, 0}, {{d.num_nodes()}, 1}, {{3}, 2}};
  batch_prefetcher prefetch(d, {5}, 1, jobs);
  EXPECT_EQ(prefetch.next().labels.size(), 2u);
  EXPECT_THROW(prefetch.next(), std::out_of_range);  // the sampler's error for a bad seed
}

TEST(BatchPrefetcher, GoingAwayBeforeTheLastBatchStopsTheThread) {
  const dataset& d = cora();
  const auto batches = make_batches(d.train, 4, 1, 0);
  std::vector<batch_prefetcher::job> jobs;
  for (size_t i = 0; i < batches.size(); ++i)
    jobs.push_back({batches[i], i});
  // The destructor must return although most jobs were never taken: it runs on a thread of its
  // own, so that a destructor that hangs fails the test instead of hanging it.
  std::promise<void> gone;
  std::future<void> returned = gone.get_future();
  std::thread owner([&d, jobs, gone = std::move(gone)]() mutable {
    {
      batch_prefetcher prefetch(d, {5, 5}, 1, jobs);
      prefetch.next();
    }
    gone.set_value();
  });
  if (returned.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    owner.detach();
    FAIL() << "the prefetcher's destructor did not return within 60 s";
  }
  owner.join();
}
