// sha256_bound: SHA-256 throughput of N threads over in-memory data
// (OpenSSL EVP, 1 MiB updates), the physical bound of any ingest that has
// to hash every byte once.
//
//   sha256_bound [threads=2] [seconds=2]
//
// Prints a human line and a `key=value` line for bench/store_bench.sh.
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBuf = 64 << 20;   // per thread: larger than the L3 cache
constexpr size_t kUpdate = 1 << 20;

// Hashes `buf` in kUpdate pieces until `stop`; returns bytes hashed.
uint64_t HashUntil(const std::vector<uint8_t>& buf, const std::atomic<bool>& stop) {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  if (!md || EVP_DigestInit_ex(md, EVP_sha256(), nullptr) != 1) std::abort();
  uint64_t done = 0;
  size_t off = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    EVP_DigestUpdate(md, buf.data() + off, kUpdate);
    done += kUpdate;
    off = (off + kUpdate) % buf.size();
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(md, out, &len);
  EVP_MD_CTX_free(md);
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  if (threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "usage: sha256_bound [threads=2] [seconds=2]\n");
    return 2;
  }
  std::vector<std::vector<uint8_t>> bufs(threads, std::vector<uint8_t>(kBuf));
  std::mt19937_64 rng(1);
  for (auto& b : bufs) {
    for (size_t i = 0; i + 8 <= b.size(); i += 8) {
      uint64_t v = rng();
      std::memcpy(b.data() + i, &v, 8);
    }
  }
  std::atomic<bool> stop{false};
  std::vector<uint64_t> done(threads);
  std::vector<std::thread> ts;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < threads; ++i) ts.emplace_back([&, i] { done[i] = HashUntil(bufs[i], stop); });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t total = 0;
  for (uint64_t d : done) total += d;
  double mbps = double(total) / 1e6 / secs;
  std::printf("sha256_bound: %d threads, %.0f MB/s total, %.0f MB/s per thread\n", threads, mbps,
              mbps / threads);
  std::printf("threads=%d sha256_mbps=%.1f\n", threads, mbps);
  return 0;
}
