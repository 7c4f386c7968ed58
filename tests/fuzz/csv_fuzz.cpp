// Fuzzes the dataset loader's line parsers (OGB's raw CSV layout): the node and edge counts, the
// edge list, the feature rows (dense and compressed), the labels, a split and dataset.ini. The
// first byte picks the file and the feature layout; the rest replaces that file, as plain text
// (zlib reads it so under its .gz name), in an otherwise valid tiny dataset. The loader may
// refuse with a data_error; anything else escaping it, or a sanitizer report, is a defect.
// DEGNN_FUZZ_WRITE_SEEDS=DIR writes each file's valid text to DIR and exits.
#include <omp.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/synthetic_graph.hpp"
#include "tests/fuzz/fuzz_files.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

const char* const kFiles[] = {"num-node-list.csv.gz", "num-edge-list.csv.gz", "edge.csv.gz",
                              "node-feat.csv.gz",     "node-label.csv.gz",    "split/train.csv.gz",
                              "dataset.ini"};
constexpr int kKinds = sizeof kFiles / sizeof kFiles[0];

struct fixture {
  fs::path dir;  ///< this process's scratch folder, removed at exit
  fixture() = default;
  fixture(fixture&&) = default;
  ~fixture() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  fs::path data;                  ///< a valid tiny dataset in OGB's raw layout
  std::string originals[kKinds];  ///< the files' bytes as written (gzip)
  std::string texts[kKinds];      ///< their text
};

std::string gunzip(const fs::path& file) {
  std::string out;
  gzFile gz = gzopen(file.c_str(), "rb");
  char buf[1 << 14];
  for (int n; gz && (n = gzread(gz, buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  if (gz) gzclose(gz);
  return out;
}

fixture make_fixture() {
  omp_set_num_threads(1);  // the parsers' parallel loops, one thread: faster and reproducible
  fixture f;
  f.dir = fuzz_scratch_dir("csv");
  f.data = f.dir / "tiny";
  const dataset d = generate_synthetic(
      {.num_nodes = 20, .num_edges = 40, .num_classes = 3, .num_features = 4, .seed = 3});
  write_ogb_dataset(d, f.data);
  if (!fs::exists(f.data / "dataset.ini"))
    write_bytes(f.data / "dataset.ini", "directed = false\n");
  for (int k = 0; k < kKinds; ++k) {
    f.originals[k] = read_bytes(f.data / kFiles[k]);
    f.texts[k] = gunzip(f.data / kFiles[k]);
  }
  return f;
}

fixture& the_fixture() {
  static fixture f = make_fixture();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture& f = the_fixture();
  if (const char* seeds = std::getenv("DEGNN_FUZZ_WRITE_SEEDS")) {
    for (int k = 0; k < kKinds; ++k) {
      const std::string name = fs::path(kFiles[k]).filename().string();
      write_seed(fs::path(seeds) / name.substr(0, name.find('.')), static_cast<char>(k),
                 f.texts[k]);
    }
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const fixture& f = the_fixture();
  const int k = data[0] % kKinds;
  const bool sparse = (data[0] / kKinds) & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const scoped_replacement swap(f.data / kFiles[k], body, f.originals[k]);
    (void)load_ogb_csv(f.data, false, sparse);
  } catch (const data_error&) {
  }
  return 0;
}
