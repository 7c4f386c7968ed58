// The TLS half of a node's door: one OpenSSL context per node (TLS 1.2 or later, the node's
// certificate and key, peers must present a certificate the cluster CA signed) and the name a
// verified peer's certificate is made out to.
#pragma once

#include <memory>
#include <string>

#include "runtime/transport/cluster_certificates.hpp"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace degnn {

struct ssl_ctx_free {
  void operator()(SSL_CTX* c) const;
};
using ssl_ctx_ptr = std::unique_ptr<SSL_CTX, ssl_ctx_free>;

/// Both roles (accepting and connecting) use it. Throws std::runtime_error naming the file.
ssl_ctx_ptr make_door_context(const tls_files& tls);

/// After a completed handshake: "" and `name` set to the peer certificate's common name, or why
/// the peer is refused (no certificate, a chain the CA did not sign).
std::string verified_peer_name(SSL* ssl, std::string& name);

/// The last OpenSSL errors of this thread as one line (and the queue emptied).
std::string openssl_errors();

}  // namespace degnn
