// chunk_params: measurements behind the store's chunker, small-file and
// zstd parameters (docs/store.md), using store/fastcdc.h and store/codec.h
// directly so no store has to be created per candidate.
//
//   chunk_params <rootfs>
//
// All timings are this thread's CPU time for work on data already in memory
// (file reads are not timed), so they are per-core rates, robust to a busy host.
//  1. Chunker sets (min, avg, max) = (avg/4, avg, 4*avg), avg 8..256 KiB:
//     chunking MB/s; bytes of new chunks after appending 1 MB to a 32 MB
//     log; after overwriting / inserting 1 byte in the middle of a 50 MB
//     binary (the rootfs's largest ELF files); objects and stored bytes
//     for the whole rootfs at zstd 1.
//  2. Small-file threshold 64 KiB..1 MiB: objects, stored bytes, CPU time
//     (chunk + SHA-256) for the rootfs, and the re-store cost of editing a
//     file just under the threshold.
//  3. zstd levels 1..3 (and -1 for reference): stored bytes and MB/s.
//  4. Ingest CPU by component with the default parameters, replaying what
//     Batch::PutFile and Encode do per file and object (store/batch.cc,
//     store/codec.cc), to show where an ingest's CPU goes.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <zstd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "store/codec.h"
#include "store/fastcdc.h"
#include "store/store.h"

namespace agentenv::store {
namespace {

using Bytes = std::vector<uint8_t>;

// This thread's CPU time: the host is shared, so wall time would measure the
// neighbours; CPU time of single-threaded work is the per-core cost.
struct Clock {
  static double now() {
    timespec ts;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }
};
double Since(double t) { return Clock::now() - t; }

struct Corpus {
  std::vector<std::string> paths;  // regular files of the rootfs
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
};

Corpus ListFiles(const std::string& root) {
  Corpus c;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    c.paths.push_back(e.path());
    c.sizes.push_back(uint64_t(st.st_size));
    c.total += uint64_t(st.st_size);
  }
  return c;
}

Bytes ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// Cut points of the whole buffer.
std::vector<std::span<const uint8_t>> Chunks(const FastCdc& cdc, std::span<const uint8_t> d) {
  std::vector<std::span<const uint8_t>> out;
  size_t pos = 0;
  while (pos < d.size()) {
    size_t cut = cdc.NextCut(d.data() + pos, d.size() - pos, true);
    out.push_back(d.subspan(pos, cut));
    pos += cut;
  }
  return out;
}

// Bytes of chunks of `after` whose ids are not among the chunks of `before`:
// what a store holding `before` adds for `after`.
uint64_t NewBytes(const FastCdc& cdc, std::span<const uint8_t> before, std::span<const uint8_t> after) {
  std::set<ObjectId> have;
  for (auto c : Chunks(cdc, before)) have.insert(ObjectId::Of(c));
  uint64_t n = 0;
  for (auto c : Chunks(cdc, after))
    if (have.insert(ObjectId::Of(c)).second) n += c.size();
  return n;
}

// A deterministic service log: timestamps, ids and paths vary per line.
Bytes MakeLog(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static const char* kPaths[] = {"/api/v1/items", "/api/v1/users/me", "/healthz", "/static/app.js",
                                 "/api/v2/search?q=rootfs", "/login"};
  static const char* kLevels[] = {"INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR"};
  Bytes out;
  out.reserve(size + 256);
  char line[256];
  uint64_t t = 1700000000000;
  while (out.size() < size) {
    t += rng() % 5000;
    int n = std::snprintf(line, sizeof line,
                          "%llu.%03llu %s svc[%llu]: req=%016llx %s status=%d bytes=%llu dur=%llums\n",
                          (unsigned long long)(t / 1000), (unsigned long long)(t % 1000),
                          kLevels[rng() % 6], (unsigned long long)(1000 + rng() % 50),
                          (unsigned long long)rng(), kPaths[rng() % 6], rng() % 10 ? 200 : 500,
                          (unsigned long long)(rng() % 100000), (unsigned long long)(rng() % 900));
    out.insert(out.end(), line, line + n);
  }
  out.resize(size);
  return out;
}

// The largest ELF files of the rootfs concatenated up to `size` bytes: real
// binaries (the largest file overall is apt's text package list).
Bytes MakeBinary(const Corpus& c, size_t size) {
  std::vector<size_t> order(c.paths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c.sizes[a] > c.sizes[b]; });
  Bytes out;
  for (size_t i = 0; out.size() < size && i < order.size(); ++i) {
    Bytes f = ReadAll(c.paths[order[i]]);
    if (f.size() < 4 || std::memcmp(f.data(), "\x7f" "ELF", 4) != 0) continue;
    out.insert(out.end(), f.begin(), f.end());
  }
  out.resize(std::min(out.size(), size));
  return out;
}

