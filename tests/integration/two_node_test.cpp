// Multi-process test: two real `degnn node` processes on 127.0.0.1 train one epoch of Pubmed with
// 2 partitions; the losses and byte counters must equal the in-process cluster's for the same
// seed and partitions. Processes are always stopped, files always removed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/cluster_trainer.hpp"

extern char** environ;

using namespace degnn;
namespace fs = std::filesystem;

namespace {

// A child process that is killed (SIGKILL) if still running when the guard goes away.
class child_process {
 public:
  child_process(const std::vector<std::string>& args, const fs::path& output) {
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~child_process() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  /// Exit code, or -1 when it did not end within `limit` (it is then killed).
  int wait(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
};

// Two consecutive free loopback ports (a node listens on P; P+1 is kept free as well).
std::uint16_t free_port_pair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    const std::uint16_t p = ntohs(a.sin_port);
    int t = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in b = a;
    b.sin_port = htons(static_cast<std::uint16_t>(p + 1));
    const bool next_free = p < 65534 && ::bind(t, reinterpret_cast<sockaddr*>(&b), sizeof b) == 0;
    ::close(t);
    ::close(s);
    if (next_free) return p;
  }
  return 0;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("degnn-two-node-" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

}  // namespace

TEST(TwoNodeCluster, TrainsLikeTheInProcessClusterWithEqualByteCounts) {
  temp_dir tmp;
  const dataset d = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed");
  const auto owner = partition_graph(d.graph, d.train, 2, partition_method::metis, 1);
  write_partitions(d, owner, tmp.path / "parts", "metis", 1, 2);

  const std::uint16_t p0 = free_port_pair(), p1 = free_port_pair();
  ASSERT_NE(p0, 0);
  ASSERT_NE(p1, 0);
  ASSERT_NE(p0, p1);
  std::ofstream(tmp.path / "cluster.conf")
      << "[node]\npartitions = \"" << (tmp.path / "parts").string()
      << "\"\npeers = \"127.0.0.1:" << p0 << ",127.0.0.1:" << p1
      << "\"\nepochs = 1\nbatch-size = 8\nfanouts = \"5,10\"\nhidden = 32\n"
         "seed = 3\nno-progress = true\ntimeout = 30\nconnect-timeout = 30\n";
  const std::string conf = "--config-file=" + (tmp.path / "cluster.conf").string();
  child_process node1({DEGNN_BINARY, "node", conf, "--id", "1"}, tmp.path / "node1.log");
  child_process node0({DEGNN_BINARY, "node", conf, "--id", "0"}, tmp.path / "node0.log");
  ASSERT_TRUE(node0.started() && node1.started());
  const int rc0 = node0.wait(std::chrono::seconds(120));
  const int rc1 = node1.wait(std::chrono::seconds(30));
  const std::string log0 = read_file(tmp.path / "node0.log");
  ASSERT_EQ(rc0, 0) << log0;
  ASSERT_EQ(rc1, 0) << read_file(tmp.path / "node1.log");

  std::smatch m;
  ASSERT_TRUE(std::regex_search(log0, m, std::regex(R"(\{"node_summary".*\})"))) << log0;
  const std::string summary = m.str();
  std::smatch losses_m, bytes_m, kinds_m;
  ASSERT_TRUE(std::regex_search(summary, losses_m, std::regex(R"("step_losses":\[([^\]]*)\])")));
  ASSERT_TRUE(std::regex_search(summary, bytes_m, std::regex(R"("bytes":(\d+))")));
  ASSERT_TRUE(std::regex_search(summary, kinds_m, std::regex(R"("bytes_by_kind":(\{[^}]*\}))")));
  std::vector<double> remote_losses;
  std::stringstream ls(losses_m[1].str());
  for (std::string item; std::getline(ls, item, ',');)
    remote_losses.push_back(std::stod(item));

  // The same run in one process, from the same partition files.
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data/pubmed").string();
  s.partitions = (tmp.path / "parts").string();
  s.pipeline = "centralized";
  s.parts = 2;
  s.epochs = 1;
  s.batch_size = 8;
  s.fanouts = {5, 10};
  s.model.hidden = 32;
  s.seed = 3;
  s.model.seed = 3;
  s.progress = false;
  training_report report("in-process", "", false);
  std::vector<double> local_losses;
  const cluster_result local = train_cluster(
      s, d, report, [&](std::uint64_t, double loss) { local_losses.push_back(loss); });

  ASSERT_EQ(remote_losses.size(), local_losses.size());
  ASSERT_GE(local_losses.size(), 3u);
  for (size_t i = 0; i < local_losses.size(); ++i) {
    EXPECT_NEAR(remote_losses[i], local_losses[i], 1e-6 * std::max(1.0, std::abs(local_losses[i])))
        << "step " << i;
  }
  EXPECT_EQ(std::stoull(bytes_m[1].str()), local.traffic.sent.total_bytes());
  EXPECT_EQ(kinds_m[1].str(), local.traffic.sent.bytes_json());
  EXPECT_GT(local.traffic.sent.bytes[static_cast<int>(wire::kind::sample_request)], 0u);
  EXPECT_GT(local.traffic.sent.bytes[static_cast<int>(wire::kind::feature_response)], 0u);
  std::printf("two processes: %zu steps, %s bytes %s\n", remote_losses.size(),
              bytes_m[1].str().c_str(), kinds_m[1].str().c_str());
}
