// Fields: one list of a struct's JSON keys, used both ways.
//
// A request or reply struct declares its keys once:
//
//   template <class V> void Fields(V& v) { v("message", message); v("limit", limit); }
//
// ToJson writes every field; Read fills a struct from JSON with exact type
// checks and error messages that name the key, and in strict mode (requests)
// refuses keys the struct does not have, so a misspelled argument
// ("timeout" for "timeout_s") is an error rather than silently ignored.
// Supported field types: bool, integers, double, std::string, json,
// std::vector<T>, std::optional<T> (null when absent),
// std::map<std::string, std::string>, and structs with Fields.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/result.h"

namespace agentenv {

using json = nlohmann::json;

// Field flag: leave the key out of the JSON when the value is empty
// (an empty string or container, nullopt, false, 0).
inline constexpr unsigned kOmitEmpty = 1;

class FieldWriter;
template <class T>
concept HasFields = requires(T& t, FieldWriter& w) { t.Fields(w); };

json ToJson(const std::string& v);
template <HasFields T>
json ToJson(const T& v);
template <class T>
json ToJson(const std::optional<T>& v);
template <class T>
json ToJson(const std::vector<T>& v);
inline json ToJson(const char* v) { return json(v); }
inline json ToJson(bool v) { return json(v); }
inline json ToJson(double v) { return json(v); }
inline json ToJson(const json& v) { return v; }
template <class T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
json ToJson(T v) { return json(v); }
template <class T>
json ToJson(const std::optional<T>& v) { return v ? ToJson(*v) : json(nullptr); }
template <class T>
json ToJson(const std::vector<T>& v) {
  json a = json::array();
  for (const auto& e : v) a.push_back(ToJson(e));
  return a;
}
json ToJson(const std::map<std::string, std::string>& v);

class FieldWriter {
 public:
  template <class T>
  void operator()(const char* key, const T& v, unsigned flags = 0) {
    if ((flags & kOmitEmpty) && Empty(v)) return;
    out[key] = ToJson(v);
  }
  json out = json::object();

 private:
  template <class T>
  static bool Empty(const T& v) {
    if constexpr (requires { v.empty(); }) return v.empty();
    else if constexpr (requires { v.has_value(); }) return !v.has_value();
    else if constexpr (requires { v == T{}; }) return v == T{};
    else return false;
  }
};

template <HasFields T>
json ToJson(const T& v) {
  FieldWriter w;
  const_cast<T&>(v).Fields(w);  // Fields only reads through a writer
  return std::move(w.out);
}

// Converting one JSON value into a field; nullopt on success, else what the
// value must be ("a string", ...).
template <class T>
std::optional<std::string> FromJson(const json& j, std::vector<T>& v);
template <class T>
std::optional<std::string> FromJson(const json& j, std::optional<T>& v);
template <HasFields T>
std::optional<std::string> FromJson(const json& j, T& v);
std::optional<std::string> FromJson(const json& j, std::string& v);
std::optional<std::string> FromJson(const json& j, bool& v);
std::optional<std::string> FromJson(const json& j, double& v);
std::optional<std::string> FromJson(const json& j, json& v);
std::optional<std::string> FromJson(const json& j, std::map<std::string, std::string>& v);
template <class T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
std::optional<std::string> FromJson(const json& j, T& v) {
  if constexpr (std::is_signed_v<T>) {
    if (!j.is_number_integer()) return "an integer";
    v = j.get<T>();
  } else {
    if (!j.is_number_integer() || (!j.is_number_unsigned() && j.get<int64_t>() < 0)) return "a non-negative integer";
    v = j.get<T>();
  }
  return std::nullopt;
}
template <class T>
std::optional<std::string> FromJson(const json& j, std::optional<T>& v) {
  if (j.is_null()) {
    v.reset();
    return std::nullopt;
  }
  T inner{};
  if (auto e = FromJson(j, inner)) return e;
  v = std::move(inner);
  return std::nullopt;
}
// Reads fields from one JSON object. The first problem wins.
class FieldReader {
 public:
  FieldReader(const json& in, bool strict) : in_(in), strict_(strict) {}
  template <class T>
  void operator()(const char* key, T& v, unsigned = 0) {
    known_.push_back(key);
    if (error_ || !in_.is_object() || !in_.contains(key)) return;
    if (auto want = FromJson(in_[key], v)) error_ = "argument '" + std::string(key) + "' must be " + *want;
  }
  // The error, if any: a wrong type, or (strict) a key no field has.
  std::optional<std::string> Finish() const;

 private:
  const json& in_;
  bool strict_;
  std::vector<std::string> known_;
  std::optional<std::string> error_;
};

template <HasFields T>
std::optional<std::string> FromJson(const json& j, T& v) {
  if (!j.is_object()) return "an object";
  FieldReader r(j, false);
  v.Fields(r);
  return r.Finish();
}

template <class T>
std::optional<std::string> FromJson(const json& j, std::vector<T>& v) {
  if (!j.is_array()) return "an array";
  v.clear();
  for (const auto& e : j) {
    T item{};
    if (auto want = FromJson(e, item)) return "an array whose items are each " + *want;
    v.push_back(std::move(item));
  }
  return std::nullopt;
}

// A request from JSON arguments: every key must be a field of T (kInvalid
// "<op>: unknown argument 'x' (known: ...)"), every value of its type
// (kInvalid "<op>: argument 'x' must be ..."). A null `args` is no
// arguments.
template <HasFields T>
Result<T> ReadRequest(std::string_view op, const json& args) {
  T v{};
  if (args.is_null()) return v;
  if (!args.is_object()) return Fail(ErrorCode::kInvalid, std::string(op) + ": arguments must be a JSON object");
  FieldReader r(args, true);
  v.Fields(r);
  if (auto e = r.Finish()) return Fail(ErrorCode::kInvalid, std::string(op) + ": " + *e);
  return v;
}

// A reply from JSON (a daemon's answer): unknown keys are ignored (a newer
// daemon may add some). Errors: kCorrupt naming the key.
template <class T>
Result<T> ReadReply(std::string_view op, const json& result) {
  T v{};
  if (auto e = FromJson(result, v)) return Fail(ErrorCode::kCorrupt, std::string(op) + ": malformed reply: " + *e);
  return v;
}

}  // namespace agentenv
