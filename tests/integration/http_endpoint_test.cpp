// Tests of node 0's status board and HTTP endpoint (issue 13 item 3): /status is valid JSON with
// the view and progress, /metrics parses as Prometheus text (label values escaped), both served
// by a live 2-node cluster while it trains; anything else is 404.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "runtime/train/status_board.hpp"
#include "tests/integration/node_processes.hpp"

// After every header that includes Eigen: httplib.h pulls in <resolv.h>, whose `_res` macro
// breaks Eigen's templates.
#include <httplib.h>

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

// Checks the text exposition format line by line; returns sample name (with labels) -> value.
std::map<std::string, double> parse_prometheus(const std::string& text) {
  const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  const std::regex type(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf))");
  std::map<std::string, double> out;
  std::set<std::string> typed;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, type)) {
      typed.insert(m[1].str());
    } else if (std::regex_match(line, m, help)) {
    } else if (std::regex_match(line, m, sample)) {
      EXPECT_TRUE(typed.count(m[1].str())) << "no TYPE line before " << line;
      out[m[1].str() + m[2].str()] = std::stod(m[5].str());
    } else {
      ADD_FAILURE() << "not Prometheus text: '" << line << "'";
    }
  }
  return out;
}

}  // namespace

TEST(StatusBoard, RendersValidJsonAndPrometheusTextWithEscapedLabels) {
  status_board b("pubmed", "decentralized", 10);
  wire::membership_view v;
  v.id = 1;
  v.members = {{0, "127.0.0.1", 24800, "node-0", {0}},
               {1, "10.0.0.2", 1234, "odd \"name\"\\", {1, 2}}};
  b.set_view(v);
  b.set_steps_per_epoch(5);
  b.set_phase("training");
  for (int i = 0; i < 7; ++i)
    b.on_step(static_cast<std::uint64_t>(i), 1.5 - 0.1 * i);
  epoch_record r;
  r.epoch = 1;
  r.loss = 1.2;
  r.evaluated = true;
  r.valid_acc = 0.7;
  r.test_acc = 0.69;
  r.bytes = 1000;
  r.eval_bytes = 24;
  b.on_epoch(r);
  const auto j = nlohmann::json::parse(b.status_json());
  EXPECT_EQ(j["phase"], "training");
  EXPECT_EQ(j["view"]["members"].size(), 2u);
  EXPECT_EQ(j["view"]["members"][1]["name"], "odd \"name\"\\");
  EXPECT_EQ(j["progress"]["steps"], 7);
  EXPECT_EQ(j["progress"]["epoch"], 1);
  EXPECT_DOUBLE_EQ(j["progress"]["valid_acc"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(j["progress"]["last_step_loss"].get<double>(), 0.9);
  EXPECT_EQ(j["bytes_sent"], 1024);
  const auto m = parse_prometheus(b.prometheus());
  EXPECT_EQ(m.at("degnn_steps_total"), 7);
  EXPECT_EQ(m.at("degnn_members"), 2);
  EXPECT_EQ(m.at("degnn_sent_bytes_total"), 1024);
  EXPECT_EQ(m.at("degnn_valid_accuracy"), 0.7);
  EXPECT_EQ(m.count(R"(degnn_member_info{rank="1",name="odd \"name\"\\",address="10.0.0.2:1234"})"),
            1u)
      << b.prometheus();
  EXPECT_EQ(m.at(R"(degnn_phase{phase="training"})"), 1);
}

TEST(HttpEndpoint, Node0ServesStatusAndMetricsWhileTraining) {
  temp_dir tmp("http");
  write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", tmp.path / "parts");
  const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
  const std::vector<std::string> common = {"--partitions", (tmp.path / "parts").string(),
                                           "--epochs",     "100000",
                                           "--batch-size", "16",
                                           "--fanouts",    "5,10",
                                           "--hidden",     "16",
                                           "--no-progress"};
  auto args = [&](std::vector<std::string> a) {
    std::vector<std::string> all = {DEGNN_BINARY, "node"};
    all.insert(all.end(), a.begin(), a.end());
    all.insert(all.end(), common.begin(), common.end());
    return all;
  };
  child_process s(args({"--is-seed", "--listen", seed, "--http", "127.0.0.1:0"}),
                  tmp.path / "0.log");
  child_process j(args({"--join", seed, "--http", "127.0.0.1:0"}), tmp.path / "1.log");
  ASSERT_TRUE(wait_for(tmp.path / "0.log", "epoch   2", 90s)) << read_file(tmp.path / "0.log");
  const std::string log0 = read_file(tmp.path / "0.log");
  std::smatch port_m;
  ASSERT_TRUE(
      std::regex_search(log0, port_m, std::regex(R"(status on http://127\.0\.0\.1:(\d+)/status)")))
      << log0;
  // A member serves its own /status: the view, which names the coordinator and where it is.
  const std::string log1 = read_file(tmp.path / "1.log");
  std::smatch port1;
  ASSERT_TRUE(
      std::regex_search(log1, port1, std::regex(R"(status on http://127\.0\.0\.1:(\d+)/status)")))
      << log1;
  {
    httplib::Client member("127.0.0.1", std::stoi(port1[1].str()));
    member.set_read_timeout(10, 0);
    const auto r = member.Get("/status");
    ASSERT_TRUE(r) << log1;
    const auto j = nlohmann::json::parse(r->body, nullptr, false);
    EXPECT_EQ(j["phase"], "serving") << r->body;
    EXPECT_EQ(j["view"]["coordinator"], 0) << r->body;
    EXPECT_EQ(j["view"]["members"][0]["address"], seed) << r->body;
  }
  httplib::Client c("127.0.0.1", std::stoi(port_m[1].str()));
  c.set_read_timeout(10, 0);
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  const auto first = parse_prometheus(metrics->body);
  EXPECT_GT(first.at("degnn_steps_total"), 0);
  EXPECT_EQ(first.at("degnn_members"), 2);
  EXPECT_GE(first.at("degnn_epoch"), 2);
  const auto status = c.Get("/status");
  ASSERT_TRUE(status && status->status == 200);
  const auto js = nlohmann::json::parse(status->body);
  EXPECT_EQ(js["phase"], "training");
  EXPECT_EQ(js["view"]["members"][1]["rank"], 1);
  EXPECT_GT(js["progress"]["steps_per_s"].get<double>(), 0);
  EXPECT_FALSE(js["progress"]["valid_acc"].is_null());
  const auto missing = c.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const auto post = c.Post("/status", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_NE(post->status, 200);
  // Steps go on (an evaluation between epochs may take a while on a loaded machine).
  std::string later;
  double later_steps = 0;
  for (int i = 0; i < 300 && later_steps <= first.at("degnn_steps_total"); ++i) {
    std::this_thread::sleep_for(100ms);
    const auto r = c.Get("/metrics");
    ASSERT_TRUE(r && r->status == 200);
    later = r->body;
    later_steps = parse_prometheus(later).at("degnn_steps_total");
  }
  EXPECT_GT(later_steps, first.at("degnn_steps_total"));
  std::printf("GET /metrics (%zu bytes):\n%s", later.size(), later.c_str());
}
