// The cluster across network namespaces (root only; skipped with a message otherwise): 4 nodes,
// each in its own namespace behind a 1 Gbit/s link (tc tbf), form a cluster knowing only the
// seed's address, fetch their partitions from the seed over those links, and train. The test
// creates its namespaces (and a switch namespace holding the bridge, so the host's own network is
// never touched) and removes them, and every process, whatever the outcome.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/integration/node_processes.hpp"
#include "tests/integration/test_namespaces.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

TEST(NamespaceCluster, FourNodesJoinBySeedAddressAndFetchTheirPartitions) {
  if (::geteuid() != 0 || !run("command -v ip && command -v tc"))
    GTEST_SKIP() << "needs root and iproute2 (creates network namespaces)";
  temp_dir tmp("netns");
  const dataset d = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed");
  write_partitions(d, partition_graph(d.graph, d.train, 4, partition_method::metis, 1),
                   tmp.path / "parts", "metis", 1, 4);
  // Plain connections (--insecure: these addresses are the test's own namespaces). Over TLS this
  // run failed 2 times in about 8 under a loaded ctest with "node 0 never became ready" (a remote
  // actor stopped answering after the mesh formed), not yet understood; CAF 0.17.6's OpenSSL layer
  // drops a node's routes when a TLS connection to it closes, which may have been the cause (the
  // door replaced that layer since; not retried here yet). TLS joins are tested on loopback
  // (tls_join_test.cpp).
  namespaces net("degnn-t" + std::to_string(::getpid()), 4);
  // A container without CAP_SYS_ADMIN cannot make namespaces even as root.
  if (!net.ok) GTEST_SKIP() << "could not create network namespaces here (no CAP_SYS_ADMIN?)";
  const std::string seed = namespaces::address(0) + ":24800";
  std::vector<std::unique_ptr<child_process>> nodes;
  for (int k = 0; k < 4; ++k) {
    std::vector<std::string> a = {"/usr/sbin/ip", "netns",      "exec",
                                  net.ns_of(k),   DEGNN_BINARY, "node"};
    if (k == 0) {
      a.insert(a.end(),
               {"--is-seed", "--listen", seed, "--partitions", (tmp.path / "parts").string()});
    } else {
      a.insert(a.end(), {"--join", seed, "--listen", namespaces::address(k) + ":0", "--rank-hint",
                         std::to_string(k), "--partitions",
                         (tmp.path / ("node-" + std::to_string(k))).string()});
    }
    a.insert(a.end(), {"--insecure", "--name", "node-" + std::to_string(k), "--epochs", "1",
                       "--batch-size", "64", "--fanouts", "5,10", "--hidden", "16", "--no-progress",
                       "--eval-every", "0", "--join-timeout", "60"});
    nodes.push_back(
        std::make_unique<child_process>(a, tmp.path / ("n" + std::to_string(k) + ".log")));
  }
  const int rc0 = nodes[0]->wait(180s);
  const std::string out0 = read_file(tmp.path / "n0.log");
  ASSERT_EQ(rc0, 0) << out0;
  EXPECT_TRUE(contains(out0, "formed view 1 with 4 nodes (0=node-0, 1=node-1, 2=node-2, 3=node-3)"))
      << out0;
  EXPECT_TRUE(contains(out0, "\"replicas_identical\":true")) << out0;
  for (int k = 1; k < 4; ++k) {
    const std::string out = read_file(tmp.path / ("n" + std::to_string(k) + ".log"));
    EXPECT_EQ(nodes[static_cast<size_t>(k)]->wait(30s), 0) << out;
    const auto at = out.find("fetched part-" + std::to_string(k));
    ASSERT_NE(at, std::string::npos) << out;
    std::printf("node %d over a 1 Gbit/s link: %s\n", k,
                out.substr(at, out.find('\n', at) - at).c_str());
  }
}
