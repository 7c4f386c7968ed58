// Tests of runtime/train/cluster_identity.hpp: every setting that must agree changes the identity
// and is named when it differs; settings a node may choose alone do not.
#include "runtime/train/cluster_identity.hpp"

#include <gtest/gtest.h>

using namespace degnn;

namespace {

train_settings base() {
  train_settings s;
  s.pipeline = "decentralized";
  s.fanouts = {5, 10};
  return s;
}

partition_meta meta() {
  partition_meta m;
  m.dataset_name = "pubmed";
  m.num_parts = 2;
  m.owner_checksum = 0x1234;
  return m;
}

}  // namespace

TEST(ClusterIdentity, EachSettingThatMustAgreeIsNamedWhenItDiffers) {
  const cluster_identity mine = identity_of(base(), meta());
  EXPECT_EQ(mine.difference(mine.lines), "");
  struct change {
    const char* key;
    void (*apply)(train_settings&, partition_meta&);
  };
  const std::vector<change> changes = {
      {"lr", [](train_settings& s, partition_meta&) { s.model.lr = 0.02f; }},
      {"weight_decay", [](train_settings& s, partition_meta&) { s.model.weight_decay = 1e-4f; }},
      {"hidden", [](train_settings& s, partition_meta&) { s.model.hidden = 64; }},
      {"model", [](train_settings& s, partition_meta&) { s.model.model = "gcn"; }},
      {"fanouts",
       [](train_settings& s, partition_meta&) {
         s.fanouts = {5, 11};
       }},
      {"seed", [](train_settings& s, partition_meta&) { s.seed = 9; }},
      {"pipeline", [](train_settings& s, partition_meta&) { s.pipeline = "centralized"; }},
      {"history_bits", [](train_settings& s, partition_meta&) { s.history_bits = 4; }},
      {"staleness", [](train_settings& s, partition_meta&) { s.staleness = 2; }},
      {"batch_size", [](train_settings& s, partition_meta&) { s.batch_size = 7; }},
      {"dataset", [](train_settings&, partition_meta& m) { m.dataset_name = "cora"; }},
      {"partition_set", [](train_settings&, partition_meta& m) { m.owner_checksum = 0x1235; }},
  };
  for (const auto& c : changes) {
    train_settings s = base();
    partition_meta m = meta();
    c.apply(s, m);
    const cluster_identity theirs = identity_of(s, m);
    const std::string diff = mine.difference(theirs.lines);
    EXPECT_EQ(diff.rfind(std::string(c.key) + " is ", 0), 0u) << c.key << ": " << diff;
    EXPECT_NE(mine.hash(), theirs.hash()) << c.key;
  }
}

TEST(ClusterIdentity, SettingsOfOneNodeAloneDoNotChangeIt) {
  train_settings s = base();
  s.metrics = "m.json";
  s.trace = "t.json";
  s.threads = 7;
  s.timeout_s = 5;
  s.progress = false;
  EXPECT_EQ(identity_of(s, meta()).hash(), identity_of(base(), meta()).hash());
}

TEST(ClusterIdentity, AMissingOrUnknownKeyIsNamed) {
  const cluster_identity mine = identity_of(base(), meta());
  auto fewer = mine.lines;
  fewer.pop_back();
  EXPECT_NE(mine.difference(fewer).find("missing on the peer"), std::string::npos);
  auto more = mine.lines;
  more.push_back("turbo=on");
  EXPECT_EQ(mine.difference(more), "turbo is set on the peer and unknown here");
  train_settings s = base();
  s.model.lr = 0.02f;
  EXPECT_EQ(mine.difference(identity_of(s, meta()).lines, "node 0", "node 1"),
            "lr is 0.01 on node 0 and 0.02 on node 1");
}
