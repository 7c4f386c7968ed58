// Reading a node's cluster options into its launch mode and settings.
#include "runtime/cli/node_options.hpp"

#include <cstdlib>
#include <filesystem>

#include "runtime/cli/train_options.hpp"
#include "runtime/node/rendezvous.hpp"
#include "runtime/node/seed_discovery.hpp"

namespace degnn {

std::vector<option_spec> node_option_specs() {
  auto specs = train_option_specs();
  specs.push_back({"is-seed", "false", "this node is the seed (rank 0): the others join it", true});
  specs.push_back({"infer", "false",
                   "no training: evaluate the --init model once and write each partition's "
                   "--predictions (every node its own part-K)",
                   true});
  specs.push_back({"join", "",
                   "HOST:PORT of the seed to join, or auto (DEGNN_SEED, Slurm or a Kubernetes "
                   "StatefulSet)"});
  specs.push_back({"listen", "127.0.0.1:0",
                   "HOST:PORT this node listens on with --is-seed/--join (port 0: any free port)"});
  specs.push_back(
      {"advertise", "", "host the other nodes reach this one at (default: --listen's)"});
  specs.push_back(
      {"nodes", "",
       "the seed: N or MIN:MAX nodes (default: one per partition); the cluster forms at "
       "MAX at once, or at MIN after --last-call"});
  specs.push_back({"last-call", "5", "seconds the seed waits for more nodes once MIN joined"});
  specs.push_back({"join-timeout", "120", "seconds to wait for the cluster to form"});
  specs.push_back({"rank-hint", "-1", "the rank this node asks for (taken when free)"});
  specs.push_back({"name", "", "this node's name in views and logs (default HOST:PORT)"});
  specs.push_back(
      {"id", "", "static cluster: this node's index into --peers (node 0 coordinates)"});
  specs.push_back({"peers", "", "static cluster: HOST:PORT of every node, in node order"});
  specs.push_back({"connect-timeout", "60", "seconds to wait for all peers"});
  specs.push_back({"tls", "",
                   "folder of degnn certs: mutual TLS with DIR/ca.crt, DIR/NAME.crt, DIR/NAME.key "
                   "and DIR/job.token"});
  specs.push_back({"tls-name", "", "with --tls: this node's certificate name, e.g. node-2"});
  specs.push_back({"insecure", "false",
                   "publish on an address other than loopback without TLS (anyone who reaches "
                   "the port can talk to the node; see README)",
                   true});
  specs.push_back({"http", "",
                   "serve GET /status (JSON) and /metrics (Prometheus) on ADDR:PORT (loopback "
                   "unless --insecure): the training on node 0, the view (who coordinates, "
                   "where) on another node until it takes over as coordinator"});
  specs.push_back({"console", "",
                   "node 0 of a TLS cluster: serve the operator console (degnn console ... --tls) "
                   "over HTTPS with client certificates on ADDR:PORT (port 0: any free one)"});
  specs.push_back({"heartbeat-ms", "500", "milliseconds between heartbeats on each connection"});
  specs.push_back({"allow-faults", "false",
                   "test runs: the console may kill or stop nodes (every node must say so)", true});
  specs.push_back({"trace-dir", "",
                   "node 0: the folder where the console's `trace start FILE` writes (without "
                   "it, traces from the console are refused)"});
  specs.push_back({"recover", "off",
                   "off: a lost member stops the cluster (restart with --resume); adopt: the "
                   "survivors take over its partitions; replace: a new node joining through the "
                   "seed does (within --replace-timeout). Both roll back to the last commit and "
                   "go on (need --checkpoint-dir; every node must say the same)"});
  specs.push_back({"replace-timeout", "120",
                   "--recover replace: seconds node 0 waits for a replacement to join"});
  specs.push_back({"crash-after-step", "",
                   "fault injection: this node kills itself (SIGKILL) when a step after global "
                   "step N reaches it, as a crash at that point would"});
  // 60 s: most likely no heartbeat gets out while the middleman handles one large message (not
  // measured directly), and
  // the exact-inference history set-up on the 1M-node synthetic graph (4 nodes, 2 cores) went
  // silent for more than 10 s (20 x 500 ms raised false alarms; 60 x 500 ms survived).
  specs.push_back({"heartbeat-misses", "120",
                   "a connection silent for this many heartbeat intervals is dropped and its "
                   "node counted lost"});
  return specs;
}

std::string read_recover_mode(const option_set& opts, const train_settings& s,
                              const launch_mode& mode) {
  const std::string how = opts.str("recover");
  if (how != "off" && how != "adopt" && how != "replace")
    throw config_error("--recover " + how + ": off, adopt or replace");
  if (how != "off" && s.checkpoint_dir.empty())
    throw config_error("--recover " + how +
                       " rolls the cluster back to its last commit: it needs --checkpoint-dir "
                       "(and --checkpoint-every N for commits inside an epoch)");
  // A static cluster's view has no secret, so a new view could not be told from node 0's.
  if (how != "off" && mode.kind == launch_mode::static_peers)
    throw config_error("--recover " + how +
                       " needs a cluster formed through a seed (its view's secret authenticates "
                       "node 0's new views); a --peers cluster cannot recover inside the run: "
                       "restart it with --resume");
  return how;
}

launch_mode read_launch_mode(const option_set& opts) {
  launch_mode m;
  if (opts.given("tls")) {
    if (!opts.given("tls-name"))
      throw config_error(
          "node: --tls needs --tls-name NAME (this node's certificate, e.g. node-2)");
    m.tls = tls_files{opts.str("tls"), opts.str("tls-name")};
    m.tls->check();
    if (opts.given("name") && opts.str("name") != m.tls->name)
      throw config_error(
          "node: with --tls the name is the certificate's (--tls-name); drop --name");
  } else if (opts.given("tls-name")) {
    throw config_error("node: --tls-name is used only with --tls DIR");
  }
  m.name = m.tls ? m.tls->name : opts.given("name") ? opts.str("name") : "";
  const bool joining = opts.given("join") || opts.flag("is-seed");
  if (opts.given("peers") || opts.given("id")) {
    if (joining)
      throw config_error(
          "node: --peers/--id (a static cluster) and --is-seed/--join exclude each other");
    if (!opts.given("id")) throw config_error("node: --id K is required with --peers");
    m.peers = parse_peers(opts.str("peers"));
    m.id = static_cast<int>(opts.integer("id", 0, static_cast<std::int64_t>(m.peers.size()) - 1));
    m.listen = m.peers[static_cast<size_t>(m.id)];
    m.advertise = m.listen.host;
    return m;
  }
  if (!joining) {
    throw config_error(
        "node: say how the cluster forms: --is-seed on one node and --join HOST:PORT on the "
        "others, "
        "--join auto, or a static --peers list with --id");
  }
  for (const char* key : {"id", "peers"})
    if (opts.given(key))
      throw config_error(std::string("node: --") + key + " is for static clusters");
  m.listen = parse_endpoint(opts.str("listen"), "--listen", true);
  m.rank_hint = static_cast<int>(opts.integer("rank-hint", -1, 65535));
  m.kind = opts.flag("is-seed") ? launch_mode::seed : launch_mode::joiner;
  int expected = 0;
  if (opts.str("join") == "auto") {
    const auto [shortname, fqdn] = local_host_names();
    const discovered_seed d = discover_seed(std::getenv, shortname, fqdn, m.listen.port);
    m.found_by = d.source;
    m.seed_address = d.seed;
    if (d.is_seed) m.kind = launch_mode::seed;
    if (!opts.given("rank-hint")) m.rank_hint = d.rank_hint;
    expected = d.expected_nodes;
    m.listen.port = static_cast<std::uint16_t>(m.listen.port + d.listen_offset);
  } else if (opts.given("join")) {
    if (opts.flag("is-seed"))
      throw config_error("node: --is-seed and --join HOST:PORT exclude each other");
    m.seed_address = parse_endpoint(opts.str("join"), "--join");
  }
  if (m.kind == launch_mode::seed && m.listen.port == 0)
    throw config_error("node: the seed needs a fixed port in --listen (the others join there)");
  m.nodes = opts.given("nodes") ? parse_node_range(opts.str("nodes"))
            : expected > 0      ? std::pair<int, int>{expected, expected}
                                : std::pair<int, int>{0, 0};
  m.advertise = opts.given("advertise") ? opts.str("advertise") : m.listen.host;
  if (m.advertise == "0.0.0.0" || m.advertise == "::")
    throw config_error("node: --listen " + m.listen.host +
                       " needs --advertise HOST (the address the others reach)");
  return m;
}

}  // namespace degnn
