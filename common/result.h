// Result<T>: a value or an Error, shaped like C++23 std::expected so that
// switching to it later is a one-line change of the aliases below.
// Libraries return Result instead of printing or exiting.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace agentenv {

// What kind of failure, so that callers (CLI exit codes, socket and MCP
// error codes) can react without parsing messages.
enum class ErrorCode {
  kIo,           // the system said no (see errno_value); the default
  kInvalid,      // bad input from the caller: arguments, refs, archives
  kNotFound,     // a named thing (ref, object, path) does not exist
  kExists,       // refusing to overwrite (e.g. init on an initialized repo)
  kBusy,         // another process holds what we need
  kCorrupt,      // stored data fails verification
  kUnsupported,  // this machine or filesystem cannot do what was asked
  kNoProgram,    // the program to run does not exist (nothing ran: a shell's 127)
};

struct Error {
  std::string message;  // "path: what went wrong", ready to show a user
  int errno_value = 0;  // the errno behind it, 0 if none
  ErrorCode code = ErrorCode::kIo;
  // The operation started and may have changed things before it failed
  // (an exec whose command ran but whose snapshot failed).
  bool partial = false;
};

template <class E>
class Unexpected {
 public:
  explicit Unexpected(E e) : error_(std::move(e)) {}
  E& error() & { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  E error_;
};

template <class T, class E>
class [[nodiscard]] Expected {
 public:
  Expected() requires std::is_default_constructible_v<T> : v_(T{}) {}
  Expected(T v) : v_(std::in_place_index<0>, std::move(v)) {}
  template <class U>
    requires std::is_constructible_v<T, U&&> && (!std::is_same_v<std::decay_t<U>, Expected>) &&
             (!std::is_same_v<std::decay_t<U>, Unexpected<E>>)
  Expected(U&& v) : v_(std::in_place_index<0>, T(std::forward<U>(v))) {}
  Expected(Unexpected<E> u) : v_(std::in_place_index<1>, std::move(u).error()) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const E& error() const& { return std::get<1>(v_); }
  E&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, E> v_;
};

template <class E>
class [[nodiscard]] Expected<void, E> {
 public:
  Expected() = default;
  Expected(Unexpected<E> u) : error_(std::move(u).error()), ok_(false) {}
  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void value() const {}
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  E error_;
  bool ok_ = true;
};

template <class T>
using Result = Expected<T, Error>;

// Fail("msg") builds the error side of any Result.
inline Unexpected<Error> Fail(std::string message, int errno_value = 0) {
  return Unexpected<Error>(Error{std::move(message), errno_value});
}
inline Unexpected<Error> Fail(ErrorCode code, std::string message) {
  return Unexpected<Error>(Error{std::move(message), 0, code});
}

// FailErrno(path, errno) -> "path: strerror(errno)", the house message format.
inline Unexpected<Error> FailErrno(std::string_view what, int errno_value) {
  std::string m(what);
  m += ": ";
  m += std::strerror(errno_value);
  return Fail(std::move(m), errno_value);
}

// Re-wraps an error with more context in front: "context: inner message".
inline Unexpected<Error> Wrap(std::string_view context, const Error& inner) {
  return Unexpected<Error>(
      Error{std::string(context) + ": " + inner.message, inner.errno_value, inner.code});
}

}  // namespace agentenv

// AE_TRY(expr): evaluate a Result<void>; return its error from the caller.
#define AE_TRY(expr)                                                \
  do {                                                              \
    auto ae_try_r_ = (expr);                                        \
    if (!ae_try_r_) return ::agentenv::Unexpected<::agentenv::Error>( \
        std::move(ae_try_r_).error());                              \
  } while (0)

#define AE_CONCAT_INNER(a, b) a##b
#define AE_CONCAT(a, b) AE_CONCAT_INNER(a, b)

// AE_ASSIGN(decl, expr): `auto x` or an lvalue = the value of a Result<T>;
// returns the error from the caller on failure.
#define AE_ASSIGN(decl, expr) AE_ASSIGN_IMPL(AE_CONCAT(ae_assign_r_, __LINE__), decl, expr)
#define AE_ASSIGN_IMPL(tmp, decl, expr)                                          \
  auto tmp = (expr);                                                             \
  if (!tmp) return ::agentenv::Unexpected<::agentenv::Error>(std::move(tmp).error()); \
  decl = std::move(tmp).value()
