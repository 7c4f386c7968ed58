// Multi-process tests of mutual TLS (issue 11 item 4): nodes with certificates of the cluster CA
// and the job token form the cluster and train exactly as without TLS; a node of another CA,
// without TLS, or with another job's token is refused and the cluster forms without it; raw
// garbage on the seed's TLS port harms nothing. Real processes on 127.0.0.1, always reaped.
#include <gtest/gtest.h>

#include "runtime/process/config_error.hpp"
#include "runtime/transport/cluster_certificates.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

class TlsJoin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("tls-join");
    write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", dir_->path / "parts");
    make_cluster_certificates(dir_->path / "certs", 3, 0, 2);
    make_cluster_certificates(dir_->path / "other-ca", 3, 0, 2);
    // The same CA, another job: only the token differs.
    fs::copy(dir_->path / "certs", dir_->path / "other-job");
    std::ofstream(dir_->path / "other-job" / "job.token") << "0123456789abcdef\n";
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::vector<std::string> node_args(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--connect-timeout", "30"});
    return small_node_run(dir_->path / "parts", extra);
  }
  static std::vector<std::string> tls(const std::string& folder, const std::string& name) {
    return {"--tls", (dir_->path / folder).string(), "--tls-name", name};
  }
  static fs::path log(const std::string& name) { return dir_->path / (name + ".log"); }
  static std::string seed_at() { return "127.0.0.1:" + std::to_string(free_port_pair()); }

  static temp_dir* dir_;
};
temp_dir* TlsJoin::dir_ = nullptr;

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_F(TlsJoin, NodesOfTheClusterFormItOverTlsAndTrainAsWithoutIt) {
  std::string losses[2];
  for (int with_tls = 0; with_tls < 2; ++with_tls) {
    const std::string seed = seed_at();
    const std::string tag = with_tls ? "tls" : "plain";
    child_process s(node_args({"--is-seed", "--listen", seed}) +
                        (with_tls ? tls("certs", "node-0") : std::vector<std::string>{}),
                    log(tag + "0"));
    std::unique_ptr<raw_connection> garbage;
    if (with_tls) {
      ASSERT_TRUE(wait_for(log(tag + "0"), "as the seed", 30s)) << read_file(log(tag + "0"));
      const auto port = static_cast<std::uint16_t>(std::stoi(seed.substr(seed.rfind(':') + 1)));
      garbage = std::make_unique<raw_connection>(port, std::string(4096, '\x16'));
      EXPECT_TRUE(garbage->connected());
    }
    child_process j(node_args({"--join", seed}) +
                        (with_tls ? tls("certs", "node-2") : std::vector<std::string>{}),
                    log(tag + "1"));
    const int rc0 = s.wait(120s);
    const std::string out0 = read_file(log(tag + "0"));
    ASSERT_EQ(rc0, 0) << out0;
    EXPECT_EQ(j.wait(30s), 0) << read_file(log(tag + "1"));
    if (with_tls) {
      EXPECT_TRUE(contains(out0, "formed view 1 with 2 nodes (0=node-0, 1=node-2)")) << out0;
    }
    losses[with_tls] = summary_array(out0, "step_losses");
    EXPECT_FALSE(losses[with_tls].empty()) << out0;
  }
  EXPECT_EQ(losses[0], losses[1]);
}

TEST_F(TlsJoin, StrangersAreRefusedAndTheClusterFormsWithoutThem) {
  const std::string seed = seed_at();
  child_process s(
      node_args({"--is-seed", "--listen", seed, "--nodes", "2"}) + tls("certs", "node-0"),
      log("strangers0"));
  ASSERT_TRUE(wait_for(log("strangers0"), "as the seed", 30s)) << read_file(log("strangers0"));
  struct stranger {
    std::string name;
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<stranger> strangers = {
      {"other-ca", tls("other-ca", "node-1"), "cannot reach the seed at"},
      {"no-tls", {}, "cannot reach the seed at"},
      {"other-job", tls("other-job", "node-1"), "its job token is not this job's"},
  };
  for (const auto& x : strangers) {
    child_process p(node_args({"--join", seed, "--join-timeout", "3"}) + x.args, log(x.name));
    const int rc = p.wait(60s);
    const std::string out = read_file(log(x.name));
    EXPECT_EQ(rc, 1) << x.name << ": " << out;
    EXPECT_TRUE(contains(out, x.says)) << x.name << ": " << out;
  }
  child_process good(node_args({"--join", seed}) + tls("certs", "node-1"), log("strangers1"));
  const int rc0 = s.wait(120s);
  const std::string out0 = read_file(log("strangers0"));
  ASSERT_EQ(rc0, 0) << out0;
  EXPECT_EQ(good.wait(30s), 0) << read_file(log("strangers1"));
  EXPECT_TRUE(contains(out0, "refused a join from")) << out0;
  EXPECT_TRUE(contains(out0, "(0=node-0, 1=node-1)")) << out0;
}

TEST_F(TlsJoin, BadTlsFilesAndAnUnprotectedPublicAddressAreRefusedBeforeStarting) {
  struct bad_case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<bad_case> cases = {
      {tls("certs", "node-7"), "node-7.crt does not exist"},
      {{"--tls", (dir_->path / "certs").string()}, "--tls needs --tls-name"},
      {{"--listen", "0.0.0.0:24999", "--advertise", "127.0.0.1"}, "without --tls DIR"},
  };
  for (const auto& c : cases) {
    child_process p(node_args({"--is-seed", "--listen", "127.0.0.1:24998"}) + c.args, log("bad"));
    const int rc = p.wait(30s);
    const std::string out = read_file(log("bad"));
    EXPECT_EQ(rc, 1) << out;
    EXPECT_TRUE(contains(out, c.says)) << out;
  }
  // A key that is not the certificate's, a certificate of another name.
  const fs::path mixed = dir_->path / "mixed";
  fs::create_directories(mixed);
  for (const char* f : {"ca.crt", "job.token", "node-0.crt"})
    fs::copy_file(dir_->path / "certs" / f, mixed / f);
  fs::copy_file(dir_->path / "certs" / "node-1.key", mixed / "node-0.key");
  fs::copy_file(dir_->path / "certs" / "node-1.crt", mixed / "node-9.crt");
  fs::copy_file(dir_->path / "certs" / "node-1.key", mixed / "node-9.key");
  EXPECT_THROW((tls_files{mixed, "node-0"}.check()), config_error);
  try {
    tls_files{mixed, "node-9"}.check();
    ADD_FAILURE();
  } catch (const config_error& e) {
    EXPECT_TRUE(contains(e.what(), "made out to 'node-1', not 'node-9'")) << e.what();
  }
  EXPECT_NO_THROW((tls_files{dir_->path / "certs", "node-2"}.check()));
  // A proof over one challenge does not answer another, nor a proof with a foreign certificate.
  const tls_files seed{dir_->path / "certs", "node-0"};
  const auto c1 = random_challenge(), c2 = random_challenge();
  std::string name;
  EXPECT_EQ(verify_proof(seed, prove({dir_->path / "certs", "node-1"}, c1), c1, name), "");
  EXPECT_EQ(name, "node-1");
  EXPECT_TRUE(contains(verify_proof(seed, prove({dir_->path / "certs", "node-1"}, c1), c2, name),
                       "does not hold the key"));
  EXPECT_TRUE(contains(verify_proof(seed, prove({dir_->path / "other-ca", "node-1"}, c1), c1, name),
                       "does not chain to the cluster CA"));
}
