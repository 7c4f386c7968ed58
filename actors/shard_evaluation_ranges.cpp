// A layer of the evaluation one range of owned nodes at a time, for shards with a bounded halo
// cache (docs/design.md section 6): each range pulls the halo rows it reads that the cache does
// not hold and lets them go after, so that no layer holds its whole halo's rows.
#include <algorithm>

#include "actors/shard_evaluation_detail.hpp"

namespace degnn::shard_detail {

namespace {

// The layer's last range is done: its rows become h^(layer) and the coordinator gets its answer.
void finish_range_by_range(shard_state& st, evaluation_job& job) {
  if (job.keep_features) st.halo_features_loaded = true;
  if (st.eval_h.size() <= static_cast<size_t>(job.layer))
    st.eval_h.resize(static_cast<size_t>(job.layer) + 1);
  st.eval_h[static_cast<size_t>(job.layer)] = std::move(job.next);
  job.rp.deliver(layer_result(st, job.layer, job.step));
}

}  // namespace

// The ranges are those of the whole-layer pass, so the rows computed are the same bit for bit; a
// feature row the cache holds is read there, any other row several ranges read travels once for
// each.
void evaluate_range_by_range(self_ptr self, std::shared_ptr<evaluation_job> job) {
  auto& st = self->state;
  const auto& part = *st.part;
  std::vector<size_t> needed;  // halo rows the range reads, ascending
  node_id end = 0;
  try {
    // Ranges that read no halo row run here, one after the other, without a round trip.
    while (true) {
      end = range_end(st, job->begin);
      needed.clear();
      for (edge_offset e = part.indptr[static_cast<size_t>(job->begin)];
           e < part.indptr[static_cast<size_t>(end)]; ++e) {
        if (part.src_local[static_cast<size_t>(e)] < 0)
          needed.push_back(
              static_cast<size_t>(halo_index(part, part.src_global[static_cast<size_t>(e)])));
      }
      if (!needed.empty()) break;
      const Matrix none;
      evaluate_owned(st, job->layer, job->begin, end, {none, {}, {}}, job->next, job->scratch);
      job->begin = end;
      if (end >= part.num_owned()) {
        finish_range_by_range(st, *job);
        return;
      }
    }
  } catch (const std::exception& e) {
    ++st.rejected;
    job->rp.deliver(as_error(st, actor_errc::rejected, std::string("evaluate: ") + e.what()));
    return;
  }
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  // Feature rows the halo cache holds (an earlier range of the set-up kept them) are read there;
  // only the others travel.
  std::vector<size_t> cached, fetched;  // indexes into needed
  for (size_t j = 0; j < needed.size(); ++j)
    (job->layer == 1 && st.halo.holds(0, needed[j]) ? cached : fetched).push_back(j);
  std::vector<size_t> fetch_rows(fetched.size());
  for (size_t j = 0; j < fetched.size(); ++j)
    fetch_rows[j] = needed[fetched[j]];
  auto pulls = halo_requests(st, *job, fetch_rows);
  for (auto& pos : pulls.positions)
    for (size_t& at : pos)
      at = fetched[at];  // a fetched row's place among the range's rows
  gather(
      self, halo_atom_v, std::move(pulls.requests), st.settings.timeout,
      [self, job, end, needed = std::move(needed), cached = std::move(cached),
       positions = std::move(pulls.positions)](std::vector<wire_message>& replies) {
        auto& st = self->state;
        const auto& part = *st.part;
        try {
          Matrix rows(static_cast<Eigen::Index>(needed.size()),
                      layer_rows(st, job->layer - 1).cols());
          std::vector<std::int32_t> degree(needed.size(), 0);
          take_halo_rows(st, replies, positions, job->bits, rows, degree);
          for (size_t j : cached) {
            rows.row(static_cast<Eigen::Index>(j)) = st.halo.kept_row(0, needed[j]);
            degree[j] = part.halo_degree[needed[j]];
          }
          if (job->keep_features && !st.halo_features_loaded) {
            std::vector<node_id> nodes(needed.size());
            for (size_t j = 0; j < needed.size(); ++j)
              nodes[j] = part.halo[needed[j]];
            keep_feature_rows(st, nodes, rows, job->step);
          }
          for (size_t j = 0; j < needed.size(); ++j)
            job->where[needed[j]] = static_cast<std::int32_t>(j);
          evaluate_owned(st, job->layer, job->begin, end, {rows, job->where, degree}, job->next,
                         job->scratch);
          for (size_t i : needed)
            job->where[i] = -1;
          job->begin = end;
        } catch (const std::exception& e) {
          ++st.rejected;
          job->rp.deliver(as_error(st, actor_errc::rejected, std::string("evaluate: ") + e.what()));
          return;
        }
        if (end < part.num_owned())
          evaluate_range_by_range(self, job);
        else
          finish_range_by_range(st, *job);
      },
      [self, job, owners = std::move(pulls.owners)](std::size_t r, const caf::error& err) {
        job->rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                 "halo request to partition " + std::to_string(owners[r]) +
                                     " failed: " + caf::to_string(err)));
      });
}

}  // namespace degnn::shard_detail
