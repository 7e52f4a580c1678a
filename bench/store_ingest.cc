// store_ingest: ingest a directory tree into a fresh store and report speed.
//
//   store_ingest <tree> <new_store_dir> [--threads N]
//
// N threads (default: all cores) walk the tree together: each takes a
// directory from a shared queue, queues its subdirectories and PutFile()s
// its regular files into one Batch (thread-safe). One Commit at the end is
// inside the timing, like a snapshot would be. Symlinks and special files
// are skipped (a snapshot stores them as tree metadata, not objects).
// Prints a human line and a `key=value` line for bench/store_bench.sh.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "store/store.h"

namespace agentenv::store {
namespace {

// A queue of directories to scan. Pop returns false once every directory
// has been scanned (queue empty and no scanner busy) or an error stopped the
// walk; each successful Pop is followed by one Done.
class DirQueue {
 public:
  void Push(std::string dir) {
    std::lock_guard lock(mu_);
    dirs_.push_back(std::move(dir));
    cv_.notify_one();
  }
  bool Pop(std::string* dir) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stop_ || !dirs_.empty() || busy_ == 0; });
    if (stop_ || dirs_.empty()) return false;
    *dir = std::move(dirs_.front());
    dirs_.pop_front();
    busy_++;
    return true;
  }
  // The caller finished scanning the directory it popped.
  void Done() {
    std::lock_guard lock(mu_);
    busy_--;
    cv_.notify_all();
  }
  void Stop() {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> dirs_;
  int busy_ = 0;
  bool stop_ = false;
};

struct Totals {
  std::atomic<uint64_t> files{0};
  std::atomic<uint64_t> bytes{0};
  std::mutex mu;
  std::string error;  // first error
};

// Scans one directory: subdirectories go to the queue, files to the batch.
Result<void> ScanDir(const std::string& dir, DirQueue& q, Batch& batch, Totals& t) {
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd) return FailErrno(dir, errno);
  UniqueFd listing(::dup(dfd.get()));  // fdopendir takes it over; dfd stays for openat
  if (!listing) return FailErrno(dir, errno);
  DIR* d = ::fdopendir(listing.get());
  if (!d) return FailErrno(dir, errno);
  listing.release();
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st;
      if (::fstatat(dfd.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return FailErrno(dir + "/" + e->d_name, errno);
      }
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
    }
    if (type == DT_DIR) {
      q.Push(dir + "/" + e->d_name);
    } else if (type == DT_REG) {
      std::string path = dir + "/" + e->d_name;
      // O_NOATIME keeps the benchmark from writing inodes; it is refused
      // (EPERM) for files of other users unless we are root.
      UniqueFd fd(::openat(dfd.get(), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME));
      if (!fd && errno == EPERM) fd.reset(::openat(dfd.get(), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return FailErrno(path, errno);
      AE_ASSIGN(FileRef f, batch.PutFile(fd.get(), path));
      t.files++;
      t.bytes += f.size;
    }
  }
  return {};
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) n += uint64_t(st.st_blocks) * 512;
  }
  return n;
}

int Run(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--threads")) {
    std::fprintf(stderr, "usage: store_ingest <tree> <new_store_dir> [--threads N]\n");
    return 2;
  }
  std::string tree = argv[1], dir = argv[2];
  unsigned threads = argc == 5 ? unsigned(std::stoul(argv[4])) : std::thread::hardware_concurrency();
  threads = std::max(1u, threads);

  struct stat tree_st;
  if (::stat(tree.c_str(), &tree_st) != 0 || !S_ISDIR(tree_st.st_mode)) {
    std::fprintf(stderr, "store_ingest: %s: not a directory\n", tree.c_str());
    return 1;
  }
  auto start = std::chrono::steady_clock::now();
  auto store = Store::Open(dir, Store::Mode::kCreate);
  if (!store) {
    std::fprintf(stderr, "store_ingest: %s\n", store.error().message.c_str());
    return 1;
  }
  auto batch = (*store)->BeginBatch();
  if (!batch) {
    std::fprintf(stderr, "store_ingest: %s\n", batch.error().message.c_str());
    return 1;
  }
  DirQueue q;
  Totals t;
  q.Push(tree);
  std::vector<std::thread> workers;
  for (unsigned i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      std::string d;
      while (q.Pop(&d)) {
        Result<void> r = ScanDir(d, q, **batch, t);
        if (!r) {
          std::lock_guard lock(t.mu);
          if (t.error.empty()) t.error = r.error().message;
          q.Stop();
        }
        q.Done();
      }
    });
  }
  for (auto& w : workers) w.join();
  if (!t.error.empty()) {
    std::fprintf(stderr, "store_ingest: %s\n", t.error.c_str());
    return 1;
  }
  auto commit_start = std::chrono::steady_clock::now();
  if (auto r = (*batch)->Commit(); !r) {
    std::fprintf(stderr, "store_ingest: %s\n", r.error().message.c_str());
    return 1;
  }
  auto end = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(end - start).count();
  double commit_secs = std::chrono::duration<double>(end - commit_start).count();

  auto stats = (*store)->Stats();
  if (!stats) {
    std::fprintf(stderr, "store_ingest: %s\n", stats.error().message.c_str());
    return 1;
  }
  uint64_t disk = DirBytes(dir);  // packs + LMDB index, as allocated on disk
  double mb = double(t.bytes) / 1e6;
  std::printf("store_ingest: %llu files, %.1f MB in %.3f s: %.1f MB/s, %.0f files/s, "
              "%llu objects (%.0f objects/s), stored %.1f MB payload, %.1f MB packs, %.1f MB on disk; commit (fsync) %.3f s\n",
              (unsigned long long)t.files.load(), mb, secs, mb / secs, double(t.files) / secs,
              (unsigned long long)stats->objects, double(stats->objects) / secs,
              double(stats->stored_bytes) / 1e6, double(stats->pack_bytes) / 1e6, double(disk) / 1e6, commit_secs);
  std::printf("files=%llu bytes=%llu seconds=%.4f objects=%llu stored_bytes=%llu pack_bytes=%llu "
              "disk_bytes=%llu commit_seconds=%.4f threads=%u\n",
              (unsigned long long)t.files.load(), (unsigned long long)t.bytes.load(), secs,
              (unsigned long long)stats->objects, (unsigned long long)stats->stored_bytes,
              (unsigned long long)stats->pack_bytes, (unsigned long long)disk, commit_secs, threads);
  return 0;
}

}  // namespace
}  // namespace agentenv::store

int main(int argc, char** argv) { return agentenv::store::Run(argc, argv); }
