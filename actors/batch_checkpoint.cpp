// The batch actor's part of a coordinated checkpoint (docs/design.md section 9). Phase 1: at a step
// boundary the coordinator asks every batch actor to save; it snapshots its replica in memory at
// once (the next step may change it) and a short-lived detached actor writes the snapshot, so the
// batch actor goes on serving while the disk works; the reply (size, CRC-32) comes when the file
// is durable. Phase 2, once every replica confirmed the same file: the commit record.
#include <filesystem>

#include "actors/batch_internal.hpp"
#include "model/commit_record.hpp"
#include "model/durable_file.hpp"

namespace degnn::batch_detail {
namespace {

// Writes one snapshot and stops; answers the error text, empty when the file is durable.
caf::behavior checkpoint_writer(caf::event_based_actor* self) {
  return {
      [self](save_atom, const std::string& path, const std::string& bytes) {
        self->quit();
        try {
          write_file_durably(path, bytes);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      },
  };
}

wire_message confirmation(batch_state& st, std::uint64_t step, std::vector<std::uint64_t> counts) {
  wire::control out{.h = {step, st.part->part}, .what = wire::control_kind::result};
  out.counts = std::move(counts);
  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
  count(st, kCoordinatorPart, msg);
  return msg;
}

}  // namespace

caf::result<wire_message> save_replica(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  const auto c = wire::decode_control(st.ctx, m.bytes);
  if (st.settings.checkpoint_dir.empty())
    throw std::runtime_error("asked to checkpoint, but this node has no checkpoint folder");
  const std::filesystem::path dir =
      replica_checkpoint_dir(st.settings.checkpoint_dir, st.part->part);
  const std::string file = checkpoint_file_name(c.h.step);
  if (c.what == wire::control_kind::commit) {
    if (c.counts.size() != 2 || c.counts[1] > 0xffffffffu)
      throw wire::wire_error("a commit names the file's size and CRC-32");
    std::error_code ec;
    if (std::filesystem::file_size(dir / file, ec) != c.counts[0] || ec)
      throw std::runtime_error("cannot commit " + (dir / file).string() +
                               ": it is missing or of another size");
    write_commit_record(dir, {.next_step = c.h.step,
                              .cluster_id = st.settings.run_id,
                              .parts = st.book->num_parts(),
                              .file = file,
                              .size = c.counts[0],
                              .crc = static_cast<std::uint32_t>(c.counts[1])});
    return confirmation(st, c.h.step, {});
  }
  if (c.what != wire::control_kind::checkpoint)
    throw wire::wire_error("a save is a checkpoint or a commit");
  std::filesystem::create_directories(dir);
  std::string bytes = encode_checkpoint(st.replica->model(), st.replica->optimizer());
  const std::uint64_t size = bytes.size();
  const std::uint64_t crc = checkpoint_crc(bytes);
  auto writer = self->home_system().spawn<caf::detached>(checkpoint_writer);
  auto rp = self->make_response_promise<wire_message>();
  self->request(writer, st.settings.timeout, save_atom_v, (dir / file).string(), std::move(bytes))
      .then(
          [self, rp, step = c.h.step, size, crc](const std::string& error) mutable {
            auto& st = self->state;
            if (!error.empty()) {
              rp.deliver(as_error(st, actor_errc::internal, "checkpoint not written: " + error));
              return;
            }
            // A throw here would leave the promise unanswered until the coordinator's timeout.
            try {
              rp.deliver(confirmation(st, step, {size, crc}));
            } catch (const std::exception& e) {
              rp.deliver(as_error(st, actor_errc::internal,
                                  std::string("checkpoint written, not confirmed: ") + e.what()));
            }
          },
          [self, rp](caf::error& e) mutable {
            rp.deliver(as_error(self->state, actor_errc::internal,
                                "checkpoint writer failed: " + self->system().render(e)));
          });
  return rp;
}

}  // namespace degnn::batch_detail
