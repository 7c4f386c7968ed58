// degnn node: one node process of a cluster. The cluster forms through a seed (`--is-seed` on one
// node, `--join HOST:PORT` or `--join auto` on the others: the seed assigns ranks and partitions
// and sends the view) or from a static --peers list. Node K loads its partitions, spawns their
// worker actors (batch actor, shard, embedding store), connects to every other node and takes the
// handles of their actors; then node 0 coordinates training while the others serve until told
// to stop.
//   degnn node --is-seed --listen 127.0.0.1:24800 --nodes 4 --partitions DIR [settings]
//   degnn node --join 127.0.0.1:24800 --partitions DIR [settings]      (three times)
//   degnn node --config-file=cluster.conf --id K                          (static peers)
#include "runtime/cli/commands.hpp"
#include "runtime/cli/node_options.hpp"
#include "runtime/cli/node_process.hpp"
#include "runtime/cli/train_options.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/transport/endpoint.hpp"

namespace degnn {

int run_node(int argc, char** argv) {
  option_set opts(
      "node",
      "degnn node (--is-seed | --join HOST:PORT | --join auto | --config-file=F --id K) "
      "--partitions DIR [settings]",
      node_option_specs());
  if (!opts.parse(argc, argv, 0)) return 0;
  if (opts.given("data")) {
    throw config_error(
        "node: --data is not used by a node, which reads only its partition from "
        "--partitions (made by degnn partition); remove it");
  }
  for (const char* key : {"parts", "compare-with", "cache-dir"}) {
    if (opts.given(key)) {
      throw config_error(std::string("node: --") + key +
                         " is not used by a node (the partition set and the cluster's members "
                         "define it); remove it");
    }
  }
  if (!opts.given("partitions"))
    throw config_error("node: --partitions DIR is required (made by degnn partition)");
  node_process_settings n;
  n.train = read_train_settings(opts);
  if (opts.flag("infer")) {
    if (n.train.init.empty() || n.train.predictions.empty())
      throw config_error("node: --infer needs --init MODEL and --predictions DIR");
    if (opts.given("epochs") || opts.given("resume") || opts.given("checkpoint-dir"))
      throw config_error(
          "node: --infer trains no epoch: remove --epochs, --resume and "
          "--checkpoint-dir");
    n.train.epochs = 0;  // one evaluation of the starting parameters (drive_training)
  }
  n.mode = read_launch_mode(opts);
  n.insecure = opts.flag("insecure");
  // Without TLS, whoever reaches the port is a peer (the door bounds what a stranger costs, not
  // what a peer may ask): stay on loopback unless the operator accepts that.
  if (!n.mode.tls && !is_loopback(n.mode.listen.host) && !n.insecure) {
    throw config_error("node: " + n.mode.listen.host +
                       " is not a loopback address, and nodes do not authenticate each other "
                       "yet without --tls DIR (see degnn certs); pass --insecure to publish there "
                       "anyway (on a trusted network only)");
  }
  n.heartbeat = std::chrono::milliseconds(opts.integer("heartbeat-ms", 10, 60'000));
  n.silence = n.heartbeat * opts.integer("heartbeat-misses", 2, 1000);
  n.join_timeout = std::chrono::seconds(opts.integer("join-timeout", 1));
  n.connect_timeout = std::chrono::seconds(opts.integer("connect-timeout", 1));
  n.replace_timeout = std::chrono::seconds(opts.integer("replace-timeout", 1, 86'400));
  n.last_call =
      std::chrono::milliseconds(static_cast<std::int64_t>(opts.real("last-call", 0, 3600) * 1000));
  if (opts.given("crash-after-step"))
    n.crash_after_step = static_cast<std::uint64_t>(opts.integer("crash-after-step", 0));
  n.allow_faults = opts.flag("allow-faults");
  n.recover = read_recover_mode(opts, n.train, n.mode);
  if (opts.given("trace-dir")) n.trace_dir = opts.str("trace-dir");
  n.http = opts.str("http");
  n.console = opts.str("console");
  return run_node_process(std::move(n));
}

}  // namespace degnn
