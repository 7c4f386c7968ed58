// OpenSSL set-up of a node's door.
#include "runtime/transport/door_tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdexcept>

namespace degnn {

void ssl_ctx_free::operator()(SSL_CTX* c) const {
  SSL_CTX_free(c);
}

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no OpenSSL error recorded" : out;
}

ssl_ctx_ptr make_door_context(const tls_files& tls) {
  ssl_ctx_ptr ctx(SSL_CTX_new(TLS_method()));
  if (!ctx) throw std::runtime_error("TLS: cannot make a context: " + openssl_errors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  auto need = [&](int ok, const std::filesystem::path& file, const std::string& what) {
    if (ok != 1)
      throw std::runtime_error("TLS: cannot use " + file.string() + " as " + what + ": " +
                               openssl_errors());
  };
  need(SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate().c_str()), tls.certificate(),
       "this node's certificate");
  need(SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key().c_str(), SSL_FILETYPE_PEM), tls.key(),
       "this node's key");
  need(SSL_CTX_check_private_key(ctx.get()), tls.key(), "the key of " + tls.certificate().string());
  need(SSL_CTX_load_verify_locations(ctx.get(), tls.ca().c_str(), nullptr), tls.ca(),
       "the cluster CA");
  // Both sides must show a certificate of the cluster CA; names are checked by the door.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(ctx.get(), 2);
  // The door writes from its own buffers, which may move between tries.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  return ctx;
}

std::string verified_peer_name(SSL* ssl, std::string& name) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (!cert) return "it showed no certificate";
  const long verdict = SSL_get_verify_result(ssl);
  std::string why;
  if (verdict != X509_V_OK) {
    why = std::string("its certificate does not chain to the cluster CA (") +
          X509_verify_cert_error_string(verdict) + ")";
  } else {
    char buf[256] = {0};
    const int n =
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf);
    if (n <= 0)
      why = "its certificate has no common name";
    else
      name.assign(buf, static_cast<std::size_t>(n));
  }
  X509_free(cert);
  return why;
}

}  // namespace degnn
