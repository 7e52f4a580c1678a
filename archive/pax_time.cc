#include "archive/pax_time.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace agentenv::archive {
namespace {

constexpr size_t kBlock = 512;
// libarchive refuses a special header's body larger than this.
constexpr uint64_t kMaxBody = 1 << 20;

uint64_t Padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

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

// A pax record "<length> <key>=<value>\n", its length counting itself.
std::string Record(std::string_view key, std::string_view value) {
  size_t n = key.size() + value.size() + 3;
  size_t digits = 1;
  while (std::to_string(n + digits).size() != digits) ++digits;
  return std::to_string(n + digits) + " " + std::string(key) + "=" + std::string(value) + "\n";
}

// `body` (pax records) with its time records converted; nullopt when none
// changes or it does not parse. *size: the value of its "size" record.
std::optional<std::string> Rewrite(std::string_view body, PaxTimeDirection d, std::optional<uint64_t>* size) {
  std::string out;
  bool changed = false;
  size_t i = 0;
  while (i < body.size()) {
    if (body[i] == '\0') {  // where libarchive stops reading
      out.append(body.substr(i));
      break;
    }
    size_t space = body.find(' ', i);
    if (space == std::string_view::npos || space - i > 9 || !Digits(body.substr(i, space - i))) return std::nullopt;
    size_t len = std::stoul(std::string(body.substr(i, space - i)));
    if (len < space - i + 3 || i + len > body.size() || body[i + len - 1] != '\n') return std::nullopt;
    std::string_view record = body.substr(space + 1, i + len - 1 - (space + 1));
    size_t eq = record.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "size" && Digits(value) && value.size() < 19) *size = std::stoull(std::string(value));
    std::optional<std::string> t;
    if (key == "mtime" || key == "atime" || key == "ctime") t = ConvertPaxTime(value, d);
    if (t) {
      out += Record(key, *t);
      changed = true;
    } else {
      out.append(body.substr(i, len));
    }
    i += len;
  }
  if (!changed) return std::nullopt;
  return out;
}

// A numeric header field as libarchive reads it: base-256 when its first
// byte has the high bit, else octal after leading spaces. nullopt when
// negative or too large.
std::optional<uint64_t> Number(const unsigned char* f, size_t n) {
  uint64_t v = 0;
  if (f[0] & 0x80) {
    if (f[0] & 0x40) return std::nullopt;
    v = f[0] & 0x3f;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 55) return std::nullopt;
      v = (v << 8) | f[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < n && (f[i] == ' ' || f[i] == '\t')) ++i;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + (f[i] - '0');
  }
  return v;
}

// libarchive's test: the checksum field holds octal digits, spaces or
// NULs and equals the sum of the header's bytes, unsigned or signed, with
// the field itself counted as spaces.
bool ChecksumOk(const unsigned char* h) {
  for (size_t i = 148; i < 156; ++i)
    if (h[i] != ' ' && h[i] != '\0' && (h[i] < '0' || h[i] > '7')) return false;
  std::optional<uint64_t> want = Number(h + 148, 8);
  long unsigned_sum = 0, signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    bool field = i >= 148 && i < 156;
    unsigned_sum += field ? ' ' : h[i];
    signed_sum += field ? ' ' : static_cast<signed char>(h[i]);
  }
  return want && (long(*want) == unsigned_sum || long(*want) == signed_sum);
}

void SetSizeAndChecksum(std::string* header, uint64_t size) {
  char* h = header->data();
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(size));
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(h[i]);
  std::snprintf(h + 148, 7, "%06o", sum);
  h[155] = ' ';
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

void PaxTimeFilter::Feed(std::span<const uint8_t> in, std::string* out) {
  const char* p = reinterpret_cast<const char*>(in.data());
  size_t n = in.size();
  while (n > 0) {
    if (state_ == State::kPass) {
      out->append(p, n);
      return;
    }
    if (state_ == State::kData) {
      size_t k = size_t(std::min<uint64_t>(data_, n));
      out->append(p, k);
      p += k, n -= k, data_ -= k;
      if (data_ == 0) state_ = State::kHeader, need_ = kBlock;
      continue;
    }
    size_t k = std::min(need_ - held_.size(), n);
    held_.append(p, k);
    p += k, n -= k;
    if (held_.size() == need_) Step(out);
  }
}

