#include "archive/tar_filter.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace agentenv::archive {
namespace {

constexpr size_t kBlock = 512;
// libarchive refuses a special header's body larger than this.
constexpr uint64_t kMaxBody = 1 << 20;

uint64_t Padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

bool Digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A decimal that fits an int64 (19 digits with a leading zero at most).
bool Decimal(std::string_view s) {
  if (!Digits(s)) return false;
  s.remove_prefix(std::min(s.find_first_not_of('0'), s.size()));
  return s.size() < 19 || (s.size() == 19 && s <= "9223372036854775807");
}

// A pax time as GNU tar reads one: -?digits, then anything (a fraction;
// GNU tar and libarchive both stop reading at the first byte that is not
// one, as in "1748089464.951928467a" of libarchive's tests).
bool Time(std::string_view s) {
  if (s.starts_with('-')) s.remove_prefix(1);
  size_t digits = std::min(s.find_first_not_of("0123456789"), s.size());
  return digits > 0 && Decimal(s.substr(0, digits));
}

// GNU.sparse.map: offset,size pairs.
bool SparseMap(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i <= s.size(); ++n) {
    size_t comma = std::min(s.find(',', i), s.size());
    if (!Decimal(s.substr(i, comma - i))) return false;
    i = comma + 1;
  }
  return n % 2 == 0;
}

// Why the value of record `key` is not what its key says; empty when fine
// (keys with free-form values: any value).
std::string BadValue(std::string_view key, std::string_view value) {
  static constexpr std::string_view kNumbers[] = {
      "size",
      "uid",
      "gid",
      "GNU.sparse.size",
      "GNU.sparse.realsize",
      "GNU.sparse.numblocks",
      "GNU.sparse.offset",
      "GNU.sparse.numbytes",
      "GNU.sparse.major",
      "GNU.sparse.minor",
      "SCHILY.devmajor",
      "SCHILY.devminor",
      "SCHILY.realsize"};
  static constexpr std::string_view kTimes[] = {"mtime", "atime", "ctime", "LIBARCHIVE.creationtime"};
  if (std::find(std::begin(kNumbers), std::end(kNumbers), key) != std::end(kNumbers) && !Decimal(value))
    return "not a decimal number";
  if (std::find(std::begin(kTimes), std::end(kTimes), key) != std::end(kTimes) && !Time(value))
    return "not a time (seconds: -?digits[.digits])";
  if (key == "GNU.sparse.map" && !SparseMap(value)) return "not a list of offset,size pairs";
  return "";
}

// `s` quoted for a message: printable ASCII as is, anything else as \xNN,
// at most 40 bytes.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + (s.size() > 40 ? "...'" : "'");
}

struct PaxRecord {
  std::string_view key, value, text;  // text: the whole record
};

// The records of pax header `body`, read as GNU tar reads them: "<length>
// <key>=<value>\n", the length counting the whole record; a NUL where a
// record would start ends the header (*end: where). Returns why the body
// is malformed, or "".
std::string ParseRecords(std::string_view body, std::vector<PaxRecord>* out, size_t* end) {
  size_t i = 0;
  for (; i < body.size() && body[i] != '\0'; ) {
    std::string_view rest = body.substr(i);
    std::string_view shown = rest.substr(0, rest.find('\n') == std::string_view::npos ? rest.size() : rest.find('\n') + 1);
    size_t digits = 0;
    while (digits < rest.size() && digits < 10 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 0) return "record " + Quote(shown) + " does not start with its length";
    if (digits == 10) return "record " + Quote(shown) + " has a length of 10 digits or more";
    size_t len = std::stoul(std::string(rest.substr(0, digits)));
    if (len > rest.size())
      return "record " + Quote(shown) + " says it is " + std::to_string(len) + " bytes, past the header's end (" +
             std::to_string(rest.size()) + " bytes left)";
    if (len < digits + 4)  // "<digits> k=\n" at least
      return "record " + Quote(shown) + " says it is " + std::to_string(len) + " bytes, too short for a record";
    std::string_view text = rest.substr(0, len);
    if (text[digits] != ' ') return "record " + Quote(text) + " has no blank after its length";
    if (text.back() != '\n') return "record " + Quote(shown) + " does not end where its length says (no newline there)";
    std::string_view kv = text.substr(digits + 1, len - digits - 2);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) return "record " + Quote(text) + " has no '='";
    if (eq == 0) return "record " + Quote(text) + " has an empty key";
    out->push_back({kv.substr(0, eq), kv.substr(eq + 1), text});
    i += len;
  }
  *end = i;
  return "";
}

