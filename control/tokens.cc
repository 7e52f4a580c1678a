// Scoped tokens on disk (control/tokens.h).
#include "control/tokens.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "common/durable.h"
#include "common/fields.h"
#include "common/random.h"
#include "common/read_all.h"
#include "common/sha256.h"
// After sha256.h, which keeps OpenSSL's deprecated digest functions quiet.
#include <openssl/crypto.h>
#include "common/unique_fd.h"
#include "snap/fsops.h"

namespace agentenv::control {
namespace {

struct TokenFile {
  std::vector<StoredToken> tokens;
  template <class V> void Fields(V& v) { v("tokens", tokens); }
};

std::string HashOf(std::string_view secret) {
  auto d = Sha256::Of({reinterpret_cast<const uint8_t*>(secret.data()), secret.size()});
  return HexEncode(d);
}

// The lock every change of the file is made under (WriteFileDurably's
// rule: one writer of a file at a time).
Result<UniqueFd> LockTokens(const std::string& root) {
  const std::string path = TokensPath(root) + ".lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return FailErrno(path, errno);
  while (::flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) return FailErrno(path, errno);
  return fd;
}

Result<void> Save(const std::string& root, const std::vector<StoredToken>& tokens) {
  TokenFile f{tokens};
  return WriteFileDurably(root, "tokens", ToJson(f).dump(), 0600);
}

}  // namespace

Result<std::vector<StoredToken>> LoadTokens(const std::string& root) {
  const std::string path = TokensPath(root);
  if (::access(path.c_str(), F_OK) != 0) {
    if (errno == ENOENT) return std::vector<StoredToken>{};
    return FailErrno(path, errno);
  }
  AE_ASSIGN(std::string text, ReadFileUpTo(path, 16 << 20));
  auto f = ReadReply<TokenFile>("tokens", json::parse(text, nullptr, false));
  if (!f) return Fail(ErrorCode::kCorrupt, path + ": " + f.error().message);
  return f->tokens;
}

Result<std::pair<StoredToken, std::string>> CreateToken(const std::string& root, const std::string& env, bool read_only,
                                                         int64_t expires_ns) {
  AE_ASSIGN(std::string random, RandomHex(32));
  std::string secret = "aet_" + random;
  StoredToken t;
  t.hash = HashOf(secret);
  t.id = t.hash.substr(0, 12);
  t.env = env;
  t.read_only = read_only;
  t.created_ns = snap::NowNs();
  t.expires_ns = expires_ns;
  AE_ASSIGN(UniqueFd lock, LockTokens(root));
  AE_ASSIGN(auto all, LoadTokens(root));
  all.push_back(t);
  AE_TRY(Save(root, all));
  return std::pair{t, secret};
}

Result<bool> RevokeToken(const std::string& root, const std::string& id) {
  AE_ASSIGN(UniqueFd lock, LockTokens(root));
  AE_ASSIGN(auto all, LoadTokens(root));
  auto it = std::remove_if(all.begin(), all.end(), [&](const StoredToken& t) { return t.id == id; });
  if (it == all.end()) return false;
  all.erase(it, all.end());
  AE_TRY(Save(root, all));
  return true;
}

std::optional<StoredToken> FindToken(const std::vector<StoredToken>& tokens, std::string_view secret, int64_t now_ns) {
  const std::string hash = HashOf(secret);
  std::optional<StoredToken> found;
  // Every hash is compared, each in constant time: the time taken says
  // nothing of how much of any stored hash a guess matched.
  for (const StoredToken& t : tokens)
    if (t.hash.size() == hash.size() && CRYPTO_memcmp(t.hash.data(), hash.data(), hash.size()) == 0) found = t;
  if (found && found->expires_ns != 0 && found->expires_ns <= now_ns) return std::nullopt;
  return found;
}

Result<int64_t> ParseDuration(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(uint8_t(text[i]))) ++i;
  const std::string unit = text.substr(i);
  int64_t per = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0;
  if (i == 0 || i > 9 || per == 0)
    return Fail(ErrorCode::kInvalid, "expires '" + text + "': give a duration such as 90s, 30m, 24h or 7d");
  const int64_t n = std::stoll(text.substr(0, i));
  if (n == 0) return Fail(ErrorCode::kInvalid, "expires '" + text + "': must be more than 0");
  return n * per * 1'000'000'000;
}

}  // namespace agentenv::control
