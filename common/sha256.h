// SHA-256 and lowercase hex, once for every module: object ids (store/),
// OCI digests (archive/, registry/). Not thread-safe per object; distinct
// objects may be used from different threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

namespace agentenv {

// Lowercase hex of `bytes`, two digits per byte.
std::string HexEncode(std::span<const uint8_t> bytes);

// An incremental SHA-256. libcrypto's direct digest functions, not EVP:
// the first EVP fetch loads the OpenSSL config, the error strings and the
// provider name map, and registers their teardown at exit (~1.5 ms of
// every CLI call, a third of a no-op `snap`'s start-up). The direct
// functions run the same code (SHA-NI where the CPU has it); they are
// deprecated in OpenSSL 3, not removed. Cannot fail.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;
  Sha256() { ::SHA256_Init(&ctx_); }
  void Update(const void* p, size_t n) { ::SHA256_Update(&ctx_, p, n); }
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // The digest of everything updated so far; the object is spent after.
  Digest Final();
  // "sha256:<64 hex digits>", the OCI form; the object is spent after.
  std::string OciDigest();

  static Digest Of(std::span<const uint8_t> data);
  static std::string OciDigestOf(std::string_view data);

 private:
  SHA256_CTX ctx_;
};

}  // namespace agentenv