struct PassResult {
  uint64_t objects = 0;       // unique objects, manifests included
  uint64_t unique_bytes = 0;  // logical bytes of unique objects
  uint64_t stored_bytes = 0;  // their payload bytes after Encode
  double cpu_secs = 0;        // chunking + SHA-256
  double zstd_secs = 0;       // Encode of unique objects
};

// What a store with these parameters would hold after ingesting the corpus
// (manifests counted as objects of 40 bytes per chunk).
PassResult IngestPass(const Corpus& c, const ChunkerParams& p, uint64_t small_max, int level,
                      bool compress) {
  FastCdc cdc(p);
  PassResult r;
  std::set<ObjectId> seen;
  auto add = [&](std::span<const uint8_t> obj, const ObjectId& id) {
    if (!seen.insert(id).second) return;
    r.objects++;
    r.unique_bytes += obj.size();
    if (!compress) return;
    auto t = Clock::now();
    Encoded e = Encode(obj, level);
    r.zstd_secs += Since(t);
    r.stored_bytes += e.codec == Codec::kRaw ? obj.size() : e.bytes.size();
  };
  for (const auto& path : c.paths) {
    Bytes f = ReadAll(path);
    auto t = Clock::now();
    if (f.size() <= small_max) {
      ObjectId id = ObjectId::Of(f);
      r.cpu_secs += Since(t);
      add(f, id);
      continue;
    }
    auto chunks = Chunks(cdc, f);
    std::vector<ObjectId> ids;
    for (auto ch : chunks) ids.push_back(ObjectId::Of(ch));
    r.cpu_secs += Since(t);
    for (size_t i = 0; i < chunks.size(); ++i) add(chunks[i], ids[i]);
    r.objects++;  // the manifest
    r.unique_bytes += 24 + 40 * chunks.size();
    r.stored_bytes += 24 + 40 * chunks.size();
  }
  return r;
}

double Mb(uint64_t b) { return double(b) / 1e6; }

void ChunkerSets(const Corpus& c, const Bytes& bin) {
  Bytes log1 = MakeLog(32 << 20, 7);
  Bytes log2 = log1;
  Bytes tail = MakeLog(1 << 20, 8);
  log2.insert(log2.end(), tail.begin(), tail.end());
  Bytes bin_over = bin;
  bin_over[bin.size() / 2] ^= 0x5a;
  Bytes bin_ins = bin;
  bin_ins.insert(bin_ins.begin() + bin.size() / 2, uint8_t{0x5a});

  std::printf("\n## Chunker (min/avg/max KiB); rootfs at small_file_max 256 KiB, zstd 1\n");
  std::printf("| min/avg/max | chunk MB/s | chunks in bin | log +1 MB: new KB | bin 1B overwrite: new KB "
              "| bin 1B insert: new KB | rootfs objects | rootfs stored MB | zstd MB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (uint32_t avg : {8u << 10, 16u << 10, 32u << 10, 64u << 10, 128u << 10, 256u << 10}) {
    ChunkerParams p{avg / 4, avg, avg * 4};
    FastCdc cdc(p);
    auto t = Clock::now();
    size_t n = 0;
    for (int rep = 0; rep < 3; ++rep) n = Chunks(cdc, bin).size();
    double mbps = 3 * Mb(bin.size()) / Since(t);
    PassResult r = IngestPass(c, p, 256 << 10, 1, true);
    std::printf("| %u/%u/%u | %.0f | %zu | %.0f | %.0f | %.0f | %llu | %.1f | %.0f |\n", p.min_size >> 10,
                avg >> 10, p.max_size >> 10, mbps, n, NewBytes(cdc, log1, log2) / 1e3,
                NewBytes(cdc, bin, bin_over) / 1e3, NewBytes(cdc, bin, bin_ins) / 1e3,
                (unsigned long long)r.objects, Mb(r.stored_bytes), Mb(r.unique_bytes) / r.zstd_secs);
    std::fflush(stdout);
  }
}

