// Little byte codecs for snap/'s binary formats: LEB128 varints,
// zigzag-signed varints, length-prefixed strings. Readers return false on
// truncated or oversized input instead of reading past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentenv::snap {

// The encodings built on a writer's U8/Var/Raw (CRTP): zigzag-signed
// varints, length-prefixed strings, string pairs. Both writers below share
// them, so their byte formats cannot drift apart.
template <class Self>
class Encodings {
 public:
  void Signed(int64_t v) { self().Var((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }
  void Str(std::string_view s) {
    self().Var(s.size());
    self().Raw(s.data(), s.size());
  }
  // A count, then each pair's two strings (xattrs).
  void Pairs(const std::vector<std::pair<std::string, std::string>>& p) {
    self().Var(p.size());
    for (const auto& [k, v] : p) {
      Str(k);
      Str(v);
    }
  }

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

class ByteWriter : public Encodings<ByteWriter> {
 public:
  void Reserve(size_t n) { b_.reserve(n); }
  void U8(uint8_t v) { b_.push_back(v); }
  void Var(uint64_t v) {
    if (v < 0x80) {  // most modes, ids, sizes and counts of a tree
      b_.push_back(uint8_t(v));
      return;
    }
    uint8_t tmp[10];
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) tmp[n++] = uint8_t(v) | 0x80;
    tmp[n++] = uint8_t(v);
    b_.insert(b_.end(), tmp, tmp + n);
  }
  void Raw(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    b_.insert(b_.end(), c, c + n);
  }
  std::vector<uint8_t> bytes() && { return std::move(b_); }

 private:
  std::vector<uint8_t> b_;
};

// ByteWriter's encodings into a buffer the caller sized for the worst
// case (no capacity check per byte: a tree's encoding was 8% of a
// no-change walk's user time through ByteWriter). Writing past the
// buffer is a programmer bug.
class SpanWriter : public Encodings<SpanWriter> {
 public:
  static constexpr size_t kMaxVar = 10;  // bytes of the longest varint
  explicit SpanWriter(uint8_t* p) : p_(p) {}
  void U8(uint8_t v) { *p_++ = v; }
  void Var(uint64_t v) {
    for (; v >= 0x80; v >>= 7) *p_++ = uint8_t(v) | 0x80;
    *p_++ = uint8_t(v);
  }
  void Raw(const void* p, size_t n) {
    std::memcpy(p_, p, n);
    p_ += n;
  }
  uint8_t* at() const { return p_; }

 private:
  uint8_t* p_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> b) : b_(b) {}
  bool U8(uint8_t* v) {
    if (pos_ >= b_.size()) return false;
    *v = b_[pos_++];
    return true;
  }
  bool Var(uint64_t* v) {
    uint64_t x = 0;
    if (b_.size() - pos_ >= 10) {  // room for any varint: no check per byte
      const uint8_t* p = b_.data() + pos_;
      for (int i = 0; i < 10; ++i) {
        x |= uint64_t(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
          pos_ += size_t(i) + 1;
          *v = x;
          return true;
        }
      }
      return false;
    }
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t c;
      if (!U8(&c)) return false;
      x |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) {
        *v = x;
        return true;
      }
    }
    return false;
  }
  bool Signed(int64_t* v) {
    uint64_t x;
    if (!Var(&x)) return false;
    *v = int64_t(x >> 1) ^ -int64_t(x & 1);
    return true;
  }
  bool Raw(void* p, size_t n) {
    if (b_.size() - pos_ < n) return false;
    std::memcpy(p, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Str(std::string* s) {
    uint64_t n;
    if (!Var(&n) || n > b_.size() - pos_) return false;
    s->assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  // What ByteWriter::Pairs wrote; false past the end or for more than
  // `max` pairs.
  bool Pairs(std::vector<std::pair<std::string, std::string>>* p, size_t max) {
    uint64_t n;
    if (!Var(&n) || n > max) return false;
    p->resize(n);
    for (auto& [k, v] : *p) {
      if (!Str(&k) || !Str(&v)) return false;
    }
    return true;
  }
  // The next n bytes, in place (valid while the input is).
  bool Span(size_t n, std::span<const uint8_t>* out) {
    if (b_.size() - pos_ < n) return false;
    *out = b_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return b_.size() - pos_; }
  bool done() const { return pos_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

}  // namespace agentenv::snap
