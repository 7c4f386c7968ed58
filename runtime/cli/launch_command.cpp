// degnn launch --local N [node options]: a whole cluster on this machine. Starts N `degnn node`
// processes (node 0 the seed on a free loopback port, the others joining it), prefixes every
// line they print with their rank, forwards Ctrl-C and SIGTERM, stops the others on the first
// unexpected exit, and returns the worst exit code. Nodes die with the launcher (PDEATHSIG), so
// no process is left behind even when the launcher itself is killed. Given --data instead of
// --partitions, it first partitions the dataset into N parts beside the dataset's cache (as
// `degnn train --parts N` would, once: a later launch reuses them) and says where.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "runtime/cli/cli_options.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/transport/port_reservation.hpp"

namespace degnn {

namespace {

int signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const char c = static_cast<char>(sig);
  [[maybe_unused]] const auto n = ::write(signal_pipe[1], &c, 1);
}

struct node_process {
  int rank = 0;
  pid_t pid = -1;
  int out = -1;         ///< read end of its stdout+stderr
  std::string pending;  ///< a partial line
  bool running = true;
  int code = 0;
};

node_process start_node(int rank, const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("launch: pipe failed");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("launch: fork failed");
  if (pid == 0) {
    // The node dies with the launcher, whatever kills it.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    std::fprintf(stderr, "launch: cannot start %s: %s\n", args[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  return {rank, pid, fds[0], {}, true, 0};
}

// Prints the complete lines in `p.pending` (all of it at the end) with the rank in front.
void flush_lines(node_process& p, bool all) {
  size_t start = 0;
  while (true) {
    const auto nl = p.pending.find('\n', start);
    if (nl == std::string::npos) break;
    std::printf("[%d] %.*s\n", p.rank, static_cast<int>(nl - start), p.pending.data() + start);
    start = nl + 1;
  }
  p.pending.erase(0, start);
  if (all && !p.pending.empty()) {
    std::printf("[%d] %s\n", p.rank, p.pending.c_str());
    p.pending.clear();
  }
  std::fflush(stdout);
}

namespace fs = std::filesystem;

// The newest modification time of a file under `dir` (the dataset's files).
fs::file_time_type newest_file(const fs::path& dir) {
  auto newest = fs::file_time_type::min();  // not {}: libstdc++'s file clock counts from 2174
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) newest = std::max(newest, e.last_write_time());
  return newest;
}

// --data DIR for N nodes: the partition set of DIR into N parts with `method` and `seed`, beside
// the dataset's cache (made with degnn partition unless one cut from the same files is there).
std::string partitions_for(const std::string& data, int nodes, const std::string& method,
                           const std::string& seed, const std::string& cache_dir) {
  if (!fs::is_directory(data)) throw config_error("launch: --data " + data + " is not a folder");
  const fs::path cache = default_cache_path(data, cache_dir);
  if (cache.empty())
    throw config_error(
        "launch: no cache folder for the partitions of --data (set HOME, XDG_CACHE_HOME or "
        "--cache-dir), or partition first: degnn partition --data " +
        data + " --parts " + std::to_string(nodes) + " --out DIR, then launch --partitions DIR");
  const fs::path out = cache.parent_path() / (cache.stem().string() + "-" + std::to_string(nodes) +
                                              "parts-" + method + "-seed" + seed);
  const std::string source = fs::absolute(data).lexically_normal().string();
  if (fs::exists(out / "partitions.meta")) {
    try {
      const partition_meta m = load_partition_meta(out);
      if (m.num_parts == nodes && m.method == method && std::to_string(m.seed) == seed &&
          fs::absolute(m.source).lexically_normal().string() == source &&
          fs::last_write_time(out / "partitions.meta") >= newest_file(data)) {
        std::fprintf(stderr, "launch: using the %d partitions of %s in %s\n", nodes, data.c_str(),
                     out.c_str());
        return out.string();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "launch: cutting %s again (%s)\n", out.c_str(), e.what());
    }
  }
  std::fprintf(stderr, "launch: partitioning %s into %d parts (%s) in %s\n", data.c_str(), nodes,
               method.c_str(), out.c_str());
  std::vector<std::string> args = {"--data",   data,        "--parts", std::to_string(nodes),
                                   "--method", method,      "--seed",  seed,
                                   "--out",    out.string()};
  if (!cache_dir.empty()) args.insert(args.end(), {"--cache-dir", cache_dir});
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  if (const int rc = run_partition(static_cast<int>(argv.size()), argv.data()); rc != 0)
    throw std::runtime_error("launch: partitioning " + data + " failed");
  std::fprintf(stderr, "launch: next time, launch --partitions %s skips this step\n", out.c_str());
  return out.string();
}

struct launch_options {
  int nodes = 0;
  std::string tls, data, cache_dir;
  bool partitions = false;  ///< --partitions given (goes to the nodes)
  std::string method = "metis", partition_seed = "1";
  std::vector<std::string> forwarded;  ///< what every node gets as given
};

void print_launch_help() {
  std::printf(
      "usage: degnn launch --local N [--tls DIR] [node options]\n\n"
      "Starts N degnn node processes on this machine: node 0 the seed on a free loopback\n"
      "port, the others joining it (with --tls DIR, node K uses DIR/node-K.*). Every other\n"
      "option goes to each node (degnn node --help lists them). Output lines carry the\n"
      "rank; Ctrl-C stops the whole cluster; the exit code is the worst node's.\n"
      "With --data DIR instead of --partitions, DIR is first partitioned into N parts\n"
      "(--partition-method, --seed) beside its cache (--cache-dir), or those are reused.\n");
}

// --local N and --tls DIR are the launcher's; every other option goes to each node as given.
// Nothing for --help (printed).
std::optional<launch_options> read_launch_options(int argc, char** argv) {
  launch_options o;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto is = [&](const std::string& name) { return a == name || a.rfind(name + "=", 0) == 0; };
    auto value = [&](const std::string& name) -> std::string {
      if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
      if (i + 1 >= argc) throw config_error("launch: " + name + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      print_launch_help();
      return std::nullopt;
    }
    if (is("--local")) {
      const std::string v = value("--local");
      try {
        o.nodes = std::stoi(v);
      } catch (const std::exception&) {
        o.nodes = 0;
      }
      if (o.nodes < 1 || o.nodes > 256)
        throw config_error("launch: --local '" + v + "' is not 1..256");
    } else if (is("--tls")) {
      o.tls = value("--tls");
    } else if (is("--data")) {
      o.data = value("--data");
    } else if (is("--partition-method")) {
      o.method = value("--partition-method");
      if (o.method != "metis" && o.method != "random")
        throw config_error("launch: --partition-method '" + o.method + "' is not metis or random");
    } else if (is("--cache-dir")) {
      o.cache_dir = value("--cache-dir");
    } else if (is("--seed")) {
      // The nodes take it too; the launcher also needs it for --data.
      o.partition_seed = value("--seed");
      o.forwarded.insert(o.forwarded.end(), {"--seed", o.partition_seed});
    } else {
      if (is("--partitions")) o.partitions = true;
      for (const char* own : {"--is-seed", "--join", "--listen", "--tls-name", "--rank-hint",
                              "--peers", "--id", "--name", "--config-file"}) {
        if (is(own))
          throw config_error(std::string("launch: ") + own +
                             " is set by the launcher for each node");
      }
      o.forwarded.push_back(a);
    }
  }
  if (o.nodes == 0) throw config_error("launch: --local N is required (nodes on this machine)");
  if (!o.data.empty() && o.partitions)
    throw config_error("launch: --data and --partitions: give one (--data is partitioned first)");
  if (o.data.empty() && (!o.cache_dir.empty() || o.method != "metis"))
    throw config_error("launch: --partition-method and --cache-dir go with --data");
  return o;
}

// Ctrl-C and SIGTERM reach the loop through signal_pipe.
void catch_signals() {
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("launch: pipe");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would make waitpid never report an exit
}

// Node 0 the seed at `seed`, the others joining it.
std::vector<node_process> start_nodes(const launch_options& o, const std::string& seed) {
  std::vector<node_process> procs;
  for (int k = 0; k < o.nodes; ++k) {
    std::vector<std::string> args = {"degnn", "node"};
    if (k == 0) {
      args.insert(args.end(), {"--is-seed", "--listen", seed, "--nodes", std::to_string(o.nodes)});
    } else {
      args.insert(args.end(), {"--join", seed, "--rank-hint", std::to_string(k)});
    }
    if (!o.tls.empty())
      args.insert(args.end(), {"--tls", o.tls, "--tls-name", "node-" + std::to_string(k)});
    args.insert(args.end(), o.forwarded.begin(), o.forwarded.end());
    procs.push_back(start_node(k, args));
  }
  return procs;
}

// Relays the nodes' output and waits for every node to end; the first unexpected exit (or a
// signal) stops the others, and whatever does not end within 5 s after that is killed.
class supervisor {
 public:
  explicit supervisor(std::vector<node_process> procs)
      : procs_(std::move(procs)), running_(static_cast<int>(procs_.size())) {}

