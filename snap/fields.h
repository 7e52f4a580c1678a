// Tagged fields: the extensible encoding of the node record's provenance
// section and of the operation log's rows (docs/meta-format.md). A message
// is a run of fields, each a varint tag, a varint length and that many
// bytes; the bytes are a varint, a zigzag varint, a 32-byte id, raw text
// or a nested message, as the tag says. A decoder skips tags it does not
// know, so older and newer binaries read each other's messages. Internal
// to snap/ (provenance.cc, oplog.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "snap/varint.h"
#include "store/store.h"

namespace agentenv::snap::fields {

class Writer {
 public:
  void Var(uint64_t tag, uint64_t v) {
    ByteWriter b;
    b.Var(v);
    Bytes(tag, std::move(b).bytes());
  }
  void Signed(uint64_t tag, int64_t v) {
    ByteWriter b;
    b.Signed(v);
    Bytes(tag, std::move(b).bytes());
  }
  void Str(uint64_t tag, std::string_view s) { Raw(tag, s.data(), s.size()); }
  void Id(uint64_t tag, const store::ObjectId& id) { Raw(tag, id.bytes.data(), id.bytes.size()); }
  void Bytes(uint64_t tag, const std::vector<uint8_t>& b) { Raw(tag, b.data(), b.size()); }
  void Raw(uint64_t tag, const void* p, size_t n) {
    w_.Var(tag);
    w_.Var(n);
    w_.Raw(p, n);
  }
  std::vector<uint8_t> bytes() && { return std::move(w_).bytes(); }

 private:
  ByteWriter w_;
};

// One field of a message: false at the end or on a field that runs past it
// (*bad is set then).
inline bool Next(ByteReader& r, uint64_t* tag, std::span<const uint8_t>* body, bool* bad) {
  if (r.done()) return false;
  uint64_t len;
  if (!r.Var(tag) || !r.Var(&len) || len > r.remaining() || !r.Span(size_t(len), body)) {
    *bad = true;
    return false;
  }
  return true;
}

// A field's body read as one value, exactly: false on anything else.
inline bool AsVar(std::span<const uint8_t> b, uint64_t* v) {
  ByteReader r(b);
  return r.Var(v) && r.done();
}
inline bool AsSigned(std::span<const uint8_t> b, int64_t* v) {
  ByteReader r(b);
  return r.Signed(v) && r.done();
}
inline bool AsInt32(std::span<const uint8_t> b, int32_t* v) {
  int64_t x;
  if (!AsSigned(b, &x) || x < INT32_MIN || x > INT32_MAX) return false;
  *v = int32_t(x);
  return true;
}
inline bool AsUint32(std::span<const uint8_t> b, uint32_t* v) {
  uint64_t x;
  if (!AsVar(b, &x) || x > UINT32_MAX) return false;
  *v = uint32_t(x);
  return true;
}
inline bool AsBool(std::span<const uint8_t> b, bool* v) {
  uint64_t x;
  if (!AsVar(b, &x) || x > 1) return false;
  *v = x == 1;
  return true;
}
// Text of at most `max` bytes (longer: false, nothing allocated).
inline bool AsStr(std::span<const uint8_t> b, size_t max, std::string* s) {
  if (b.size() > max) return false;
  s->assign(reinterpret_cast<const char*>(b.data()), b.size());
  return true;
}
inline bool AsId(std::span<const uint8_t> b, store::ObjectId* id) {
  if (b.size() != id->bytes.size()) return false;
  std::copy(b.begin(), b.end(), id->bytes.begin());
  return true;
}

// Which singular tags a message has had (tags below 64): a second one
// makes the message corrupt, so every message has one reading.
class Seen {
 public:
  // False when `tag` was seen already.
  bool First(uint64_t tag) {
    if (tag >= 64) return true;
    uint64_t bit = uint64_t{1} << tag;
    if (mask_ & bit) return false;
    mask_ |= bit;
    return true;
  }

 private:
  uint64_t mask_ = 0;
};

}  // namespace agentenv::snap::fields
