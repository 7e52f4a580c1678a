// history_gen: builds long histories fast through the snap/ library (one
// Snapshot of the changed paths per node, as the daemon does), and writes
// the same sequence of tree states into a plain directory for peers.
//
//   history_gen build ROOT NODES [BASE_FILES CHANGED_FILES CHANGE_BYTES]
//   history_gen apply DIR STATE [BASE_FILES CHANGED_FILES CHANGE_BYTES]
//   history_gen day ROOT [NODES]
//   history_gen week ROOT [NODES]
//   history_gen bulk ROOT NODES [DAYS]
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
// `bulk` creates a repository at ROOT holding NODES nodes spread evenly
// over the DAYS (default 30) days before now, as a capture every few
// seconds makes them: node 1 a snapshot of state 0 with 100 base files,
// each later one state i (one file of mod/ rewritten, 64 fresh bytes), its
// objects (chunk, two subtrees, root tree, node) written straight to the
// store and its record, refs and reference counts to the metadata index,
// 4096 nodes per store batch and metadata transaction. The same history a
// snapshot per node makes (every count right: fsck finds nothing), at
// about 8k nodes a second on tmpfs instead of 400.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/day_gen.h"
#include "snap/node.h"
#include "snap/refcount.h"
#include "snap/repo.h"
#include "snap/tree.h"

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

int Fail(const char* what, const agentenv::Error& e) {
  std::fprintf(stderr, "history_gen: %s: %s\n", what, e.message.c_str());
  return 1;
}

// The entry named `name` of a sorted tree.
agentenv::snap::Entry* Find(agentenv::snap::Tree& t, const std::string& name) {
  for (auto& e : t)
    if (e.name == name) return &e;
  return nullptr;
}

int Bulk(const std::string& root, long nodes, double days) {
  using namespace agentenv;
  auto made = snap::Repo::Create(root);
  if (!made) return Fail(root.c_str(), made.error());
  snap::Repo& repo = **made;
  const Shape shape{100, 1, 64};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t span = int64_t(days * 24 * 3600 * 1e9), start = now - span;
  const int64_t step = std::max<int64_t>(1, span / std::max<long>(1, nodes));
  WriteState0(repo.work_dir(), shape);
  snap::SnapOptions first;
  first.time_ns = start;
  first.allow_empty = true;
  auto snapped = repo.Snapshot(first);
  if (!snapped) return Fail("node 1", snapped.error());
  if (!snapped->node) return Fail("node 1", Error{"made no node"});
  if (auto r = repo.CountDeferred(); !r) return Fail("counting", r.error());
  // The trees of the head: root -> mod -> dNN, rewritten per node.
  store::ObjectId head = *snapped->node;
  auto head_node = snap::LoadNode(repo.store(), head);
  if (!head_node) return Fail("node 1", head_node.error());
  auto root_tree = snap::LoadTree(repo.store(), head_node->tree);
  if (!root_tree) return Fail("root tree", root_tree.error());
  snap::Entry* mod_entry = Find(*root_tree, "mod");
  auto mod_tree = snap::LoadTree(repo.store(), mod_entry->id);
  if (!mod_tree) return Fail("mod tree", mod_tree.error());
  std::vector<snap::Tree> dirs;
  for (const auto& e : *mod_tree) {
    auto d = snap::LoadTree(repo.store(), e.id);
    if (!d) return Fail("mod dir", d.error());
    dirs.push_back(std::move(*d));
  }
  snap::Node n = *head_node;
  constexpr long kChunk = 4096;
  auto t0 = std::chrono::steady_clock::now();
  for (long done = 1; done < nodes;) {
    const long count = std::min(kChunk, nodes - done);
    auto batch = repo.store().BeginBatch();
    if (!batch) return Fail("store", batch.error());
    std::vector<std::pair<store::ObjectId, snap::Node>> made_here;
    for (long i = done; i < done + count; ++i) {
      const int f = int(i % kModFiles), d = f / 16;
      const std::string data = "state " + std::to_string(i) + " of file " + std::to_string(f) + std::string(40, '.');
      auto chunk = (*batch)->Put(store::ObjectType::kChunk, {reinterpret_cast<const uint8_t*>(data.data()), data.size()});
      if (!chunk) return Fail("chunk", chunk.error());
      snap::Entry* file = Find(dirs[size_t(d)], ModName(f).substr(ModName(f).rfind('/') + 1));
      file->id = *chunk;
      file->size = data.size();
      auto put_tree = [&](const snap::Tree& t) { return (*batch)->Put(store::ObjectType::kTree, snap::EncodeTree(t)); };
      auto dir_id = put_tree(dirs[size_t(d)]);
      if (!dir_id) return Fail("tree", dir_id.error());
      (*mod_tree)[size_t(d)].id = *dir_id;
      auto mod_id = put_tree(*mod_tree);
      if (!mod_id) return Fail("tree", mod_id.error());
      mod_entry->id = *mod_id;
      auto root_id = put_tree(*root_tree);
      if (!root_id) return Fail("tree", root_id.error());
      n.tree = *root_id;
      n.parent = head;
      n.time_ns = start + i * step;
      n.message.clear();
      n.label = "capture: 1 file changed (" + ModName(f) + ")";
      n.changes = {};
      n.changes.modified = 1;
      n.changes.sample = {{'M', ModName(f), false}};
      auto id = (*batch)->Put(store::ObjectType::kNode, snap::EncodeNode(n));
      if (!id) return Fail("node", id.error());
      made_here.emplace_back(*id, n);
      head = *id;
    }
    if (auto r = (*batch)->Commit(); !r) return Fail("store commit", r.error());
    auto txn = repo.meta().Begin();
    if (!txn) return Fail("metadata", txn.error());
    snap::RefCounter refs(repo.store(), **txn, true);
    for (const auto& [id, node] : made_here) {
      snap::NodeRecord rec;
      rec.id = id;
      auto seq = (*txn)->NextSeq();
      if (!seq) return Fail("metadata", seq.error());
      rec.seq = *seq;
      rec.time_ns = node.time_ns;
      rec.parent = node.parent;
      rec.tree = node.tree;
      rec.changes = 1;
      rec.title = node.label;
      rec.provenance.emplace().kind = snap::ProvenanceKind::kCapture;  // as the daemon's watcher records
      for (auto r : {(*txn)->PutNode(rec), refs.AddNode(id, node.tree), (*txn)->AddChild(*node.parent, id),
                     (*txn)->DeleteRef("tip/" + node.parent->Hex()), (*txn)->SetRef("tip/" + id.Hex(), id)})
        if (!r) return Fail("metadata", r.error());
    }
    for (auto r : {(*txn)->SetRef("HEAD", head), (*txn)->SetCounted(), (*txn)->Commit()})
      if (!r) return Fail("metadata", r.error());
    done += count;
    if (done % (kChunk * 25) < kChunk || done == nodes) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "history_gen: %ld nodes, %.1f s\n", done, secs);
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
  if (argc >= 4 && std::string(argv[1]) == "bulk") return Bulk(argv[2], std::atol(argv[3]), argc >= 5 ? std::atof(argv[4]) : 30);
  if (argc < 4) {
    std::fprintf(stderr, "usage: history_gen build ROOT NODES [BASE_FILES CHANGED_FILES CHANGE_BYTES]\n"
                         "       history_gen apply DIR STATE [BASE_FILES CHANGED_FILES CHANGE_BYTES]\n"
                         "       history_gen day ROOT [NODES]\n"
                         "       history_gen week ROOT [NODES]\n"
                         "       history_gen bulk ROOT NODES [DAYS]\n");
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