  int run() {
    while (running_ > 0) {
      std::vector<pollfd> fds = {{signal_pipe[0], POLLIN, 0}};
      for (auto& p : procs_)
        if (p.out >= 0) fds.push_back({p.out, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 100);
      if (fds[0].revents & POLLIN) take_signals();
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) relay(fds[i].fd);
      reap();
      if (clock::now() > kill_at_) {
        for (auto& p : procs_)
          if (p.running) ::kill(p.pid, SIGKILL);
      }
    }
    drain();
    // The code of the exit that stopped the cluster (the cause), not of the nodes it then
    // stopped; after Ctrl-C or SIGTERM, 130 or 143.
    int code = first_failure_;
    if (code == 0) {
      for (const auto& p : procs_)
        code = std::max(code, p.code);
    }
    std::fprintf(stderr, "launch: every node ended (exit code %d)\n", code);
    return code;
  }

 private:
  using clock = std::chrono::steady_clock;

  void stop_all(int sig, const std::string& why) {
    if (!stopping_) std::fprintf(stderr, "launch: %s; stopping every node\n", why.c_str());
    stopping_ = true;
    for (auto& p : procs_)
      if (p.running) ::kill(p.pid, sig);
    kill_at_ = std::min(kill_at_, clock::now() + std::chrono::seconds(5));
  }

