// degnn certs: a cluster CA, a key pair per node and per operator, and a job token, for mutual
// TLS between nodes (degnn node --tls DIR --tls-name node-K) and for the console's operators.
#include <cstdio>

#include "runtime/cli/cli_options.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/transport/cluster_certificates.hpp"

namespace degnn {

int run_certs(int argc, char** argv) {
  option_set opts(
      "certs", "degnn certs --out DIR --nodes N [--operators M] [--days D]",
      {{"out", "", "folder to write ca.crt, node-K.crt/.key, operator-K.crt/.key, job.token"},
       {"nodes", "", "node key pairs to make (node-0 ... node-N-1)"},
       {"operators", "0", "operator key pairs to make (for degnn console)"},
       {"days", "365", "days the certificates are valid"},
       {"force", "false", "overwrite a folder that already holds a CA", true}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (!opts.given("out")) throw config_error("certs: --out DIR is required");
  if (!opts.given("nodes")) throw config_error("certs: --nodes N is required");
  const std::filesystem::path dir = opts.str("out");
  if (std::filesystem::exists(dir / "ca.key") && !opts.flag("force")) {
    throw config_error("certs: " + (dir / "ca.key").string() +
                       " exists: a new CA would lock out every node of that cluster (pass "
                       "--force to replace it)");
  }
  const int nodes = static_cast<int>(opts.integer("nodes", 1, 4096));
  const int operators = static_cast<int>(opts.integer("operators", 0, 4096));
  make_cluster_certificates(dir, nodes, operators,
                            static_cast<int>(opts.integer("days", 1, 36500)));
  std::printf(
      "wrote a cluster CA, %d node and %d operator key pairs and a job token to %s "
      "(files private to this user; copy ca.crt, job.token and node-K.* to node K)\n",
      nodes, operators, dir.c_str());
  return 0;
}

}  // namespace degnn
