// Scoped tokens of `serve --listen` (`agentenv token create|ls|revoke`):
// each reaches one environment (the live tree, or one workspace), may be
// read-only, and may expire. The operator's token (<root>/http-token or
// --token-file) is not one of them: it reaches everything.
//
// On disk: <root>/tokens, JSON {"tokens":[{"id","hash","env","read_only",
// "created_ns","expires_ns"}]}, mode 0600, replaced durably (temp file,
// fsync, rename) under an flock of <root>/tokens.lock. Only the SHA-256 of
// a secret is stored: the secret is shown once, when it is made.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace agentenv::control {

// <root>/tokens: the scoped tokens, hashed (mode 0600), and the lock of
// their changes beside it.
inline std::string TokensPath(const std::string& root) { return root + "/tokens"; }

struct StoredToken {
  std::string id;    // 12 hex digits, what ls shows and revoke takes
  std::string hash;  // hex SHA-256 of the secret
  std::string env;   // "" the live tree, else a workspace
  bool read_only = false;
  int64_t created_ns = 0;
  int64_t expires_ns = 0;  // 0: never
  template <class V> void Fields(V& v) {
    v("id", id); v("hash", hash); v("env", env); v("read_only", read_only); v("created_ns", created_ns);
    v("expires_ns", expires_ns);
  }
};

// Every token of the repository at `root` (none when the file does not
// exist). Errors: kCorrupt (a file that does not parse), I/O.
Result<std::vector<StoredToken>> LoadTokens(const std::string& root);
// Makes a token and stores it; returns it with its secret ("aet_" + 64 hex
// digits), which is stored nowhere. Errors: I/O.
Result<std::pair<StoredToken, std::string>> CreateToken(const std::string& root, const std::string& env, bool read_only,
                                                         int64_t expires_ns);
// Removes token `id`; false when there is none. Errors: I/O.
Result<bool> RevokeToken(const std::string& root, const std::string& id);
// The stored token whose secret is `secret`, when it exists and has not
// expired at `now_ns`. Every stored hash is compared, each in constant
// time (CRYPTO_memcmp). Thread-safe.
std::optional<StoredToken> FindToken(const std::vector<StoredToken>& tokens, std::string_view secret, int64_t now_ns);
// "90s", "30m", "24h", "7d", or seconds: a duration in ns. Errors: kInvalid.
Result<int64_t> ParseDuration(const std::string& text);

}  // namespace agentenv::control
