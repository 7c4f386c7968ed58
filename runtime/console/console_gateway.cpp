// Node 0's HTTPS console gateway (console_gateway.hpp) and the console's side of it.
#include "runtime/console/console_gateway.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "runtime/process/config_error.hpp"
#include "runtime/transport/http_gate.hpp"
#include "serialization/wire_console.hpp"
// Last: httplib.h pulls in <resolv.h>, whose `_res` macro breaks Eigen's templates.
#include <httplib.h>

namespace degnn {

namespace {

constexpr const char* kCapnp = "application/x-capnp";
constexpr std::size_t kMaxChallenges = 256;
constexpr std::size_t kMaxRequest = 64 << 10;
constexpr auto kChallengeLife = std::chrono::seconds(60);

std::string body_of(const wire::bytes& b) {
  return std::string(b.begin(), b.end());
}

std::string refusal(const std::string& why) {
  return body_of(wire::encode(wire::context{}, wire::console_reply{false, why}));
}

}  // namespace

struct console_gateway::impl {
  explicit impl(const tls_files& t) : tls(t) {}
  tls_files tls;
  std::mutex lock;
  /// Challenges issued and not answered yet, with when; each is taken once.
  std::map<std::string, std::chrono::steady_clock::time_point> challenges;
  /// Last: stopped (and its thread joined) before anything its handler uses goes.
  std::optional<http_gate> gate;

  std::vector<std::uint8_t> issue() {
    std::lock_guard<std::mutex> g(lock);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = challenges.begin(); it != challenges.end();)
      it = now - it->second > kChallengeLife ? challenges.erase(it) : std::next(it);
    if (challenges.size() >= kMaxChallenges) {
      auto oldest = challenges.begin();
      for (auto it = challenges.begin(); it != challenges.end(); ++it)
        if (it->second < oldest->second) oldest = it;
      challenges.erase(oldest);
    }
    auto c = random_challenge();
    challenges[std::string(c.begin(), c.end())] = now;
    return c;
  }
  bool take(const std::vector<std::uint8_t>& c) {
    std::lock_guard<std::mutex> g(lock);
    const auto it = challenges.find(std::string(c.begin(), c.end()));
    if (it == challenges.end()) return false;
    const bool fresh = std::chrono::steady_clock::now() - it->second <= kChallengeLife;
    challenges.erase(it);
    return fresh;
  }
};

console_gateway::console_gateway(const endpoint& where, const tls_files& tls,
                                 caf::actor_system& sys, node_actor node, std::string key)
    : impl_(std::make_unique<impl>(tls)) {
  impl* self = impl_.get();
  auto handle = [self, &sys, node, key](const http_request& q, http_gate::reply_fn reply) {
    if (q.target == "/challenge") {
      reply({200, kCapnp,
             body_of(wire::encode(wire::context{}, wire::console_challenge{self->issue()}))});
      return;
    }
    if (q.target != "/command") {
      reply({404, "text/plain", "the console gateway serves /challenge and /command\n"});
      return;
    }
    auto refuse = [&](const std::string& why) { reply({200, kCapnp, refusal(why)}); };
    wire::console_request req;
    try {
      req = wire::decode_console_request(wire::context{.max_bytes = kMaxRequest}, q.body);
    } catch (const wire::wire_error& e) {
      refuse(e.what());
      return;
    }
    // The proof: a challenge this gateway gave (once, recently), signed with a key whose
    // certificate the CA made out to an operator, and the job token.
    if (!self->take(req.challenge))
      return refuse(
          "the console's proof answers no challenge of this gateway (or an old or used one)");
    std::string name;
    const std::string why = verify_proof(self->tls, {req.certificate, req.signature, req.token_mac},
                                         req.challenge, name);
    if (!why.empty()) {
      std::fprintf(stderr, "node 0: TLS console refused %s: %s\n", q.remote.c_str(), why.c_str());
      return refuse("the console's " + why);
    }
    if (name.rfind("operator-", 0) != 0) {
      std::fprintf(stderr, "node 0: TLS console refused %s: '%s' is not an operator\n",
                   q.remote.c_str(), name.c_str());
      return refuse("'" + name + "' is not an operator certificate (degnn certs --operators)");
    }
    // The node actor answers on its own time; the gate's thread serves other clients meanwhile.
    sys.spawn([reply, node, key, name, command = req.command, &sys](caf::event_based_actor* a) {
      a->request(node, std::chrono::seconds(30), console_atom_v, key, name, command)
          .then(
              [reply](std::vector<char>& b) {
                reply({200, kCapnp, std::string(b.begin(), b.end())});
              },
              [reply, &sys](caf::error& e) {
                reply({200, kCapnp, refusal("node 0 did not answer: " + sys.render(e))});
              });
    });
  };
  // Mutual TLS (a client certificate of the cluster CA) before any byte of a request is read;
  // a request is its head and a Cap'n Proto body of at most 64 KiB, in 5 s.
  impl_->gate.emplace(
      where, "--console", http_gate::async_handler(handle),
      http_limits{
          .max_body = kMaxRequest, .head_deadline = std::chrono::seconds(5), .post_only = true},
      make_door_context(tls));
}

