// The web DVR's sessions: the page trades the token, once, for a cookie
// (POST /api/session), so that what a browser sends by itself (a page
// load, an EventSource) is let through on a bind that is not loopback,
// where the listener wants the token on every request. A session stands
// for the token it was made from and nothing else: the listener's guard
// reads the token back from it (serve::PresentedToken), so whatever that
// token may do, and only that, applies to the session.
//
// The cookie: HttpOnly (no script reads it), SameSite=Strict (no other
// site's page sends it), Path=/, Secure when the page is served over TLS,
// named after the listener's port (two listeners of a host keep their own).
// Its value is 32 random hex digits; the store keeps their SHA-256 only,
// looked up in a map (a timing difference tells nothing of the value).
// Sessions end after their lifetime; at most kMaxSessions live at once
// (the oldest ends first).
//
// Thread-safety: all members may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/result.h"

namespace agentenv::web {

class SessionStore {
 public:
  using Clock = std::chrono::steady_clock;
  // `now` reads the time (a test sets its own); default the steady clock.
  explicit SessionStore(Clock::duration lifetime = std::chrono::hours(12),
                        std::function<Clock::time_point()> now = Clock::now)
      : lifetime_(lifetime), now_(std::move(now)) {}

  // A new session standing for `token` (not empty); returns the cookie's
  // value. Errors: kInvalid (an empty token), what the random source says.
  Result<std::string> Open(const std::string& token);
  // The token of the live session a Cookie header names (any cookie of
  // ours in it), "" when none: absent, unknown, forged or expired.
  std::string TokenOf(std::string_view cookie_header);
  // The Set-Cookie value for session `value` on the listener whose Host
  // header is `host`.
  std::string SetCookie(std::string_view host, const std::string& value, bool secure) const;
  size_t size() const;

  static constexpr size_t kMaxSessions = 256;
  static constexpr std::string_view kCookiePrefix = "agentenv_dvr_";

 private:
  struct Session {
    std::string token;
    Clock::time_point made;
  };
  const Clock::duration lifetime_;
  const std::function<Clock::time_point()> now_;
  mutable Mutex mu_;
  std::map<std::string, Session> sessions_ GUARDED_BY(mu_);  // by SHA-256 of the value
};

}  // namespace agentenv::web
