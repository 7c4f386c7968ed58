// The seed's partition and checkpoint files as the node actor serves them: chunks to joiners,
// checkpoint files offered to the members the seed accepted (joiners, replacements) only.
#include "runtime/node/node_state.hpp"
#include "runtime/node/partition_transfer.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn::node_detail {

// A chunk of a partition file, or of a checkpoint file offered to accepted members.
caf::result<std::vector<char>> serve_file_chunk(node_pointer self, const std::vector<char>& b) {
  auto& st = self->state;
  if (!st.seed) return actor_error(actor_errc::rejected, "only the seed serves partition files");
  try {
    // A request is a few hundred bytes: anything larger is refused unread.
    auto req = wire::decode_file_chunk_request(wire::context{.max_bytes = 4096}, b);
    const std::string prefix = kSeedCheckpointPrefix;
    if (req.path.rfind(prefix, 0) != 0 || st.seed->checkpoints.empty())
      return wire::encode(wire::context{}, read_chunk(st.seed->partitions, st.seed->files, req));
    // A checkpoint file: read from the checkpoint folder, given to the joiners and replacements
    // this seed accepted only (the model is not for whoever reaches the seed).
    const auto sender = self->current_sender();
    if (!sender || !st.accepted.count(sender->node()))
      throw std::runtime_error("'" + req.path + "' is offered to the cluster's members only");
    const wire::file_entry* f = st.seed->files.find(req.path);
    if (!f) throw std::runtime_error("'" + req.path + "' is not offered");
    wire::file_manifest one{{*f}};
    one.files[0].path = req.path = req.path.substr(prefix.size());
    wire::file_chunk c = read_chunk(st.seed->checkpoints, one, req);
    c.path = prefix + c.path;
    return wire::encode(wire::context{}, c);
  } catch (const std::exception& e) {
    if (st.log)
      st.log("refused a file chunk to " + sender_name(self->current_sender()) + ": " + e.what());
    return actor_error(actor_errc::rejected, e.what());
  }
}

// The seed offers a checkpoint file (under checkpoint/) to the members it accepted.
caf::result<bool> offer_checkpoint_file(node_pointer self, const std::string& path,
                                        const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !st.seed || st.seed->checkpoints.empty())
    return actor_error(actor_errc::rejected, "asked outside the seed's process");
  try {
    wire::file_entry e = entry_of(st.seed->checkpoints, path);
    e.path = kSeedCheckpointPrefix + path;
    auto& files = st.seed->files.files;
    std::erase_if(files, [&](const wire::file_entry& f) { return f.path == e.path; });
    files.push_back(std::move(e));
    return true;
  } catch (const std::exception& e) {
    return actor_error(actor_errc::internal, e.what());
  }
}

// The seed's partition file manifest, to a joiner.
caf::result<std::vector<char>> give_manifest(node_pointer self) {
  auto& st = self->state;
  if (!st.seed) return actor_error(actor_errc::rejected, "only the seed serves partition files");
  return wire::encode(wire::context{}, st.seed->files);
}

}  // namespace degnn::node_detail
