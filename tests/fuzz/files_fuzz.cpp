// Fuzzes every binary or line file a node reads from disk or receives from the seed: a partition
// set's part file, partitions.meta and owner.bin, a checkpoint, a commit record and the dataset
// cache. The first byte picks the file; the rest replaces that one file in an otherwise valid
// set made at start-up. A loader may refuse (data_error, or invalid_argument for an impossible
// part); anything else escaping it, or a sanitizer report, is a defect.
// DEGNN_FUZZ_WRITE_SEEDS=DIR writes one valid input per file kind to DIR and exits (the seed
// corpus in tests/fuzz/corpus/files).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "model/checkpoint.hpp"
#include "model/commit_record.hpp"
#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/synthetic_graph.hpp"
#include "tests/fuzz/fuzz_files.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

enum kind : std::uint8_t { part_file, meta_file, owner_file, checkpoint_bytes, commit, cache };
constexpr int kKinds = 6;

struct fixture {
  fs::path dir;  ///< this process's scratch folder, removed at exit
  fixture() = default;
  fixture(fixture&&) = default;
  ~fixture() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }                               ///< this process's scratch folder
  fs::path parts;                 ///< a valid 2-part partition set of a tiny synthetic graph
  std::string originals[kKinds];  ///< each file's valid bytes
  fs::path paths[kKinds];         ///< where each kind is read from
};

fixture make_fixture() {
  fixture f;
  f.dir = fuzz_scratch_dir("files");
  f.parts = f.dir / "parts";
  const dataset d = generate_synthetic(
      {.num_nodes = 24, .num_edges = 60, .num_classes = 3, .num_features = 5, .seed = 2});
  std::vector<std::int32_t> owner(static_cast<size_t>(d.num_nodes()));
  for (size_t i = 0; i < owner.size(); ++i)
    owner[i] = static_cast<std::int32_t>(i % 2);
  write_partitions(d, owner, f.parts, "fuzz", 1, 2);
  f.paths[part_file] = partition_file(f.parts, 0);
  f.paths[meta_file] = f.parts / "partitions.meta";
  f.paths[owner_file] = f.parts / "owner.bin";
  const gnn_model model({.in_dim = 5, .hidden = 4, .num_classes = 3, .num_layers = 2}, 1);
  f.originals[checkpoint_bytes] = encode_checkpoint(model, adam{});
  fs::create_directories(f.dir / "ckpt");
  write_commit_record(f.dir / "ckpt", {.next_step = 7,
                                       .cluster_id = 42,
                                       .parts = 2,
                                       .file = checkpoint_file_name(7),
                                       .size = f.originals[checkpoint_bytes].size(),
                                       .crc = checkpoint_crc(f.originals[checkpoint_bytes])});
  f.paths[commit] = f.dir / "ckpt" / "COMMIT";
  f.paths[cache] = f.dir / "dataset.cache";
  write_dataset_cache(d, f.paths[cache], 99);
  for (int k = 0; k < kKinds; ++k)
    if (!f.paths[k].empty()) f.originals[k] = read_bytes(f.paths[k]);
  return f;
}

fixture& the_fixture() {
  static fixture f = make_fixture();
  return f;
}

void load(const fixture& f, kind k, bool flag) {
  switch (k) {
    case part_file:
      (void)load_partition(f.parts, 0);
      break;
    case meta_file:
      (void)load_partition_book(f.parts);
      (void)load_partition(f.parts, flag ? 1 : 0);
      break;
    case owner_file:
      (void)load_partition_book(f.parts);
      break;
    case checkpoint_bytes:
      break;  // decoded from memory by the caller
    case commit:
      (void)read_commit_record(f.paths[commit].parent_path());
      break;
    case cache: {
      // The stamp the file itself carries (after magic, version and the directed flag), so that
      // the reader goes past the "stale cache" answer into the arrays.
      std::uint64_t stamp = 0;
      const std::string bytes = read_bytes(f.paths[cache]);
      if (bytes.size() >= 24) std::memcpy(&stamp, bytes.data() + 16, sizeof stamp);
      dataset d;
      (void)read_dataset_cache(f.paths[cache], stamp, d, flag);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture& f = the_fixture();
  if (const char* seeds = std::getenv("DEGNN_FUZZ_WRITE_SEEDS")) {
    const char* names[kKinds] = {"part", "meta", "owner", "checkpoint", "commit", "cache"};
    for (int k = 0; k < kKinds; ++k)
      write_seed(fs::path(seeds) / names[k], static_cast<char>(k), f.originals[k]);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const fixture& f = the_fixture();
  const auto k = static_cast<kind>(data[0] % kKinds);
  const bool flag = (data[0] / kKinds) & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (k == checkpoint_bytes) {
      (void)decode_checkpoint(body, "fuzz.ckpt");
    } else {
      const scoped_replacement swap(f.paths[k], body, f.originals[k]);
      load(f, k, flag);
    }
  } catch (const data_error&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
