// history_gen: builds long histories fast through the snap/ library (one
// Snapshot of the changed paths per node, as the daemon does), and writes
// the same sequence of tree states into a plain directory for peers.
//
//   history_gen build ROOT NODES [BASE_FILES CHANGED_FILES CHANGE_BYTES]
//   history_gen apply DIR STATE [BASE_FILES CHANGED_FILES CHANGE_BYTES]
//   history_gen day ROOT [NODES]
//   history_gen week ROOT [NODES]
//
// State 0 is BASE_FILES files of 16 KiB (half random, half zeros) under
// base/ plus 256 files in 16 directories under mod/; state i rewrites CHANGED_FILES files of
// mod/ (round robin) with CHANGE_BYTES of fresh random bytes. `build`
// creates a repository at ROOT holding states 0..NODES-1 as a chain of
// nodes, 1 ms apart, 400 days ago (so retention's daily bucket holds them
// all). `apply DIR 0` writes state 0 into DIR; `apply DIR i` turns state
// i-1 in DIR into state i. `day` creates a repository at ROOT holding a
// realistic day of automatic capture (bench/day_gen.h: ~NODES nodes,
// default 2,400, yesterday 08:00-18:30, with package installs, a rollback,
// a tournament and a tag) for `agentenv log --digest --since "2 days ago"`;
// `week` holds seven such days, the last one yesterday (bench/digest_bench.sh).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/day_gen.h"
#include "snap/repo.h"

namespace {

namespace fs = std::filesystem;
constexpr int kModFiles = 256;

struct Shape {
  int base_files = 2000, changed = 4, change_bytes = 4096;
};

std::string Bytes(size_t n, uint64_t seed, bool half_zero) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  size_t random_part = half_zero ? n / 2 : n;
  for (size_t i = 0; i < random_part; ++i) s[i] = char(rng());
  return s;
}

void Put(const fs::path& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
  if (!f) {
    std::fprintf(stderr, "history_gen: %s: write failed\n", p.c_str());
    std::exit(1);
  }
}

// 16 directories of 16 files: a change rewrites three small trees.
std::string ModName(int f) {
  char b[32];
  std::snprintf(b, sizeof b, "mod/d%02d/f%03d", f / 16, f);
  return b;
}

void WriteState0(const fs::path& dir, const Shape& s) {
  for (int i = 0; i < s.base_files; ++i) {
    fs::path d = dir / "base" / ("d" + std::to_string(i / 100));
    if (i % 100 == 0) fs::create_directories(d);
    Put(d / ("f" + std::to_string(i)), Bytes(16384, 1000000 + i, true));
  }
  for (int d = 0; d < kModFiles / 16; ++d) fs::create_directories((dir / ModName(d * 16)).parent_path());
  for (int f = 0; f < kModFiles; ++f) Put(dir / ModName(f), Bytes(size_t(s.change_bytes), 2000000 + f, false));
}

// Writes the files state `i` changes; returns their tree-relative paths.
std::vector<std::string> WriteState(const fs::path& dir, long i, const Shape& s) {
  std::vector<std::string> paths;
  for (int j = 0; j < s.changed; ++j) {
    int f = int((i * s.changed + j) % kModFiles);
    Put(dir / ModName(f), Bytes(size_t(s.change_bytes), uint64_t(i) * 1000 + uint64_t(j), false));
    paths.push_back(ModName(f));
  }
  return paths;
}

Shape ParseShape(int argc, char** argv, int at) {
  Shape s;
  if (argc > at) s.base_files = std::atoi(argv[at]);
  if (argc > at + 1) s.changed = std::atoi(argv[at + 1]);
  if (argc > at + 2) s.change_bytes = std::atoi(argv[at + 2]);
  return s;
}

int Build(const std::string& root, long nodes, const Shape& shape) {
  auto repo = agentenv::snap::Repo::Create(root);
  if (!repo) {
    std::fprintf(stderr, "history_gen: %s\n", repo.error().message.c_str());
    return 1;
  }
  const int64_t ms = 1000000;
  const int64_t start = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count() -
                        int64_t(400) * 24 * 3600 * 1000 * ms;
  fs::path work = (*repo)->work_dir();
  WriteState0(work, shape);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < nodes; ++i) {
    agentenv::snap::SnapOptions o;
    o.time_ns = start + i * ms;
    o.allow_empty = true;
    if (i > 0) o.paths = WriteState(work, i, shape);
    auto r = (*repo)->Snapshot(o);
    if (!r) {
      std::fprintf(stderr, "history_gen: node %ld: %s\n", i, r.error().message.c_str());
      return 1;
    }
    if ((i + 1) % 10000 == 0) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "history_gen: %ld nodes, %.1f s\n", i + 1, s);
    }
  }
  return 0;
}

int Days(const std::string& root, size_t nodes, int days) {
  auto repo = agentenv::snap::Repo::Create(root);
  if (!repo) {
    std::fprintf(stderr, "history_gen: %s\n", repo.error().message.c_str());
    return 1;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  for (int d = days; d >= 1; --d) {
    agentenv::bench::DayGen gen(**repo, now - int64_t(d) * 24 * 3600 * 1000000000, nodes);
    auto day = gen.Run();
    if (!day) {
      std::fprintf(stderr, "history_gen: %s\n", day.error().message.c_str());
      return 1;
    }
    std::printf("%zu nodes; rollback to %s; tournament %s applied \"%s\"\n", day->nodes, day->rollback_target.c_str(),
                day->tournament_id.c_str(), day->tournament_winner.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && (std::string(argv[1]) == "day" || std::string(argv[1]) == "week"))
    return Days(argv[2], argc >= 4 ? size_t(std::atol(argv[3])) : 2400, std::string(argv[1]) == "day" ? 1 : 7);
  if (argc < 4) {
    std::fprintf(stderr, "usage: history_gen build ROOT NODES [BASE_FILES CHANGED_FILES CHANGE_BYTES]\n"
                         "       history_gen apply DIR STATE [BASE_FILES CHANGED_FILES CHANGE_BYTES]\n"
                         "       history_gen day ROOT [NODES]\n");
    return 2;
  }
  std::string verb = argv[1], path = argv[2];
  long n = std::atol(argv[3]);
  Shape shape = ParseShape(argc, argv, 4);
  if (verb == "build") return Build(path, n, shape);
  if (verb == "apply") {
    if (n == 0) WriteState0(path, shape);
    else WriteState(path, n, shape);
    return 0;
  }
  std::fprintf(stderr, "history_gen: unknown verb %s\n", verb.c_str());
  return 2;
}