void PaxTimeFilter::Finish(std::string* out) { Emit(out); }

void PaxTimeFilter::Step(std::string* out) {
  switch (state_) {
    case State::kHeader: return OnHeader(out);
    case State::kPax: return OnPax(out);
    case State::kSparse: return OnSparse(out);
    case State::kData:
    case State::kPass: return;
  }
}

void PaxTimeFilter::Emit(std::string* out) {
  out->append(held_);
  held_.clear();
}

void PaxTimeFilter::PassRest(std::string* out) {
  Emit(out);
  state_ = State::kPass;
}

void PaxTimeFilter::SkipData(uint64_t bytes) {
  data_ = bytes;
  state_ = bytes ? State::kData : State::kHeader;
  need_ = kBlock;
}

void PaxTimeFilter::OnHeader(std::string* out) {
  const auto* h = reinterpret_cast<const unsigned char*>(held_.data());
  // The end-of-archive block: libarchive reads nothing after it.
  if (std::all_of(h, h + kBlock, [](unsigned char c) { return c == 0; })) return PassRest(out);
  std::optional<uint64_t> size = Number(h + 124, 12);
  if (!ChecksumOk(h) || !size) return PassRest(out);
  char type = char(h[156]);
  switch (type) {
    case 'x':
    case 'X':
      format_ = Format::kPax;
      if (*size > kMaxBody) return PassRest(out);
      body_ = *size;
      state_ = State::kPax;
      need_ = kBlock + Padded(*size);
      if (held_.size() == need_) OnPax(out);
      return;
    case 'g':
    case 'A':
      format_ = Format::kPax;
      [[fallthrough]];
    case 'K':
    case 'L':
      Emit(out);
      return SkipData(Padded(*size));
    case 'V':  // libarchive reads the next header right after it
      Emit(out);
      return SkipData(0);
  }
  bool gnu = std::memcmp(h + 257, "ustar  \0", 8) == 0;
  bool ustar = !gnu && std::memcmp(h + 257, "ustar", 5) == 0;
  if (gnu) format_ = Format::kGnu;
  else if (ustar) format_ = format_ == Format::kPax ? Format::kPax : Format::kUstar;
  else format_ = Format::kTar;
  uint64_t data = *size;
  if (type >= '2' && type <= '6') data = 0;
  // A hardlink's size counts in pax archives; elsewhere libarchive
  // ignores it, unless a ustar header's magic and version do not match.
  if (type == '1' && format_ != Format::kPax &&
      (format_ != Format::kUstar || std::memcmp(h + 257, "ustar\0" "00", 8) == 0))
    data = 0;
  if (pax_size_) data = *pax_size_;
  pax_size_.reset();
  Emit(out);
  if (gnu && type == 'S' && h[482] != 0) {  // extension blocks of the sparse map follow
    data_ = data;
    state_ = State::kSparse;
    need_ = kBlock;
    return;
  }
  SkipData(Padded(data));
}

void PaxTimeFilter::OnPax(std::string* out) {
  std::string_view body(held_.data() + kBlock, body_);
  std::optional<uint64_t> size;
  std::optional<std::string> rewritten = Rewrite(body, dir_, &size);
  // The nearest pax header before an entry is the one libarchive applies.
  pax_size_ = size;
  if (rewritten) {
    std::string header = held_.substr(0, kBlock);
    SetSizeAndChecksum(&header, rewritten->size());
    out->append(header);
    out->append(*rewritten);
    out->append(Padded(rewritten->size()) - rewritten->size(), '\0');
    held_.clear();
  } else {
    Emit(out);
  }
  state_ = State::kHeader;
  need_ = kBlock;
}

void PaxTimeFilter::OnSparse(std::string* out) {
  bool more = held_[504] != 0;
  Emit(out);
  if (!more) SkipData(Padded(data_));
}

}  // namespace agentenv::archive
