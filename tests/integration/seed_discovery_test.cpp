// Unit tests of where a node finds its seed (runtime/node/seed_discovery.hpp) and of the seed's
// rendezvous (runtime/node/rendezvous.hpp), with node lists and pod names as schedulers write them.
#include <gtest/gtest.h>

#include <map>

#include "runtime/node/rendezvous.hpp"
#include "runtime/node/seed_discovery.hpp"
#include "runtime/process/config_error.hpp"

using namespace degnn;

namespace {

std::vector<std::string> hosts(std::initializer_list<const char*> l) {
  return {l.begin(), l.end()};
}

// An environment from a map, as getenv reads it.
struct fake_env {
  std::map<std::string, std::string> vars;
  const char* operator()(const char* key) const {
    const auto it = vars.find(key);
    return it == vars.end() ? nullptr : it->second.c_str();
  }
};

}  // namespace

TEST(SlurmNodelist, ExpandsRangesListsAndPaddingAsSlurmDoes) {
  EXPECT_EQ(expand_slurm_nodelist("node01"), hosts({"node01"}));
  EXPECT_EQ(expand_slurm_nodelist("gpu[01-03,07],login"),
            hosts({"gpu01", "gpu02", "gpu03", "gpu07", "login"}));
  EXPECT_EQ(expand_slurm_nodelist("cn[8-11]"), hosts({"cn8", "cn9", "cn10", "cn11"}));
  EXPECT_EQ(expand_slurm_nodelist("cn[08-11]"), hosts({"cn08", "cn09", "cn10", "cn11"}));
  EXPECT_EQ(expand_slurm_nodelist("r[1-2]-n[1-2]"), hosts({"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(expand_slurm_nodelist("a[1],b-ib[3-4]x,c"), hosts({"a1", "b-ib3x", "b-ib4x", "c"}));
  // As Slurm's own example in the sbatch man page.
  EXPECT_EQ(expand_slurm_nodelist("tux[2,1-2]"), hosts({"tux2", "tux1", "tux2"}));
}

TEST(SlurmNodelist, AMalformedListIsAnErrorQuotingIt) {
  for (const char* bad :
       {"gpu[01-03", "gpu01]", "gpu[]", "gpu[3-1]", "gpu[a-b]", "a,,b", "gpu[1-[2]]", ""}) {
    try {
      expand_slurm_nodelist(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(StatefulSetSeed, PodZeroOfTheSameServiceAndTheOrdinal) {
  const auto a = statefulset_seed("degnn-3.degnn.ml.svc.cluster.local");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, "degnn-0.degnn.ml.svc.cluster.local");
  EXPECT_EQ(a->second, 3);
  const auto b = statefulset_seed("gnn-train-12.headless");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->first, "gnn-train-0.headless");
  EXPECT_EQ(b->second, 12);
  EXPECT_FALSE(statefulset_seed("worker.default.svc.cluster.local"));
  EXPECT_FALSE(statefulset_seed("worker-a.svc"));
  EXPECT_FALSE(statefulset_seed("-3.svc"));
}

TEST(DiscoverSeed, DegnnSeedThenSlurmThenKubernetes) {
  fake_env env;
  env.vars = {{"DEGNN_SEED", "10.0.0.5:24800"}, {"SLURM_JOB_NODELIST", "gpu[01-02]"}};
  auto d = discover_seed(env, "gpu02", "gpu02", 25000);
  EXPECT_EQ(d.source, "DEGNN_SEED");
  EXPECT_EQ(d.seed, (endpoint{"10.0.0.5", 24800}));
  EXPECT_FALSE(d.is_seed);

  env.vars = {
      {"SLURM_JOB_NODELIST", "gpu[07-08],gpu11"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}};
  d = discover_seed(env, "gpu11", "gpu11.cluster", 25000);
  EXPECT_EQ(d.source, "Slurm");
  EXPECT_EQ(d.seed, (endpoint{"gpu07", 25000}));
  EXPECT_EQ(d.rank_hint, 2);
  EXPECT_EQ(d.expected_nodes, 3);
  EXPECT_FALSE(d.is_seed);
  env.vars["SLURM_PROCID"] = "0";
  EXPECT_TRUE(discover_seed(env, "gpu07", "gpu07", 25000).is_seed);
  env.vars.erase("SLURM_PROCID");  // then the job's first host is the seed
  EXPECT_TRUE(discover_seed(env, "gpu07", "gpu07", 25000).is_seed);
  EXPECT_FALSE(discover_seed(env, "gpu08", "gpu08", 25000).is_seed);

  // A step on a subset of the job's hosts, two tasks per host: the step's first host is the seed,
  // the second task on a host listens one port higher.
  env.vars = {{"SLURM_JOB_NODELIST", "gpu[01-08]"},
              {"SLURM_STEP_NODELIST", "gpu[05-06]"},
              {"SLURM_PROCID", "3"},
              {"SLURM_LOCALID", "1"}};
  d = discover_seed(env, "gpu06", "gpu06", 25000);
  EXPECT_EQ(d.seed, (endpoint{"gpu05", 25000}));
  EXPECT_EQ(d.listen_offset, 1);

  env.vars = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
  d = discover_seed(env, "degnn-2", "degnn-2.degnn.ml.svc.cluster.local", 25000);
  EXPECT_EQ(d.source, "Kubernetes");
  EXPECT_EQ(d.seed, (endpoint{"degnn-0.degnn.ml.svc.cluster.local", 25000}));
  EXPECT_EQ(d.rank_hint, 2);
  EXPECT_FALSE(d.is_seed);
  env.vars["DEGNN_SERVICE"] = "degnn";  // the host name did not resolve to its full name
  d = discover_seed(env, "degnn-0", "degnn-0", 25000);
  EXPECT_EQ(d.seed, (endpoint{"degnn-0.degnn", 25000}));
  EXPECT_TRUE(d.is_seed);
}

TEST(DiscoverSeed, NothingToGoOnOrABadValueIsAnErrorSayingWhatWasRead) {
  fake_env env;
  try {
    discover_seed(env, "h", "h", 25000);
    ADD_FAILURE();
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("DEGNN_SEED"), std::string::npos) << e.what();
  }
  env.vars = {{"SLURM_JOB_NODELIST", "a[1-2]"}, {"SLURM_PROCID", "x"}};
  EXPECT_THROW(discover_seed(env, "a1", "a1", 25000), config_error);
  env.vars = {{"SLURM_JOB_NODELIST", "a[1-2]"}};
  EXPECT_THROW(discover_seed(env, "a1", "a1", 0), config_error);  // no fixed port to meet at
  env.vars = {{"DEGNN_SEED", "seed-host"}};
  EXPECT_THROW(discover_seed(env, "a1", "a1", 25000), config_error);
  env.vars = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
  EXPECT_THROW(discover_seed(env, "degnn-1", "degnn-1", 25000), config_error);  // no domain
}

TEST(Rendezvous, RanksHonourFreeHintsThenJoinOrderAndPartitionsGoRoundRobin) {
  rendezvous r(2, 3, 5, {"h0", 1, -1, "seed"});
  EXPECT_FALSE(r.enough());
  EXPECT_EQ(r.add(10, {"h1", 1, -1, "a"}), "");
  EXPECT_TRUE(r.enough());
  EXPECT_FALSE(r.full());
  EXPECT_EQ(r.add(11, {"h2", 1, 1, "b"}), "");  // asks for rank 1, which is free
  EXPECT_TRUE(r.full());
  EXPECT_NE(r.add(12, {"h3", 1, -1, "c"}), "");  // full
  std::vector<std::uint64_t> keys;
  const auto v = r.close(1, keys);
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].name, "seed");
  EXPECT_EQ(v.members[1].name, "b");
  EXPECT_EQ(v.members[2].name, "a");
  EXPECT_EQ(keys, (std::vector<std::uint64_t>{0, 11, 10}));
  EXPECT_EQ(v.members[0].partitions, (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(v.members[1].partitions, (std::vector<std::int32_t>{1, 4}));
  EXPECT_EQ(v.members[2].partitions, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(v.rank_of_partition(4), 1);
  EXPECT_NE(r.add(13, {"h4", 1, -1, "d"}), "");  // formed
}

TEST(Rendezvous, TakenAddressesNamesAndDepartedJoinersAreHandled) {
  rendezvous r(3, 3, 3, {"h0", 1, -1, "seed"});
  EXPECT_NE(r.add(1, {"h0", 1, -1, "x"}), "");     // the seed's address
  EXPECT_NE(r.add(1, {"h9", 1, -1, "seed"}), "");  // the seed's name
  EXPECT_EQ(r.add(1, {"h1", 1, 2, "a"}), "");
  EXPECT_NE(r.add(2, {"h1", 1, -1, "b"}), "");  // a's address
  EXPECT_NE(r.add(2, {"h2", 1, -1, "a"}), "");  // a's name
  EXPECT_TRUE(r.remove(1));
  EXPECT_FALSE(r.remove(1));
  EXPECT_EQ(r.add(2, {"h1", 1, 2, "b"}), "");  // a's place is free again
  EXPECT_EQ(r.add(3, {"h3", 1, 2, "c"}), "");  // rank 2 is b's: c gets rank 1
  std::vector<std::uint64_t> keys;
  const auto v = r.close(1, keys);
  EXPECT_EQ(v.members[2].name, "b");
  EXPECT_EQ(v.members[1].name, "c");
}

TEST(NodeRange, NOrMinMax) {
  EXPECT_EQ(parse_node_range("4"), (std::pair<int, int>{4, 4}));
  EXPECT_EQ(parse_node_range("2:4"), (std::pair<int, int>{2, 4}));
  for (const char* bad : {"", "0", "4:2", "a", "2:", ":3", "2:3:4", "-1"})
    EXPECT_THROW(parse_node_range(bad), config_error) << bad;
}
