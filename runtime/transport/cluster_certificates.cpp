// Certificate generation and join proofs with OpenSSL 3.
#include "runtime/transport/cluster_certificates.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "model/durable_file.hpp"
#include "runtime/process/config_error.hpp"

namespace degnn {

namespace {

template <class T, void (*Free)(T*)>
struct ossl_deleter {
  void operator()(T* p) const { Free(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, ossl_deleter<EVP_PKEY, EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, ossl_deleter<X509, X509_free>>;
using bio_ptr = std::unique_ptr<BIO, ossl_deleter<BIO, BIO_free_all>>;
using store_ptr = std::unique_ptr<X509_STORE, ossl_deleter<X509_STORE, X509_STORE_free>>;
using store_ctx_ptr =
    std::unique_ptr<X509_STORE_CTX, ossl_deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, ossl_deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;

[[noreturn]] void fail(const std::string& what) {
  char buf[256] = "no OpenSSL error";
  if (const unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  throw std::runtime_error(what + " (" + buf + ")");
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw config_error("cannot read " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string bio_text(BIO* b) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<size_t>(n));
}

x509_ptr parse_certificate(const std::string& pem) {
  bio_ptr b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return x509_ptr(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
}

pkey_ptr parse_key(const std::string& pem) {
  bio_ptr b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return pkey_ptr(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr));
}

std::string common_name(X509* cert) {
  char buf[256] = {};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf,
                                          static_cast<int>(sizeof buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// "" when `cert` chains to `ca` and is valid now, else why not.
std::string chains_to(X509* cert, X509* ca) {
  store_ptr store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca);
  store_ctx_ptr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr);
  if (X509_verify_cert(ctx.get()) == 1) return "";
  return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext || !X509_add_ext(cert, ext, -1)) fail(std::string("certificate extension ") + value);
  X509_EXTENSION_free(ext);
}

x509_ptr make_certificate(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                          int days, bool is_ca) {
  x509_ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  std::uint8_t serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // clocks a little apart
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("degnn cluster"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (is_ca) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid");
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyAgreement");
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    add_extension(cert.get(), signer, NID_subject_alt_name, ("DNS:" + cn).c_str());
  }
  if (!X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()))
    fail("signing the certificate of " + cn);
  return cert;
}

pkey_ptr new_key() {
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) fail("generating a P-256 key");
  return key;
}

std::string pem_of(X509* cert) {
  bio_ptr b(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(b.get(), cert);
  return bio_text(b.get());
}

std::string pem_of(EVP_PKEY* key) {
  bio_ptr b(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return bio_text(b.get());
}

std::string hex(const std::vector<std::uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (auto b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::vector<std::uint8_t> token_mac(const std::string& token,
                                    const std::vector<std::uint8_t>& challenge) {
  std::vector<std::uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), challenge.data(),
       challenge.size(), mac.data(), &len);
  mac.resize(len);
  return mac;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace

void make_cluster_certificates(const std::filesystem::path& dir, int nodes, int operators,
                               int days) {
  std::filesystem::create_directories(dir);
  // Keys must never be readable by others, not even for the moment between write and chmod.
  const mode_t old_mask = ::umask(077);
  struct restore {
    mode_t m;
    ~restore() { ::umask(m); }
  } restore_mask{old_mask};
  const pkey_ptr ca_key = new_key();
  const x509_ptr ca =
      make_certificate("degnn cluster CA", ca_key.get(), nullptr, nullptr, days, true);
  write_file_durably(dir / "ca.crt", pem_of(ca.get()));
  write_file_durably(dir / "ca.key", pem_of(ca_key.get()));
  auto leaf = [&](const std::string& name) {
    const pkey_ptr key = new_key();
    const x509_ptr cert = make_certificate(name, key.get(), ca.get(), ca_key.get(), days, false);
    write_file_durably(dir / (name + ".crt"), pem_of(cert.get()));
    write_file_durably(dir / (name + ".key"), pem_of(key.get()));
  };
  for (int k = 0; k < nodes; ++k)
    leaf("node-" + std::to_string(k));
  for (int k = 0; k < operators; ++k)
    leaf("operator-" + std::to_string(k));
  write_file_durably(dir / "job.token", hex(random_challenge()) + "\n");
}

void tls_files::check() const {
  for (const auto& f : {ca(), certificate(), key(), token()}) {
    if (!std::filesystem::is_regular_file(f))
      throw config_error("TLS: " + f.string() + " does not exist (make them with degnn certs)");
  }
  const x509_ptr ca_cert = parse_certificate(read_text(ca()));
  if (!ca_cert) throw config_error("TLS: " + ca().string() + " is not a PEM certificate");
  const x509_ptr cert = parse_certificate(read_text(certificate()));
  if (!cert) throw config_error("TLS: " + certificate().string() + " is not a PEM certificate");
  if (common_name(cert.get()) != name) {
    throw config_error("TLS: " + certificate().string() + " is made out to '" +
                       common_name(cert.get()) + "', not '" + name + "'");
  }
  if (const std::string why = chains_to(cert.get(), ca_cert.get()); !why.empty())
    throw config_error("TLS: " + certificate().string() + " against " + ca().string() + ": " + why);
  const pkey_ptr k = parse_key(read_text(key()));
  if (!k) throw config_error("TLS: " + key().string() + " is not a PEM private key");
  if (X509_check_private_key(cert.get(), k.get()) != 1)
    throw config_error("TLS: " + key().string() + " is not the key of " + certificate().string());
  if (trimmed(read_text(token())).empty())
    throw config_error("TLS: " + token().string() + " is empty");
}

join_proof prove(const tls_files& mine, const std::vector<std::uint8_t>& challenge) {
  join_proof p;
  p.certificate = read_text(mine.certificate());
  const pkey_ptr key = parse_key(read_text(mine.key()));
  if (!key) fail("reading " + mine.key().string());
  md_ctx_ptr md(EVP_MD_CTX_new());
  size_t len = 0;
  if (EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &len, challenge.data(), challenge.size()) != 1)
    fail("signing the join challenge");
  p.signature.resize(len);
  if (EVP_DigestSign(md.get(), p.signature.data(), &len, challenge.data(), challenge.size()) != 1)
    fail("signing the join challenge");
  p.signature.resize(len);
  p.token_mac = token_mac(trimmed(read_text(mine.token())), challenge);
  return p;
}

std::string verify_proof(const tls_files& seed, const join_proof& proof,
                         const std::vector<std::uint8_t>& challenge, std::string& name) {
  const x509_ptr ca = parse_certificate(read_text(seed.ca()));
  const x509_ptr cert = parse_certificate(proof.certificate);
  if (!cert) return "its certificate is not PEM";
  if (const std::string why = chains_to(cert.get(), ca.get()); !why.empty())
    return "its certificate does not chain to the cluster CA: " + why;
  EVP_PKEY* key = X509_get0_pubkey(cert.get());
  md_ctx_ptr md(EVP_MD_CTX_new());
  if (!key || EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestVerify(md.get(), proof.signature.data(), proof.signature.size(), challenge.data(),
                       challenge.size()) != 1) {
    ERR_clear_error();
    return "it does not hold the key of its certificate";
  }
  const auto expected = token_mac(trimmed(read_text(seed.token())), challenge);
  if (expected.size() != proof.token_mac.size() ||
      CRYPTO_memcmp(expected.data(), proof.token_mac.data(), expected.size()) != 0)
    return "its job token is not this job's";
  name = common_name(cert.get());
  if (name.empty()) return "its certificate has no common name";
  return "";
}

std::string random_hex(std::size_t bytes) {
  std::vector<std::uint8_t> b(bytes);
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) fail("drawing random bytes");
  return hex(b);
}

std::vector<std::uint8_t> random_challenge() {
  std::vector<std::uint8_t> c(32);
  if (RAND_bytes(c.data(), static_cast<int>(c.size())) != 1) fail("drawing random bytes");
  return c;
}

}  // namespace degnn