// A pax record "<length> <key>=<value>\n", its length counting itself.
std::string Record(std::string_view key, std::string_view value) {
  size_t n = key.size() + value.size() + 3;
  size_t digits = 1;
  while (std::to_string(n + digits).size() != digits) ++digits;
  return std::to_string(n + digits) + " " + std::string(key) + "=" + std::string(value) + "\n";
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

void SetChecksum(char* h) {
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(h[i]);
  std::snprintf(h + 148, 7, "%06o", sum);
  h[155] = ' ';
}

void SetSizeAndChecksum(std::string* header, uint64_t size) {
  std::snprintf(header->data() + 124, 12, "%011llo", static_cast<unsigned long long>(size));
  SetChecksum(header->data());
}

// The name in a header (ustar's prefix, '/', name), for messages.
std::string HeaderName(const char* h) {
  std::string name(h, strnlen(h, 100));
  if (std::memcmp(h + 257, "ustar\0", 6) == 0 && h[345]) name = std::string(h + 345, strnlen(h + 345, 155)) + "/" + name;
  return name;
}

}  // namespace

void TarFilter::Feed(std::span<const uint8_t> in, std::string* out) {
  const char* p = reinterpret_cast<const char*>(in.data());
  size_t n = in.size();
  while (n > 0) {
    if (state_ == State::kRefused) return;
    if (state_ == State::kPass) {
      out->append(p, n);
      return;
    }
    if (state_ == State::kData) {
      size_t k = size_t(std::min<uint64_t>(data_, n));
      out->append(p, k);
      p += k, n -= k, data_ -= k, at_ += k;
      if (data_ == 0) state_ = State::kHeader, need_ = kBlock;
      continue;
    }
    size_t k = std::min(need_ - held_.size(), n);
    held_.append(p, k);
    p += k, n -= k;
    if (held_.size() == need_) Step(out);
  }
}

void TarFilter::Finish(std::string* out) {
  if (state_ == State::kRefused) return;
  if (pending_) {
    auto [header, body] = std::move(*pending_);
    pending_.reset();
    SetSizeAndChecksum(&header, body.size());
    out->append(header + body + std::string(Padded(body.size()) - body.size(), '\0'));
  }
  Emit(out);
}

void TarFilter::Step(std::string* out) {
  switch (state_) {
    case State::kHeader: return OnHeader(out);
    case State::kPax: return OnPax(out);
    case State::kSparse: return OnSparse(out);
    case State::kData:
    case State::kPass:
    case State::kRefused: return;
  }
}

void TarFilter::Emit(std::string* out) {
  out->append(held_);
  at_ += held_.size();
  held_.clear();
}

void TarFilter::PassRest(std::string* out) {
  Emit(out);
  state_ = State::kPass;
}

void TarFilter::SkipData(uint64_t bytes) {
  data_ = bytes;
  state_ = bytes ? State::kData : State::kHeader;
  need_ = kBlock;
}

void TarFilter::Refuse(std::string why) {
  refused_ = std::move(why);
  state_ = State::kRefused;
  held_.clear();
}

void TarFilter::FlushPending(std::string* out) {
  auto [header, body] = std::move(*pending_);
  pending_.reset();
  const char* h = held_.data();
  const bool entry = ChecksumOk(reinterpret_cast<const unsigned char*>(h)) && std::strchr("0123567", h[156]) &&
                     h[156] != 0 && std::memcmp(h + 257, "ustar\0", 6) == 0;
  std::vector<PaxRecord> records;
  size_t end = 0;
  ParseRecords(body, &records, &end);
  bool redundant = entry;
  for (const PaxRecord& r : records) {
    if (r.key == "path") redundant &= r.value == HeaderName(h);
    if (r.key == "linkpath") redundant &= r.value == std::string_view(h + 157, strnlen(h + 157, 100));
    if (r.key == "uname" || r.key == "gname") redundant = false;  // hdrcharset speaks for them too
  }
  if (redundant) {
    std::string kept;
    for (const PaxRecord& r : records)
      if (r.key != "path" && r.key != "linkpath" && r.key != "hdrcharset") kept += r.text;
    body = std::move(kept);
  }
  SetSizeAndChecksum(&header, body.size());
  out->append(header);
  out->append(body);
  out->append(Padded(body.size()) - body.size(), '\0');
}