  void take_signals() {
    char sig = 0;
    while (::read(signal_pipe[0], &sig, 1) == 1) {
      if (first_failure_ == 0) first_failure_ = 128 + sig;
      stop_all(sig, sig == SIGINT ? "interrupted" : "terminated");
    }
  }

  void relay(int fd) {
    auto& p = *std::find_if(procs_.begin(), procs_.end(),
                            [&](const node_process& x) { return x.out == fd; });
    char buf[65536];
    const ssize_t n = ::read(p.out, buf, sizeof buf);
    if (n > 0) {
      p.pending.append(buf, static_cast<size_t>(n));
      flush_lines(p, false);
    } else if (n == 0) {
      flush_lines(p, true);
      ::close(p.out);
      p.out = -1;
    }
  }

  // Every exit of this pass first: when a killed node and the node that stopped because it lost
  // it end within one pass, the cause is the one a signal ended.
  void reap() {
    const node_process* cause = nullptr;
    bool cause_signalled = false;
    for (auto& p : procs_) {
      if (!p.running) continue;
      int status = 0;
      if (::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
      p.running = false;
      --running_;
      p.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      const bool signalled = WIFSIGNALED(status);
      if (p.code != 0 && (!cause || (signalled && !cause_signalled))) {
        cause = &p;
        cause_signalled = signalled;
      }
    }
    if (cause && !stopping_) {
      first_failure_ = cause->code;
      stop_all(SIGTERM, "node " + std::to_string(cause->rank) + " exited with " +
                            std::to_string(cause->code));
    }
  }

  // Output still in the pipes after the last exit.
  void drain() {
    for (auto& p : procs_) {
      if (p.out < 0) continue;
      char buf[65536];
      for (ssize_t n; (n = ::read(p.out, buf, sizeof buf)) > 0;)
        p.pending.append(buf, static_cast<size_t>(n));
      flush_lines(p, true);
      ::close(p.out);
    }
  }

  std::vector<node_process> procs_;
  int running_;
  int first_failure_ = 0;
  bool stopping_ = false;
  clock::time_point kill_at_ = clock::time_point::max();
};

}  // namespace

int run_launch(int argc, char** argv) {
  std::optional<launch_options> o = read_launch_options(argc, argv);
  if (!o) return 0;
  if (!o->data.empty()) {
    o->forwarded.insert(o->forwarded.end(),
                        {"--partitions", partitions_for(o->data, o->nodes, o->method,
                                                        o->partition_seed, o->cache_dir)});
  }
  const port_reservation seed_port;
  const std::string seed = "127.0.0.1:" + std::to_string(seed_port.port());
  catch_signals();
  supervisor cluster(start_nodes(*o, seed));
  std::fprintf(stderr, "launch: %d nodes, seed at %s\n", o->nodes, seed.c_str());
  return cluster.run();
}

}  // namespace degnn
