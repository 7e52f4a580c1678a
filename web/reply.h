// Small helpers of the web DVR's routes: JSON replies, errors as HTTP
// statuses, query parameters and the paths a node's files are named by.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "common/result.h"

namespace agentenv::web {

inline void SendJson(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

inline void SendError(httplib::Response& res, int status, const std::string& message) {
  SendJson(res, {{"error", message}}, status);
}

// An operation's error as its HTTP status: 404 for a missing ref or path,
// 400 for bad arguments, 409 when busy or already there, else 500.
inline void SendError(httplib::Response& res, const Error& e) {
  int status = 500;
  switch (e.code) {
    case ErrorCode::kNotFound:
    case ErrorCode::kNoProgram: status = 404; break;
    case ErrorCode::kInvalid: status = 400; break;
    case ErrorCode::kBusy: case ErrorCode::kExists: status = 409; break;
    default: break;
  }
  SendError(res, status, e.message);
}

inline std::string Param(const httplib::Request& req, const char* name, const std::string& dflt = "") {
  return req.has_param(name) ? req.get_param_value(name) : dflt;
}

inline std::optional<int64_t> IntParam(const httplib::Request& req, const char* name, int64_t dflt) {
  if (!req.has_param(name)) return dflt;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno) return std::nullopt;
  return n;
}

// A path inside a node: relative, '/'-separated, without "." or ".."
// segments or NUL; leading and trailing slashes dropped ("" is the root).
// nullopt for anything else: such a path names nothing in a node.
inline std::optional<std::string> NodePath(const std::string& given) {
  std::string out, seg;
  for (size_t i = 0; i <= given.size(); ++i) {
    if (i < given.size() && given[i] == '\0') return std::nullopt;
    if (i == given.size() || given[i] == '/') {
      if (seg == "." || seg == "..") return std::nullopt;
      if (!seg.empty()) out += (out.empty() ? "" : "/") + seg;
      seg.clear();
    } else {
      seg += given[i];
    }
  }
  return out;
}

}  // namespace agentenv::web