void TarFilter::OnHeader(std::string* out) {
  if (pending_) FlushPending(out);
  const auto* h = reinterpret_cast<const unsigned char*>(held_.data());
  const std::string where = "header at byte " + std::to_string(at_);
  // The end-of-archive block: libarchive reads nothing after it.
  if (std::all_of(h, h + kBlock, [](unsigned char c) { return c == 0; })) return PassRest(out);
  std::optional<uint64_t> size = Number(h + 124, 12);
  if (!ChecksumOk(h)) {
    if (opt_.check) return Refuse(where + " is damaged (its checksum does not match)");
    return PassRest(out);
  }
  if (!size) {
    if (opt_.check) return Refuse(where + " has a size that is negative or too large");
    return PassRest(out);
  }
  char type = char(h[156]);
  switch (type) {
    case 'g':
      format_ = Format::kPax;
      // libarchive reads a global header and applies none of it; GNU tar
      // applies it, and refuses it when malformed.
      if (!opt_.check) {
        Emit(out);
        return SkipData(Padded(*size));
      }
      [[fallthrough]];
    case 'x':
    case 'X':
      format_ = Format::kPax;
      if (*size > kMaxBody) {
        if (opt_.check) return Refuse("pax " + where + " is " + std::to_string(*size) + " bytes, more than 1 MiB");
        return PassRest(out);
      }
      global_ = type == 'g';
      body_ = *size;
      state_ = State::kPax;
      need_ = kBlock + Padded(*size);
      if (held_.size() == need_) OnPax(out);
      return;
    case 'A':
      format_ = Format::kPax;
      Emit(out);
      return SkipData(Padded(*size));
    case 'K':
      long_link_ = *size > 0;
      [[fallthrough]];
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
  const bool link_named = pax_link_ || long_link_;
  pax_link_ = long_link_ = false;
  // libarchive takes a link's target from the header's name field and
  // only then from a pax linkpath or long name, which it stores as the
  // link only when the field was set (for the first link of an archive,
  // never): a placeholder there lets the real target replace it.
  if (opt_.check && (type == '1' || type == '2') && h[157] == 0) {
    if (!link_named)
      return Refuse("entry '" + HeaderName(held_.data()) + "' (" + where + ") is a " +
                    (type == '1' ? "hardlink" : "symlink") + " with no target");
    held_[157] = '.';
    SetChecksum(held_.data());
  }
  Emit(out);
  if (gnu && type == 'S' && h[482] != 0) {  // extension blocks of the sparse map follow
    data_ = data;
    state_ = State::kSparse;
    need_ = kBlock;
    return;
  }
  SkipData(Padded(data));
}

void TarFilter::OnPax(std::string* out) {
  std::string_view body(held_.data() + kBlock, body_);
  const std::string where = "pax header at byte " + std::to_string(at_);
  std::vector<PaxRecord> records;
  size_t end = 0;
  std::string bad = ParseRecords(body, &records, &end);
  state_ = State::kHeader;
  need_ = kBlock;
  if (!bad.empty() && opt_.check) return Refuse(where + ": " + bad);
  if (opt_.check) {
    for (const PaxRecord& r : records)
      if (std::string why = BadValue(r.key, r.value); !why.empty())
        return Refuse(where + ": record " + Quote(r.text) + ": " + why);
  }
  if (global_) return Emit(out);
  // The nearest pax header before an entry is the one libarchive applies,
  // up to a malformed record.
  pax_size_.reset();
  pax_link_ = false;
  for (const PaxRecord& r : records) {
    if (r.key == "size" && Decimal(r.value)) pax_size_ = std::stoull(std::string(r.value));
    if (r.key == "linkpath") pax_link_ = !r.value.empty();
  }
  if (!bad.empty()) return Emit(out);
  std::string rewritten;
  bool changed = false, hdrcharset = false;
  for (const PaxRecord& r : records) {
    std::optional<std::string> t;
    if (opt_.times && (r.key == "mtime" || r.key == "atime" || r.key == "ctime")) t = ConvertPaxTime(r.value, *opt_.times);
    rewritten += t ? Record(r.key, *t) : std::string(r.text);
    changed |= t.has_value();
    hdrcharset |= r.key == "hdrcharset";
  }
  // Held until the entry's own header shows whether its fields hold the
  // names the charset was written for.
  if (opt_.ustar_names && hdrcharset && end == body.size()) {
    pending_.emplace(held_.substr(0, kBlock), std::move(rewritten));
    at_ += held_.size();
    held_.clear();
    return;
  }
  // NULs after the last record: GNU tar stops reading there, libarchive
  // calls the header malformed and drops its path and link records.
  if (end < body.size()) {
    if (opt_.check) changed = true;
    else rewritten.append(body.substr(end));
  }
  if (!changed) return Emit(out);
  std::string header = held_.substr(0, kBlock);
  SetSizeAndChecksum(&header, rewritten.size());
  out->append(header);
  out->append(rewritten);
  out->append(Padded(rewritten.size()) - rewritten.size(), '\0');
  at_ += held_.size();
  held_.clear();
}

void TarFilter::OnSparse(std::string* out) {
  bool more = held_[504] != 0;
  Emit(out);
  if (!more) SkipData(Padded(data_));
}

}  // namespace agentenv::archive
