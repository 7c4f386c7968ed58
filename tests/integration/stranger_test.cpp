// Issue 28's probe as a test: while a 3-node Cora cluster trains (TLS and plain), every port a
// node listens on gets 20 bare connect-and-closes, 20 x 100 KB of random bytes, with TLS 20
// handshakes without a certificate and 20 with another CA's, and 3 connections announcing a
// 1 GiB BASP payload held open for 5 s. The cluster must go on training (no epoch slower than 3x
// the run's median), each node's RSS stay within 32 MB (128 MB under ASan, whose shadow memory and
// quarantine count in the RSS), every refusal be accounted for in the node's log (a line each, or
// the count of those the rate limit left out), and the step losses equal a clean run's. Real
// processes on 127.0.0.1, always reaped.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <random>

#include "runtime/transport/cluster_certificates.hpp"
#include "tests/integration/node_processes.hpp"
#include "tests/runtime/loopback_client.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

constexpr int kEach = 20;
constexpr int kHeld = 3;
// What a node's RSS may grow while it is probed. The defects this guards against cost 1 GB per
// held header and 100 MB per big HTTP head; a plain build grows 1-2 MiB here. Under ASan the RSS
// also counts shadow memory and the freed blocks ASan keeps in quarantine (256 MB by default), so
// the 83 refused handshakes alone grow it 23-36 MiB (CI, 2026-12-05): there the bound is 128 MiB.
// The slowest epoch under attack, in medians: the stalls the probes caused were 3.5-4.8 s
// against epochs of about 0.1 s. Under ASan every one of the 83 refused TLS handshakes costs
// several times its plain CPU on 2 cores, and one epoch took 3.97 medians (1.52 s against 0.38 s,
// CI, 2026-12-07): there the bound is 6 medians, still well below a multi-second stall.
#ifdef DEGNN_SANITIZED
constexpr double kRssGrowthMib = 128.0;
constexpr double kSlowestInMedians = 6.0;
#else
constexpr double kRssGrowthMib = 32.0;
constexpr double kSlowestInMedians = 3.0;
#endif

class Strangers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("strangers");
    const dataset d = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/cora");
    write_partitions(d, partition_graph(d.graph, d.train, 3, partition_method::metis, 1),
                     dir_->path / "parts", "metis", 1, 3);
    make_cluster_certificates(dir_->path / "certs", 3, 0, 2);
    make_cluster_certificates(dir_->path / "other", 3, 0, 2);
  }
  static void TearDownTestSuite() { delete dir_; }
  static temp_dir* dir_;
};
temp_dir* Strangers::dir_ = nullptr;

double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// A TLS client handshake to `port` with `folder`'s node-1 certificate, or none; then one read
// (a TLS 1.3 client finishes before the server has looked at its certificate).
void tls_probe(std::uint16_t port, const fs::path* folder) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  if (folder) {
    SSL_CTX_use_certificate_file(ctx, (*folder / "node-1.crt").c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(ctx, (*folder / "node-1.key").c_str(), SSL_FILETYPE_PEM);
  }
  const int fd = connect_to(port, 3);
  if (fd >= 0) {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      char b[16];
      SSL_read(ssl, b, sizeof b);
    }
    SSL_free(ssl);
    ::close(fd);
  }
  SSL_CTX_free(ctx);
}

