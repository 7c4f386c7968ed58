// Helpers of the multi-process tests: a child process that is always killed and reaped, free
// loopback ports, a temporary folder that is always removed.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/train/train_settings.hpp"
#include "runtime/transport/port_reservation.hpp"

extern char** environ;

namespace degnn::test {

namespace fs = std::filesystem;

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
  pid_t pid() const { return pid_; }
  void signal(int sig) {
    if (pid_ > 0 && !exited_) ::kill(pid_, sig);
  }
  /// Exit code, or -1 when it did not end within `limit`.
  int wait(std::chrono::milliseconds limit) {
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

// Two consecutive free loopback ports (a node listens on P; P+1 is kept free as well), each a
// port_reservation held for the test process's life, as `degnn launch` holds its seed's port:
// another test's draw or launcher sees them busy, the node's door can still listen there, and a
// connect to a port nobody listens on is still refused.
inline std::uint16_t free_port_pair() {
  // Below the kernel's ephemeral range (32768-60999 on Linux), drawn at random: a port the kernel
  // picked for someone is released and then handed to the next connect or `:0` listener of any
  // process (every node's door makes a private loopback pair per connection), so a test that
  // listened on it a moment later could find it taken.
  static std::mt19937 draw(std::random_device{}());
  static std::vector<std::unique_ptr<port_reservation>> held;  // released when the process ends
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto p = static_cast<std::uint16_t>(20000 + draw() % 12700);
    auto first = std::make_unique<port_reservation>(p);
    if (!first->held()) continue;
    auto second = std::make_unique<port_reservation>(static_cast<std::uint16_t>(p + 1));
    if (!second->held()) continue;
    held.push_back(std::move(first));
    held.push_back(std::move(second));
    return p;
  }
  return 0;
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A raw TCP connection to the node's port that sends `bytes` and stays open until destroyed.
class raw_connection {
 public:
  raw_connection(std::uint16_t port, const std::string& bytes) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    connected_ =
        ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  ~raw_connection() { ::close(fd_); }
  bool connected() const { return connected_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

#ifdef DEGNN_BINARY
/// `degnn node` with the small run most multi-process tests use on `parts` (1 epoch, batch 16,
/// fanouts 5,10, hidden 16, seed 3, no evaluation), then `extra` (a later option wins).
inline std::vector<std::string> small_node_run(const fs::path& parts,
                                               const std::vector<std::string>& extra) {
  std::vector<std::string> a = {
      DEGNN_BINARY,   "node", "--partitions", parts.string(), "--epochs", "1", "--batch-size", "16",
      "--fanouts",    "5,10", "--hidden",     "16",           "--seed",   "3", "--eval-every", "0",
      "--no-progress"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

/// small_node_run with the settings of small_run_reference (batch 8, lr 0.01, dropout 0.5, no
/// weight decay), `epochs`, coordinated checkpoints into `checkpoints` at each epoch end and
/// every `every` steps (0: epoch ends only), a 60 s join time-out, then `extra`.
inline std::vector<std::string> checkpointed_node_run(const fs::path& parts,
                                                      const fs::path& checkpoints, int epochs,
                                                      int every,
                                                      const std::vector<std::string>& extra) {
  std::vector<std::string> a = {"--lr",
                                "0.01",
                                "--dropout",
                                "0.5",
                                "--weight-decay",
                                "0",
                                "--batch-size",
                                "8",
                                "--epochs",
                                std::to_string(epochs),
                                "--checkpoint-dir",
                                checkpoints.string(),
                                "--checkpoint-every",
                                std::to_string(every),
                                "--join-timeout",
                                "60"};
  a.insert(a.end(), extra.begin(), extra.end());
  return small_node_run(parts, a);
}
#endif

/// Waits until the file holds `text` or the time is up.
inline bool wait_for(const fs::path& file, const std::string& text,
                     std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (read_file(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// The first group of `pattern` in a node's log ("" when absent): fields of its summary line.
inline std::string summary_field(const std::string& log, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex(pattern))) return {};
  return m[1].str();
}

/// The inside of the array `"key":[...]` in a node's log ("" when absent). Not a regex: libstdc++
/// matches `[^\]]*` by recursion, one frame per character, and a long run's loss list overflowed
/// the stack under AddressSanitizer.
inline std::string summary_array(const std::string& log, const std::string& key) {
  const std::string open = "\"" + key + "\":[";
  const auto at = log.find(open);
  if (at == std::string::npos) return {};
  const auto from = at + open.size();
  const auto to = log.find(']', from);
  return to == std::string::npos ? std::string{} : log.substr(from, to - from);
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& name)
      : path(fs::temp_directory_path() / ("degnn-" + name + "-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

/// A command run to its end: exit code and everything it printed.
struct command_outcome {
  int rc;
  std::string out;
};

/// Runs `args` (a program and its arguments) with its output in DIR/LOG.log, for at most
/// `limit`.
inline command_outcome run_command(const temp_dir& dir, const std::vector<std::string>& args,
                                   const std::string& log = "run",
                                   std::chrono::seconds limit = std::chrono::seconds(120)) {
  const fs::path file = dir.path / (log + ".log");
  child_process p(args, file);
  const int rc = p.wait(limit);
  return {rc, read_file(file)};
}

/// The per-step losses of a node summary line ("step_losses":[...]).
inline std::vector<double> step_losses(const std::string& log) {
  std::vector<double> out;
  std::stringstream ls(summary_array(log, "step_losses"));
  for (std::string item; std::getline(ls, item, ',');)
    out.push_back(std::stod(item));
  return out;
}

/// Flips one byte in the middle of `file` (a damaged checkpoint copy).
inline void flip_a_byte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(fs::file_size(file) / 2);
  char c = 0;
  f.seekg(middle);
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(middle);
  f.write(&c, 1);
}

/// Writes `dataset_dir` cut into 2 METIS parts (seed 1) to `out`, as degnn partition would.
inline void write_two_metis_parts(const fs::path& dataset_dir, const fs::path& out) {
  const dataset d = load_dataset(dataset_dir);
  write_partitions(d, partition_graph(d.graph, d.train, 2, partition_method::metis, 1), out,
                   "metis", 1, 2);
}

/// What small_node_run with --batch-size 8 --lr 0.01 --dropout 0.5 --weight-decay 0 trains, as
/// settings for the in-process cluster (centralized) the node-process tests compare against.
inline train_settings small_run_reference(const fs::path& data, const fs::path& parts, int epochs) {
  train_settings s;
  s.data = data.string();
  s.partitions = parts.string();
  s.pipeline = "centralized";
  s.epochs = epochs;
  s.batch_size = 8;
  s.fanouts = {5, 10};
  s.model.hidden = 16;
  s.model.lr = 0.01f;
  s.model.dropout = 0.5f;
  s.model.weight_decay = 0;
  s.seed = s.model.seed = 3;
  s.eval_every = 0;
  s.progress = false;
  return s;
}

/// Peak resident memory of a running process in MiB (VmHWM), 0 once it is gone.
inline double peak_rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

}  // namespace degnn::test
