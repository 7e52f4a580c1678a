// What the HTTP listener (serve/http.h) decides from a request's head
// before any thread serves it: the head parsed strictly enough that the
// library parsing it again later (cpp-httplib) cannot read other headers
// than these, and the guard that refuses a request by its head alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentenv::serve {

// A head's limits: cpp-httplib's own (a header line over 8 KiB fails
// there), and a whole head well above what any client here sends.
inline constexpr size_t kMaxHeadBytes = 16 << 10;
inline constexpr size_t kMaxHeadLine = 8 << 10;

struct RequestHead {
  std::string method, target, version;  // "GET", "/api/ls?ref=HEAD", "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, values trimmed
  size_t size = 0;  // bytes of the head, its blank line included
  enum class Body { kNone, kLength, kChunked } body = Body::kNone;
  uint64_t length = 0;  // for kLength

  // Headers named `name` (case-insensitive).
  size_t Count(std::string_view name) const;
  // The first one's value, or "".
  std::string Value(std::string_view name) const;
  // The target's path (no query, no fragment): what a route is chosen by.
  // ParseHead admits no escape in it, so the router sees the same one.
  std::string path() const;
  // Whether the connection stays open after this request's reply.
  bool keep_alive() const;
};

struct HeadParse {
  enum class Status { kIncomplete, kComplete, kBad } status = Status::kIncomplete;
  RequestHead head;  // for kComplete
  int http_status = 0;  // for kBad: 400, 414, 431, 501, 505
  std::string why;      // for kBad
};

// Parses the head at the start of `in` (what a connection sent so far).
// kIncomplete: more bytes are needed (never once `in` holds kMaxHeadBytes:
// that is kBad, 431). Lines end in CRLF; a bare CR or LF, a folded or
// nameless header, control bytes, two Content-Length headers, or both
// Content-Length and Transfer-Encoding are kBad (a request read two ways
// is how requests are smuggled past a guard), and so is a target that is
// not a path starting with '/' or whose path holds a '%'. Pure; thread-safe.
HeadParse ParseHead(std::string_view in);

struct GuardOptions {
  bool loopback = true;                     // the listener is bound to a loopback address
  std::string token;                        // required on every request when not empty
  std::vector<std::string> allowed_origins; // beyond the loopback ones
  // Requests served without a credential (a page's own files, which hold
  // no data), by method and path (HttpRoutes::open).
  std::vector<std::function<bool(std::string_view method, std::string_view path)>> open;
  // The token a Cookie header's session was made from, "" for none
  // (HttpRoutes::session_token).
  std::vector<std::function<std::string(const std::string& cookie)>> sessions;
  // With a token: the status refusing another bearer on a path (0 passes:
  // a scoped token on its environment's endpoint, serve/grants.h; 401 or
  // 403). Empty: only the token passes.
  std::function<int(std::string_view authorization, std::string_view path)> scoped;
};

struct Refusal {
  int status = 0;  // 0: the request passes
  std::string message;
  bool bearer_challenge = false;  // answer with WWW-Authenticate: Bearer
  explicit operator bool() const { return status != 0; }
};

// The token a request presents: the bearer token of its Authorization
// header, else the token its session cookie was made from (a session
// stands for the token it was exchanged for, so what that token may do
// applies to the session), else "". The one place a credential is read.
std::string PresentedToken(const RequestHead& head, const GuardOptions& opt);

// The guard every request passes before a route sees it:
//   - exactly one Host header (RFC 9112: 400 otherwise), and on a loopback
//     bind it names a loopback host (DNS rebinding: 403);
//   - at most one Origin and one Authorization header (400);
//   - an Origin, when sent, is a loopback origin or an allowed one (403);
//   - with a token, "Authorization: Bearer <token>" or a session cookie
//     made from it (PresentedToken), unless the request is an open one
//     (401); or a scoped token on its own environment's endpoint
//     (`scoped`: 401 or 403).
// Pure; thread-safe.
Refusal Guard(const RequestHead& head, const GuardOptions& opt);

// The host part of a Host header or an origin's authority ("[::1]:80",
// "localhost:8080", "example.com").
std::string HostOf(std::string_view authority);

}  // namespace agentenv::serve
