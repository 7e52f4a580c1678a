#include "store/codec.h"

#include <zstd.h>

#include <memory>

#include "common/sha256.h"

namespace agentenv::store {
namespace {

struct CctxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

ZSTD_CCtx* ThreadCctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CctxFree> c(ZSTD_createCCtx());
  return c.get();
}
ZSTD_DCtx* ThreadDctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DctxFree> c(ZSTD_createDCtx());
  return c.get();
}

// Compression must save at least 1/32 of the input to be worth a
// decompression on every read (and to give up the reflink path).
bool Worthwhile(size_t in, size_t out) { return out + in / 32 < in; }

constexpr size_t kSample = 16 * 1024;

}  // namespace

Encoded Encode(std::span<const uint8_t> data, int level) {
  Encoded e;
  if (data.size() < 64) return e;
  ZSTD_CCtx* cctx = ThreadCctx();
  // One scratch buffer per thread, grown once: a fresh compressBound-sized
  // vector per object would be zero-filled on every call.
  thread_local std::vector<uint8_t> scratch;
  size_t bound = ZSTD_compressBound(data.size());
  if (scratch.size() < bound) scratch.resize(bound);
  // Cheap test first: a middle sample of a large input that does not
  // compress means media or already-compressed data; skip the full pass.
  if (data.size() >= 4 * kSample) {
    auto sample = data.subspan(data.size() / 2 - kSample / 2, kSample);
    size_t r = ZSTD_compressCCtx(cctx, scratch.data(), scratch.size(), sample.data(), sample.size(), level);
    if (ZSTD_isError(r) || !Worthwhile(kSample, r)) return e;
  }
  size_t r = ZSTD_compressCCtx(cctx, scratch.data(), scratch.size(), data.data(), data.size(), level);
  if (ZSTD_isError(r) || !Worthwhile(data.size(), r)) return e;
  e.codec = Codec::kZstd;
  e.bytes.assign(scratch.begin(), scratch.begin() + r);
  return e;
}

Result<std::vector<uint8_t>> Decode(Codec codec, std::span<const uint8_t> payload, uint64_t size) {
  if (codec == Codec::kRaw) {
    if (payload.size() != size) return Fail(ErrorCode::kCorrupt, "raw payload has the wrong size");
    return std::vector<uint8_t>(payload.begin(), payload.end());
  }
  if (codec != Codec::kZstd) return Fail(ErrorCode::kCorrupt, "unknown codec");
  std::vector<uint8_t> out(size);
  size_t r = ZSTD_decompressDCtx(ThreadDctx(), out.data(), out.size(), payload.data(), payload.size());
  if (ZSTD_isError(r)) {
    return Fail(ErrorCode::kCorrupt, std::string("zstd: ") + ZSTD_getErrorName(r));
  }
  if (r != size) return Fail(ErrorCode::kCorrupt, "zstd frame decodes to the wrong size");
  return out;
}


Result<ObjectId> HashDecoded(Codec codec, std::span<const uint8_t> payload, uint64_t size) {
  if (codec == Codec::kRaw) {
    if (payload.size() != size) return Fail(ErrorCode::kCorrupt, "raw payload has the wrong size");
    return ObjectId::Of(payload);
  }
  if (codec != Codec::kZstd) return Fail(ErrorCode::kCorrupt, "unknown codec");
  // Objects up to a chunk's size (nearly all) decode in one call into a
  // reused buffer: the streaming decoder below copies every byte once more
  // out of its window and costs a third more CPU.
  constexpr uint64_t kOneShot = 1 << 20;
  if (size <= kOneShot) {
    thread_local std::vector<uint8_t> out(kOneShot);
    size_t r = ZSTD_decompressDCtx(ThreadDctx(), out.data(), size, payload.data(), payload.size());
    if (ZSTD_isError(r)) return Fail(ErrorCode::kCorrupt, std::string("zstd: ") + ZSTD_getErrorName(r));
    if (r != size) return Fail(ErrorCode::kCorrupt, "zstd frame decodes to the wrong size");
    return ObjectId::Of(std::span<const uint8_t>(out.data(), size));
  }
  thread_local std::vector<uint8_t> buf(128 * 1024);
  ZSTD_DCtx* dctx = ThreadDctx();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  Sha256 md;
  ZSTD_inBuffer in{payload.data(), payload.size(), 0};
  uint64_t produced = 0;
  size_t r = 1;
  while (r != 0) {
    ZSTD_outBuffer out{buf.data(), buf.size(), 0};
    r = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(r)) return Fail(ErrorCode::kCorrupt, std::string("zstd: ") + ZSTD_getErrorName(r));
    produced += out.pos;
    if (produced > size) return Fail(ErrorCode::kCorrupt, "zstd frame decodes to the wrong size");
    md.Update(buf.data(), out.pos);
    if (r != 0 && in.pos == in.size && out.pos < out.size) {
      return Fail(ErrorCode::kCorrupt, "zstd: truncated frame");
    }
  }
  if (produced != size || in.pos != in.size) {
    return Fail(ErrorCode::kCorrupt, "zstd frame decodes to the wrong size");
  }
  ObjectId id;
  id.bytes = md.Final();
  return id;
}

}  // namespace agentenv::store
