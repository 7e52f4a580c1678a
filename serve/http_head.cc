// A request's head and the guard (serve/http_head.h).
#include "serve/http_head.h"

#include <strings.h>

#include <algorithm>
#include <cstring>

#include "serve/http.h"

namespace agentenv::serve {
namespace {

// RFC 9110 tchar: what a method or a header name is made of.
bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!IsTokenChar(c) || c == '\0') return false;
  return true;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadParse Bad(int status, std::string why) {
  HeadParse p;
  p.status = HeadParse::Status::kBad;
  p.http_status = status;
  p.why = std::move(why);
  return p;
}

bool LoopbackOrigin(std::string_view origin) {
  for (std::string_view scheme : {"http://", "https://"})
    if (origin.starts_with(scheme)) return IsLoopbackHost(HostOf(origin.substr(scheme.size())));
  return false;
}

// The framing of the body: kBad's reason, or "" when it is clear.
std::string Framing(RequestHead& h) {
  const size_t lengths = h.Count("Content-Length"), encodings = h.Count("Transfer-Encoding");
  if (lengths && encodings) return "both Content-Length and Transfer-Encoding";
  if (lengths > 1) return "more than one Content-Length header";
  if (encodings > 1) return "more than one Transfer-Encoding header";
  if (encodings) {
    if (!EqualsNoCase(h.Value("Transfer-Encoding"), "chunked")) return "a Transfer-Encoding other than chunked";
    h.body = RequestHead::Body::kChunked;
  } else if (lengths) {
    const std::string v = h.Value("Content-Length");
    if (v.empty() || v.size() > 15 || v.find_first_not_of("0123456789") != std::string::npos)
      return "a Content-Length that is not a number";
    h.length = std::stoull(v);
    h.body = h.length ? RequestHead::Body::kLength : RequestHead::Body::kNone;
  }
  return "";
}

}  // namespace

size_t RequestHead::Count(std::string_view name) const {
  size_t n = 0;
  for (const auto& [k, v] : headers) n += EqualsNoCase(k, name);
  return n;
}

std::string RequestHead::Value(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (EqualsNoCase(k, name)) return v;
  return "";
}

std::string RequestHead::path() const { return target.substr(0, target.find_first_of("?#")); }

bool RequestHead::keep_alive() const {
  const std::string c = Value("Connection");
  if (version == "HTTP/1.0") return EqualsNoCase(c, "keep-alive");
  return !EqualsNoCase(c, "close");
}

HeadParse ParseHead(std::string_view in) {
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (in.size() >= kMaxHeadBytes) return Bad(431, "request head larger than 16 KiB");
    // A request line or header that is too long already fails now, not
    // when the rest has come.
    const size_t last = in.rfind('\n');
    if (in.size() - (last == std::string_view::npos ? 0 : last + 1) > kMaxHeadLine)
      return Bad(431, "a request line or header longer than 8 KiB");
    return {};
  }
  if (end + 4 > kMaxHeadBytes) return Bad(431, "request head larger than 16 KiB");
  HeadParse p;
  RequestHead& h = p.head;
  h.size = end + 4;
  std::string_view rest = in.substr(0, end + 2);  // each line with its CRLF
  bool first = true;
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (line.size() > kMaxHeadLine) return Bad(431, "a request line or header longer than 8 KiB");
    for (char c : line)
      if ((uint8_t(c) < 0x20 && c != '\t') || c == 0x7f) return Bad(400, "a control byte in the request head");
    if (first) {
      first = false;
      const size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
      if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return Bad(400, "the request line is not METHOD TARGET VERSION");
      h.method = std::string(line.substr(0, sp1));
      h.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
      h.version = std::string(line.substr(sp2 + 1));
      if (!IsToken(h.method)) return Bad(400, "a method that is not a token");
      // An origin-form target, its path without escapes: the path the
      // router matches is then these very bytes (it would decode %XX and
      // %uXXXX), so no other spelling of a path reaches a route.
      if (!h.target.starts_with("/")) return Bad(400, "a request target that is not a path (/...)");
      if (h.path().find('%') != std::string::npos) return Bad(400, "a percent-escape in the request path");
      for (char c : h.target)
        if (uint8_t(c) <= 0x20 || c == 0x7f) return Bad(400, "a blank or control byte in the request target");
      if (h.version != "HTTP/1.1" && h.version != "HTTP/1.0") return Bad(505, "only HTTP/1.1 and HTTP/1.0 are served");
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') return Bad(400, "a folded header line");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon)))
      return Bad(400, "a header line that is not NAME: VALUE");
    h.headers.emplace_back(std::string(line.substr(0, colon)), std::string(Trim(line.substr(colon + 1))));
  }
  if (std::string why = Framing(h); !why.empty()) return Bad(400, why);
  p.status = HeadParse::Status::kComplete;
  return p;
}

std::string HostOf(std::string_view authority) {
  if (authority.starts_with("[")) {
    const size_t end = authority.find(']');
    return std::string(end == std::string_view::npos ? authority : authority.substr(1, end - 1));
  }
  const size_t colon = authority.rfind(':');
  return std::string(colon == std::string_view::npos ? authority : authority.substr(0, colon));
}

std::string PresentedToken(const RequestHead& head, const GuardOptions& opt) {
  const std::string authorization = head.Value("Authorization");
  if (authorization.size() > 7 && ::strncasecmp(authorization.c_str(), "bearer ", 7) == 0)
    return std::string(Trim(std::string_view(authorization).substr(7)));
  if (head.Count("Cookie") == 0) return "";
  const std::string cookie = head.Value("Cookie");
  for (const auto& session : opt.sessions)
    if (std::string token = session(cookie); !token.empty()) return token;
  return "";
}

Refusal Guard(const RequestHead& head, const GuardOptions& opt) {
  const size_t hosts = head.Count("Host");
  if (hosts > 1) return {400, "more than one Host header", false};
  if (hosts == 0 && head.version == "HTTP/1.1") return {400, "no Host header (HTTP/1.1 requires one)", false};
  if (head.Count("Origin") > 1) return {400, "more than one Origin header", false};
  if (head.Count("Authorization") > 1) return {400, "more than one Authorization header", false};
  const std::string host = head.Value("Host");
  if (opt.loopback && !IsLoopbackHost(HostOf(host)))
    return {403, "Host '" + host + "' refused: this server answers only to a loopback name (localhost, 127.0.0.1, [::1])",
            false};
  if (head.Count("Origin")) {
    const std::string origin = head.Value("Origin");
    bool allowed = LoopbackOrigin(origin);
    for (const auto& a : opt.allowed_origins) allowed |= origin == a;
    if (!allowed) return {403, "Origin '" + origin + "' refused: allow it with --allow-origin", false};
  }
  const bool open = std::any_of(opt.open.begin(), opt.open.end(), [&](const auto& f) { return f(head.method, head.path()); });
  // The bearer header, else the token a session cookie was made from.
  const std::string presented = PresentedToken(head, opt);
  const std::string authorization = presented.empty() ? "" : "Bearer " + presented;
  if (!opt.token.empty() && !open && !BearerMatches(authorization, opt.token)) {
    const int status = opt.scoped ? opt.scoped(authorization, head.path()) : 401;
    // The same answer whether or not the path names something that exists.
    if (status == 403) return {403, "this token does not reach this endpoint", false};
    if (status == 0) return {};
    return {401, "missing or wrong bearer token: send 'Authorization: Bearer <token>' (the token is in the file the "
                 "server printed at start)",
            true};
  }
  return {};
}

}  // namespace agentenv::serve