void SmallFileThresholds(const Corpus& c) {
  std::printf("\n## Small-file threshold (chunker 16/64/256 KiB, zstd 1)\n");
  std::printf("| threshold KiB | files <= it | bytes in them MB | rootfs objects | rootfs stored MB "
              "| chunk+SHA MB/s | 1B edit of a file just under it: new KB (= threshold) |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  ChunkerParams p;
  for (uint64_t th : {uint64_t{64} << 10, uint64_t{128} << 10, uint64_t{256} << 10, uint64_t{512} << 10,
                      uint64_t{1} << 20}) {
    uint64_t files = 0, bytes = 0;
    for (uint64_t s : c.sizes)
      if (s <= th) files++, bytes += s;
    PassResult r = IngestPass(c, p, th, 1, true);
    std::printf("| %llu | %llu | %.1f | %llu | %.1f | %.0f | %.0f |\n", (unsigned long long)(th >> 10),
                (unsigned long long)files, Mb(bytes), (unsigned long long)r.objects, Mb(r.stored_bytes),
                Mb(c.total) / r.cpu_secs, th / 1e3);
    std::fflush(stdout);
  }
}

void ZstdLevels(const Corpus& c) {
  std::printf("\n## zstd level (chunker 16/64/256 KiB, small_file_max 256 KiB)\n");
  std::printf("| level | stored MB | ratio | compress MB/s (1 core) |\n|---|---|---|---|\n");
  ChunkerParams p;
  for (int level : {-1, 1, 2, 3}) {
    PassResult r = IngestPass(c, p, 256 << 10, level, true);
    std::printf("| %d | %.1f | %.2f | %.0f |\n", level, Mb(r.stored_bytes),
                double(r.unique_bytes) / double(r.stored_bytes), Mb(r.unique_bytes) / r.zstd_secs);
    std::fflush(stdout);
  }
}

void Components(const Corpus& c) {
  std::printf("\n## Ingest CPU by component (16/64/256 KiB, 256 KiB threshold, zstd 1)\n");
  ChunkerParams p;
  FastCdc cdc(p);
  const uint64_t small_max = 256 << 10;
  double buf_s = 0, sample_s = 0, outzero_s = 0, encode_s = 0, sha_s = 0, chunk_s = 0;
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  for (const auto& path : c.paths) {
    Bytes f = ReadAll(path);
    double t = Clock::now();
    {  // PutFile's per-file read buffer, value-initialized
      Bytes buf(std::max<size_t>(small_max + 1, 4 * size_t{p.max_size}));
      asm volatile("" : : "r"(buf.data()) : "memory");
    }
    buf_s += Since(t);
    t = Clock::now();
    std::vector<std::span<const uint8_t>> objs;
    if (f.size() <= small_max) {
      objs.push_back(f);
    } else {
      objs = Chunks(cdc, f);
    }
    chunk_s += Since(t);
    for (auto o : objs) {
      t = Clock::now();
      (void)ObjectId::Of(o);
      sha_s += Since(t);
      t = Clock::now();
      Encoded e = Encode(o, 1);
      encode_s += Since(t);
      if (o.size() >= 64 * 1024) {  // Encode's 16 KiB sample pass, alone
        t = Clock::now();
        Bytes tmp(ZSTD_compressBound(16 * 1024));
        ZSTD_compressCCtx(cctx, tmp.data(), tmp.size(), o.data() + o.size() / 2 - 8 * 1024, 16 * 1024, 1);
        sample_s += Since(t);
      }
      t = Clock::now();
      {  // Encode's value-initialized output vector, alone
        Bytes out(ZSTD_compressBound(o.size()));
        asm volatile("" : : "r"(out.data()) : "memory");
      }
      outzero_s += Since(t);
    }
  }
  ZSTD_freeCCtx(cctx);
  std::printf("| component | CPU s |\n|---|---|\n");
  std::printf("| Encode (zstd 1) total | %.3f |\n| - of which the 16 KiB sample pass | %.3f |\n"
              "| - of which zero-filling the output vector | %.3f |\n| SHA-256 of every object | %.3f |\n"
              "| FastCDC chunking | %.3f |\n| zero-filling PutFile's read buffer | %.3f |\n",
              encode_s, sample_s, outzero_s, sha_s, chunk_s, buf_s);
}

int Run(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: chunk_params <rootfs>\n");
    return 2;
  }
  Corpus c = ListFiles(argv[1]);
  std::printf("# chunk_params: %s: %zu files, %.1f MB\n", argv[1], c.paths.size(), Mb(c.total));
  std::printf("size distribution: ");
  for (uint64_t lim : {uint64_t{4} << 10, uint64_t{64} << 10, uint64_t{256} << 10, uint64_t{1} << 20}) {
    uint64_t n = 0, b = 0;
    for (uint64_t s : c.sizes)
      if (s <= lim) n++, b += s;
    std::printf("<=%lluK: %llu files %.1f MB; ", (unsigned long long)(lim >> 10), (unsigned long long)n,
                Mb(b));
  }
  std::printf("\n");
  Bytes bin = MakeBinary(c, 50 << 20);
  std::printf("edit test binary: %.1f MB of ELF files\n", Mb(bin.size()));
  ChunkerSets(c, bin);
  SmallFileThresholds(c);
  ZstdLevels(c);
  Components(c);
  return 0;
}

}  // namespace
}  // namespace agentenv::store

int main(int argc, char** argv) { return agentenv::store::Run(argc, argv); }