// Every attack on one port; returns how many connections it made.
int attack(std::uint16_t port, bool tls, const fs::path& other_ca, std::mt19937& rng) {
  int made = 0;
  for (int i = 0; i < kEach; ++i, ++made)
    ::close(connect_to(port, 3));
  std::string junk(100'000, '\0');
  for (int i = 0; i < kEach; ++i, ++made) {
    for (auto& c : junk)
      c = static_cast<char>(rng());
    junk[0] = '\x09';  // neither a BASP client handshake nor a TLS record
    const int fd = connect_to(port, 3);
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  if (tls) {
    for (int i = 0; i < kEach; ++i, ++made)
      tls_probe(port, nullptr);
    for (int i = 0; i < kEach; ++i, ++made)
      tls_probe(port, &other_ca);
  }
  return made;
}

struct run_result {
  std::string losses;
  std::vector<double> epoch_s;
  std::vector<double> rss_before, rss_after;
  std::vector<long> refusals;  ///< per node: lines plus the counts of unlogged ones
  std::vector<int> made;       ///< connections the attack made to each node
};

run_result run_cluster(const fs::path& dir, bool tls, bool attacked, const std::string& tag) {
  run_result r;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < 3; ++i)
    ports.push_back(free_port_pair());
  auto log = [&](int i) { return dir / (tag + std::to_string(i) + ".log"); };
  const fs::path metrics = dir / (tag + ".jsonl");
  fs::remove(metrics);
  auto args = [&](int i, std::vector<std::string> extra) {
    std::vector<std::string> a = small_node_run(
        dir / "parts", {"--epochs", "50", "--batch-size", "4", "--connect-timeout", "60",
                        "--listen", "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(i)])});
    if (tls)
      for (const std::string& s : {std::string("--tls"), (dir / "certs").string(),
                                   std::string("--tls-name"), "node-" + std::to_string(i)})
        a.push_back(s);
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string seed = "127.0.0.1:" + std::to_string(ports[0]);
  std::vector<std::unique_ptr<child_process>> nodes;
  nodes.push_back(std::make_unique<child_process>(
      args(0, {"--is-seed", "--nodes", "3", "--metrics", metrics.string()}), log(0)));
  EXPECT_TRUE(wait_for(log(0), "as the seed", 30s)) << read_file(log(0));
  for (int i = 1; i < 3; ++i)
    nodes.push_back(std::make_unique<child_process>(args(i, {"--join", seed}), log(i)));
  if (attacked) {
    // Attack once training runs (epoch 5), measuring memory first.
    EXPECT_TRUE(wait_for(metrics, "\"epoch\":5,", 120s)) << read_file(log(0));
    for (auto& n : nodes)
      r.rss_before.push_back(rss_mib(n->pid()));
    std::mt19937 rng(7);
    const fs::path other = dir / "other";
    for (auto port : ports)
      r.made.push_back(attack(port, tls, other, rng));
    std::vector<int> held;
    const std::string header = [] {
      std::string h(32, '\0');
      h[0] = 1;  // a client handshake announcing 1 GiB
      h[4] = 0x40;
      return h;
    }();
    for (auto port : ports) {
      for (int i = 0; i < kHeld; ++i) {
        held.push_back(connect_to(port, 3));
        ::send(held.back(), header.data(), header.size(), MSG_NOSIGNAL);
      }
    }
    std::this_thread::sleep_for(5s);
    for (size_t i = 0; i < nodes.size(); ++i) {
      r.rss_after.push_back(rss_mib(nodes[i]->pid()));
      r.made[i] += kHeld;
    }
    for (int fd : held)
      ::close(fd);
    // The run was still going when the attack ended (else it proved nothing).
    EXPECT_FALSE(contains(read_file(log(0)), "node_summary")) << "the run ended during the attack";
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(nodes[static_cast<size_t>(i)]->wait(180s), 0) << read_file(log(i));
  const std::string out0 = read_file(log(0));
  r.losses = summary_array(out0, "step_losses");
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const std::string e = summary_field(line, R"("epoch_s":([0-9.]+))");
    if (!e.empty()) r.epoch_s.push_back(std::stod(e));
  }
  for (int i = 0; i < 3; ++i) {
    long n = 0;
    std::stringstream ss(read_file(log(i)));
    const std::regex unlogged(R"(door: ([0-9]+) more refusals were not logged)");
    for (std::string line; std::getline(ss, line);) {
      std::smatch m;
      if (contains(line, "door: refused "))
        ++n;
      else if (std::regex_search(line, m, unlogged))
        n += std::stol(m[1].str());
    }
    r.refusals.push_back(n);
  }
  return r;
}

void check_attacked_run(const run_result& clean, const run_result& hit, const std::string& what) {
  ASSERT_FALSE(clean.losses.empty()) << what;
  EXPECT_EQ(hit.losses, clean.losses) << what;
  ASSERT_GE(hit.epoch_s.size(), 10u) << what;
  std::vector<double> sorted = hit.epoch_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  // The first epoch includes the set-up; every later one is a plain epoch of 12 steps (batches of
  // 4 of a part's ~47 training nodes), long enough that one scheduling hiccup on a busy 2-core
  // machine is not mistaken for the multi-second stalls the probe is after.
  const double slowest = *std::max_element(hit.epoch_s.begin() + 1, hit.epoch_s.end());
  EXPECT_LE(slowest, kSlowestInMedians * median) << what << ": median epoch " << median << " s";
  std::printf("%s: median epoch %.4f s, slowest %.4f s\n", what.c_str(), median, slowest);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_LE(std::abs(hit.rss_after[i] - hit.rss_before[i]), kRssGrowthMib)
        << what << " node " << i << ": " << hit.rss_before[i] << " -> " << hit.rss_after[i]
        << " MiB";
    EXPECT_EQ(hit.refusals[i], hit.made[i]) << what << " node " << i;
    std::printf("%s node %zu: RSS %.1f -> %.1f MiB, %d connections, %ld refusals logged\n",
                what.c_str(), i, hit.rss_before[i], hit.rss_after[i], hit.made[i], hit.refusals[i]);
  }
}

}  // namespace

TEST_F(Strangers, APlainClusterTrainsOnThroughEveryProbeAsWithoutIt) {
  const run_result clean = run_cluster(dir_->path, false, false, "plain-clean");
  const run_result hit = run_cluster(dir_->path, false, true, "plain-hit");
  check_attacked_run(clean, hit, "plain");
}

TEST_F(Strangers, ATlsClusterTrainsOnThroughEveryProbeAsWithoutIt) {
  const run_result clean = run_cluster(dir_->path, true, false, "tls-clean");
  const run_result hit = run_cluster(dir_->path, true, true, "tls-hit");
  check_attacked_run(clean, hit, "tls");
}
