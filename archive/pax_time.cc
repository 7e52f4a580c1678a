#include "archive/pax_time.h"

#include <algorithm>

namespace agentenv::archive {
namespace {

bool Digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The decimal `d` plus or minus one, without leading zeros; `d` > 0 when
// minus.
std::string AddOne(std::string_view d, bool plus) {
  std::string s(d);
  size_t i = s.size();
  if (plus) {
    while (i > 0 && s[i - 1] == '9') s[--i] = '0';
    if (i == 0) s.insert(s.begin(), '1');
    else ++s[i - 1];
  } else {
    while (i > 0 && s[i - 1] == '0') s[--i] = '9';
    --s[i - 1];
  }
  size_t first = s.find_first_not_of('0');
  return first == std::string::npos ? "0" : s.substr(first);
}

// 1 - 0.f as the same number of digits as f (f > 0).
std::string Complement(std::string_view f) {
  std::string out(f);
  size_t last = out.find_last_not_of('0');
  for (size_t i = 0; i < last; ++i) out[i] = char('9' - (out[i] - '0'));
  out[last] = char('0' + 10 - (out[last] - '0'));
  return out;
}

}  // namespace

std::optional<std::string> ConvertPaxTime(std::string_view value, PaxTimeDirection d) {
  if (value.size() < 4 || value[0] != '-') return std::nullopt;
  size_t dot = value.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view whole = value.substr(1, dot - 1), fraction = value.substr(dot + 1);
  if (!Digits(whole) || !Digits(fraction) || fraction.find_first_not_of('0') == std::string_view::npos)
    return std::nullopt;
  // -I.F = -(I+1) + (1 - 0.F): the fraction turns into its complement and
  // the whole part moves by one. libarchive never writes "-0.F".
  bool zero = whole.find_first_not_of('0') == std::string_view::npos;
  if (d == PaxTimeDirection::kToPosix && zero) return std::nullopt;
  return "-" + AddOne(whole, d == PaxTimeDirection::kToLibarchive) + "." + Complement(fraction);
}

}  // namespace agentenv::archive
