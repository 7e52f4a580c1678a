// The web DVR's session cookies (web/session.h).
#include "web/session.h"

#include "common/random.h"
#include "common/sha256.h"

namespace agentenv::web {
namespace {

std::string Key(std::string_view value) {
  Sha256 h;
  h.Update(value);
  auto d = h.Final();
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

// The port of a Host header ("h:8080", "[::1]:8080"), "" without one.
std::string_view PortOf(std::string_view host) {
  const size_t colon = host.rfind(':');
  if (colon == std::string_view::npos || host.find(']', colon) != std::string_view::npos) return "";
  std::string_view port = host.substr(colon + 1);
  for (char c : port)
    if (c < '0' || c > '9') return "";
  return port;
}

}  // namespace

Result<std::string> SessionStore::Open(const std::string& token) {
  if (token.empty()) return Fail(ErrorCode::kInvalid, "session: no token to stand for");
  AE_ASSIGN(std::string value, RandomHex(16));
  const Clock::time_point now = now_();
  MutexLock lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();)
    it = now - it->second.made > lifetime_ ? sessions_.erase(it) : std::next(it);
  while (sessions_.size() >= kMaxSessions) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.made < oldest->second.made) oldest = it;
    sessions_.erase(oldest);
  }
  sessions_[Key(value)] = Session{token, now};
  return value;
}

std::string SessionStore::TokenOf(std::string_view cookie_header) {
  const Clock::time_point now = now_();
  // "a=1; agentenv_dvr_8080=abc; b=2": every cookie of ours is tried.
  size_t at = 0;
  while (at < cookie_header.size()) {
    size_t end = cookie_header.find(';', at);
    if (end == std::string_view::npos) end = cookie_header.size();
    std::string_view pair = cookie_header.substr(at, end - at);
    at = end + 1;
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || !pair.substr(0, eq).starts_with(kCookiePrefix)) continue;
    const std::string key = Key(pair.substr(eq + 1));
    MutexLock lock(mu_);
    auto it = sessions_.find(key);
    if (it == sessions_.end()) continue;
    if (now - it->second.made > lifetime_) {
      sessions_.erase(it);
      continue;
    }
    return it->second.token;
  }
  return "";
}

std::string SessionStore::SetCookie(std::string_view host, const std::string& value, bool secure) const {
  const std::string_view port = PortOf(host);
  const auto max_age = std::chrono::duration_cast<std::chrono::seconds>(lifetime_).count();
  return std::string(kCookiePrefix) + std::string(port.empty() ? "default" : port) + "=" + value +
         "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age) + (secure ? "; Secure" : "");
}

size_t SessionStore::size() const {
  MutexLock lock(mu_);
  return sessions_.size();
}

}  // namespace agentenv::web