console_gateway::~console_gateway() = default;

std::uint16_t console_gateway::port() const {
  return impl_->gate->port();
}

std::unique_ptr<console_gateway> node_console_gateway(const std::string& address, bool node0,
                                                      const std::optional<tls_files>& tls,
                                                      caf::actor_system& sys, node_actor node,
                                                      const std::string& key) {
  if (address.empty()) return nullptr;
  if (!tls)
    throw config_error(
        "node: --console serves the console of a TLS cluster; without --tls the console attaches "
        "to node 0's --listen address");
  if (!node0) {
    std::fprintf(stderr, "node: --console is served by node 0 only; not serving it here\n");
    return nullptr;
  }
  const endpoint where = parse_endpoint(address, "--console", true);
  auto gate = std::make_unique<console_gateway>(where, *tls, sys, node, key);
  std::fprintf(stderr, "node 0: TLS console on %s:%u (certificate %s)\n", where.host.c_str(),
               gate->port(), tls->name.c_str());
  return gate;
}

wire::console_reply ask_console_gateway(const endpoint& where, const std::string& server_name,
                                        const tls_files& tls, const std::string& command,
                                        int timeout_s) {
  // Connected by the server's certificate name, which the name map sends to its address, so the
  // name on node 0's certificate is checked as well as its chain to the CA.
  httplib::SSLClient cli(server_name, where.port, tls.certificate().string(), tls.key().string());
  cli.set_hostname_addr_map({{server_name, where.host}});
  cli.set_ca_cert_path(tls.ca().string());
  cli.enable_server_certificate_verification(true);
  cli.set_connection_timeout(timeout_s, 0);
  cli.set_read_timeout(timeout_s, 0);
  cli.set_write_timeout(timeout_s, 0);
  auto fail = [&](const std::string& what, const httplib::Result& res) -> std::runtime_error {
    std::string why = httplib::to_string(res.error());
    if (res.error() == httplib::Error::SSLServerVerification)
      why += " (is the gateway's certificate made out to " + server_name + "? --server-name)";
    return std::runtime_error(what + " to the console gateway at " + where.str() +
                              " failed: " + why);
  };
  auto challenge = cli.Post("/challenge", "", kCapnp);
  if (!challenge) throw fail("the challenge request", challenge);
  if (challenge->status != 200)
    throw std::runtime_error("the console gateway answered HTTP " +
                             std::to_string(challenge->status));
  const auto c = wire::decode_console_challenge(wire::context{}, challenge->body);
  join_proof p = prove(tls, c.challenge);
  const wire::console_request req{command, std::move(p.certificate), std::move(p.signature),
                                  std::move(p.token_mac), c.challenge};
  auto reply = cli.Post("/command", body_of(wire::encode(wire::context{}, req)), kCapnp);
  if (!reply) throw fail("the command", reply);
  if (reply->status != 200)
    throw std::runtime_error("the console gateway answered HTTP " + std::to_string(reply->status));
  return wire::decode_console_reply(wire::context{}, reply->body);
}

}  // namespace degnn
