// A cluster's certificates, made and checked with the OpenSSL library: a cluster CA, one key pair
// per node and per operator (`degnn certs`), a job token; and the checks the seed runs on a joiner
// (the certificate chains to the CA, the joiner holds its key, it knows the job token), because
// CAF's TLS layer verifies the chain but never looks at names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace degnn {

/// Writes DIR/ca.crt, ca.key, node-K.crt/.key (K < nodes), operator-K.crt/.key (K < operators)
/// and job.token (32 random bytes, hex). Keys are P-256, certificates SHA-256, valid `days`.
/// Every file is private to the user (mode 0600). Throws std::runtime_error naming the file.
void make_cluster_certificates(const std::filesystem::path& dir, int nodes, int operators,
                               int days);

/// One node's TLS material: DIR/ca.crt, DIR/NAME.crt, DIR/NAME.key and DIR/job.token.
struct tls_files {
  std::filesystem::path dir;
  std::string name;  ///< the certificate's common name, e.g. "node-2"

  std::filesystem::path ca() const { return dir / "ca.crt"; }
  std::filesystem::path certificate() const { return dir / (name + ".crt"); }
  std::filesystem::path key() const { return dir / (name + ".key"); }
  std::filesystem::path token() const { return dir / "job.token"; }
  /// Throws config_error naming a missing or unreadable file, or a certificate whose name is not
  /// NAME or that the CA did not sign.
  void check() const;
};

/// A joiner's proof: its certificate (PEM), a signature with its key over `challenge`, and an
/// HMAC of `challenge` with the job token.
struct join_proof {
  std::string certificate;
  std::vector<std::uint8_t> signature;
  std::vector<std::uint8_t> token_mac;
};

join_proof prove(const tls_files& mine, const std::vector<std::uint8_t>& challenge);

/// The seed's check of a proof: "" and `name` set to the certificate's common name, or why not.
std::string verify_proof(const tls_files& seed, const join_proof& proof,
                         const std::vector<std::uint8_t>& challenge, std::string& name);

/// 32 random bytes.
std::vector<std::uint8_t> random_challenge();
/// `bytes` random bytes as hex: keys between a node's runtime and its node actor, view secrets.
std::string random_hex(std::size_t bytes);

}  // namespace degnn
