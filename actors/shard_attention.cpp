// The shard's side of a decentralized GAT step (docs/design.md section 2). A GAT target's
// neighbour weights need the target's own er = a_r . z_v, which its owner only knows once the
// owner's own shard has computed the target's row; so an owner pushes twice. The first push is
// served as for the other models, except that its answer carries only the own rows asked for.
// The second carries er; the shard answers with each target's attention partial over the
// neighbours it computed. The attention return gets d loss / d er back; the gradient share it
// gives is kept and added at the step's gradient phase, with the own rows' gradient that the
// owner sends in a plain gradient return once every shard answered.
#include <stdexcept>
#include <string>

#include "actors/shard_internal.hpp"

namespace degnn::shard_detail {

namespace {

// The step's push from `sender` once the step was computed, or a wire error naming `what`.
served_push& computed_push(shard_state& st, std::uint64_t step, std::int32_t sender,
                           const char* what) {
  const auto it = st.served.find(step);
  if (it == st.served.end() || !it->second.computed || sender < 0 ||
      static_cast<size_t>(sender) >= it->second.pushes.size() ||
      !it->second.pushes[static_cast<size_t>(sender)]) {
    throw wire::wire_error(std::string(what) + " for step " + std::to_string(step) + " from part " +
                           std::to_string(sender) + ": this shard holds no computed push of it");
  }
  return *it->second.pushes[static_cast<size_t>(sender)];
}

std::vector<std::int64_t> indptr_of(std::span<const std::int32_t> counts) {
  std::vector<std::int64_t> indptr(counts.size() + 1, 0);
  for (size_t t = 0; t < counts.size(); ++t)
    indptr[t + 1] = indptr[t] + counts[t];
  return indptr;
}

}  // namespace

bool attention_model(const shard_state& st) {
  return st.replica->config().model == "gat";
}

wire_message serve_attention_push(shard_state& st, const wire_message& m) {
  const auto push = wire::decode_attention_push(st.ctx, m.bytes);
  const std::uint64_t step = push.h.step;
  served_push& p = computed_push(st, step, push.h.sender, "an attention push");
  if (p.attended) throw wire::wire_error("a second attention push for one push");
  const gat_layer& layer = pushed_gat_layer(st.replica->model());
  if (push.er.rows() != static_cast<Eigen::Index>(p.push.targets.size()) ||
      push.er.cols() != layer.heads()) {
    throw wire::wire_error("an attention push's er is " + std::to_string(push.er.rows()) + " x " +
                           std::to_string(push.er.cols()) + ", not targets x heads (" +
                           std::to_string(p.push.targets.size()) + " x " +
                           std::to_string(layer.heads()) + ")");
  }
  // The step's weights: nothing is applied between a step's forward and its gradient phase.
  const std::uint64_t* needed = st.weights.needed(step);
  if (!needed || push.applies != *needed || *needed != st.weights.applied())
    throw wire::wire_error("an attention push for step " + std::to_string(step) +
                           " names other weights than the step computed with");
  stage_timer timer(st.stages, stage::forward, step);
  served_step& s = st.served.at(step);
  const auto q = static_cast<size_t>(push.h.sender);
  const push_view view{p.push.rows, p.push.targets, p.push.counts, p.push.neighbors, {}};
  Matrix rows =
      gather_neighbor_rows(s.plan, q, view, s.outs, level_width(st, st.settings.top_level()));
  std::vector<std::int32_t> src(p.push.neighbors.size());
  for (size_t j = 0; j < src.size(); ++j)
    src[j] = static_cast<std::int32_t>(j);
  const std::uint64_t seed =
      attention_dropout_seed(step_dropout_seed(st.settings.seed, step), st.settings.top_level());
  attention_partial part =
      gat_push_forward(layer, indptr_of(p.push.counts), std::move(src), std::move(rows), push.er,
                       p.push.targets, p.push.neighbors, &seed, p.attention);
  p.attended = true;
  st.work.edges += p.push.neighbors.size();
  wire::attention_partial_rows res{.h = {step, st.part->part},
                                   .values = std::move(part.value),
                                   .score_max = std::move(part.max),
                                   .exp_sum = std::move(part.sum)};
  auto msg = pack(wire::kind::attention_partial, wire::encode(st.ctx, res));
  count(st, push.h.sender, msg);
  return msg;
}

wire_message serve_attention_return(shard_state& st, const wire_message& m) {
  auto g = wire::decode_attention_return(st.ctx, m.bytes);
  const std::uint64_t step = g.h.step;
  served_push& p = computed_push(st, step, g.h.sender, "an attention_return");
  if (!p.attended) throw wire::wire_error("an attention_return before the attention push");
  if (p.attention_grads) throw wire::wire_error("a second attention_return for one push");
  const gat_layer& layer = pushed_gat_layer(st.replica->model());
  const auto targets = static_cast<Eigen::Index>(p.push.targets.size());
  const Eigen::Index width = static_cast<Eigen::Index>(layer.heads()) * layer.head_width();
  if (g.heads != static_cast<std::uint32_t>(layer.heads()) || g.grads.rows() != targets ||
      (targets > 0 && g.grads.cols() != width) || g.heads_out.rows() != targets ||
      g.score_max.rows() != targets || g.exp_sum.rows() != targets)
    throw wire::wire_error("an attention_return does not fit the push's targets");
  if (targets == 0) {  // empty matrices travel without their width
    g.grads.resize(0, width);
    g.heads_out.resize(0, width);
    g.score_max.resize(0, layer.heads());
    g.exp_sum.resize(0, layer.heads());
  }
  stage_timer timer(st.stages, stage::backward, step);
  const attention_partial merged{.max = g.score_max, .sum = g.exp_sum, .value = {}};
  if (!merged_softmax_fits(p.attention, merged))
    throw wire::wire_error(
        "an attention_return's merged softmax cannot hold this shard's edges (a sum below 1 or a "
        "maximum below one of their scores)");
  auto share = gat_push_backward_apart(layer, p.attention, merged, g.heads_out, g.grads);
  // Finite inputs can still overflow (huge gradients); nothing non-finite enters the replica.
  if (!share.weight.allFinite() || !share.attn_l.allFinite() || !share.rows.allFinite() ||
      !share.er.allFinite())
    throw wire::wire_error("an attention_return whose gradient share is not finite");
  wire::attention_return answer{
      .h = {step, st.part->part}, .heads = g.heads, .grads = std::move(share.er)};
  p.attention_grads = std::move(share);
  auto msg = pack(wire::kind::attention_return, wire::encode(st.ctx, answer));
  count(st, g.h.sender, msg);
  return msg;
}

void add_attention_gradients(shard_state& st, const served_step& s) {
  gat_layer& layer = pushed_gat_layer(st.replica->model());
  for (const auto& p : s.pushes) {
    if (!p || !p->attention_grads)
      throw wire::wire_error("a push without its attention gradient at the gradient phase");
    p->attention_grads->add_to(layer);
  }
}

}  // namespace degnn::shard_detail
