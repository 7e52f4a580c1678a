// snap/clone_sources: a directory a scan has just read (init --from) serves
// file content only while nothing on a file's path changed since the scan.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <catch2/catch.hpp>

#include "snap/clone_sources.h"
#include "snap/fsops.h"
#include "snap/repo.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

using snap::CloneSources;

// A file entry as a scan of `path` would make it (size and mtime only:
// what the scanned source compares).
snap::Entry EntryOf(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  snap::Entry e;
  e.kind = snap::Kind::kFile;
  e.size = uint64_t(st.st_size);
  e.meta.mtime_ns = snap::ToNs(st.st_mtim);
  return e;
}

// Copies `rel` from the source into a new file; returns its content, or
// nullopt when the source refused (the new file must then be empty).
std::optional<std::string> CopyFrom(const CloneSources& src, const std::string& rel, const snap::Entry& e,
                                    const std::string& out) {
  UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd);
  bool ok = src.CopyTo(rel, e, fd.get());
  struct stat st;
  REQUIRE(::fstat(fd.get(), &st) == 0);
  if (!ok) {
    CHECK(st.st_size == 0);
    return std::nullopt;
  }
  return ReadFileAt(out);
}

TEST_CASE("a scanned directory serves files unchanged since the scan, and no other", "[snap]") {
  TempDir t;
  const std::string d = t.str() + "/src";
  REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  REQUIRE(::mkdir((d + "/a").c_str(), 0755) == 0);
  REQUIRE(::mkdir((d + "/b").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(d + "/a/x", "x content\n"));
  REQUIRE(WriteFileAt(d + "/a/y", "y content\n"));
  REQUIRE(WriteFileAt(d + "/b/x", "other x\n"));
  REQUIRE(WriteFileAt(d + "/top", std::string(300000, 't')));
  std::map<std::string, snap::Entry> scanned;
  for (const char* rel : {"a/x", "a/y", "b/x", "top"}) scanned[rel] = EntryOf(d + "/" + rel);
  // A scan that starts once they are settled (older than its start by the
  // racy window).
  const int64_t scan_start = SettledScanStart(NextClockTick());
  auto store = store::Store::Open(t.str() + "/store", store::Store::Mode::kCreate);
  REQUIRE(store);

  SECTION("unchanged files are copied") {
    auto src = CloneSources::OpenScanned(**store, d, scan_start);
    CHECK(CopyFrom(*src, "a/x", scanned["a/x"], t.str() + "/o1") == "x content\n");
    CHECK(CopyFrom(*src, "top", scanned["top"], t.str() + "/o2") == std::string(300000, 't'));
    // An entry the file does not match (another size or mtime) is refused.
    snap::Entry other = scanned["a/y"];
    other.meta.mtime_ns += 1;
    CHECK(!CopyFrom(*src, "a/y", other, t.str() + "/o3"));
    CHECK(!CopyFrom(*src, "missing", scanned["a/x"], t.str() + "/o4"));
  }
  SECTION("a file changed after the scan began is refused, even with its old size and mtime") {
    auto src = CloneSources::OpenScanned(**store, d, scan_start);
    REQUIRE(WriteFileAt(d + "/a/y", "Y CONTENT\n"));
    struct stat st;
    REQUIRE(::stat((d + "/a/y").c_str(), &st) == 0);
    const auto& was = scanned["a/y"];
    REQUIRE(SetMtime(d + "/a/y", was.meta.mtime_ns / 1000000000, was.meta.mtime_ns % 1000000000));
    CHECK(!CopyFrom(*src, "a/y", was, t.str() + "/o5"));
    CHECK(CopyFrom(*src, "a/x", scanned["a/x"], t.str() + "/o6") == "x content\n");
  }
  SECTION("directories swapped after the scan serve nothing below them") {
    auto src = CloneSources::OpenScanned(**store, d, scan_start);
    REQUIRE(std::rename((d + "/a").c_str(), (d + "/tmp").c_str()) == 0);
    REQUIRE(std::rename((d + "/b").c_str(), (d + "/a").c_str()) == 0);
    REQUIRE(std::rename((d + "/tmp").c_str(), (d + "/b").c_str()) == 0);
    // Same sizes and mtimes would not tell: a/x now holds b's file.
    snap::Entry lie = scanned["a/x"];
    struct stat st;
    REQUIRE(::stat((d + "/a/x").c_str(), &st) == 0);
    lie.size = uint64_t(st.st_size);
    lie.meta.mtime_ns = snap::ToNs(st.st_mtim);
    CHECK(!CopyFrom(*src, "a/x", lie, t.str() + "/o7"));
    CHECK(!CopyFrom(*src, "b/y", scanned["a/y"], t.str() + "/o8"));
  }
  SECTION("a source on another filesystem: clones are refused and leave the file empty, copies still work") {
    // /dev/shm (tmpfs) is another filesystem than the test's directory.
    TempDir shm("/dev/shm");
    const std::string o = shm.str() + "/src";
    REQUIRE(::mkdir(o.c_str(), 0755) == 0);
    REQUIRE(WriteFileAt(o + "/p", "p content\n"));
    REQUIRE(WriteFileAt(o + "/q", std::string(200000, 'q')));
    std::map<std::string, snap::Entry> there{{"p", EntryOf(o + "/p")}, {"q", EntryOf(o + "/q")}};
    auto src = CloneSources::OpenScanned(**store, o, SettledScanStart(NextClockTick()));
    // Twice each: the second time the refusal is remembered, not asked again.
    for (int round = 0; round < 2; ++round) {
      for (const char* rel : {"p", "q"}) {
        std::string out = t.str() + "/clone-" + rel + std::to_string(round);
        UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        REQUIRE(fd);
        CHECK(!src->CloneTo(rel, there[rel], fd.get()));
        struct stat st;
        REQUIRE(::fstat(fd.get(), &st) == 0);
        CHECK(st.st_size == 0);
      }
      CHECK(CopyFrom(*src, "p", there["p"], t.str() + "/copy-p" + std::to_string(round)) == "p content\n");
      CHECK(CopyFrom(*src, "q", there["q"], t.str() + "/copy-q" + std::to_string(round)) == std::string(200000, 'q'));
    }
  }
  SECTION("a source scanned before its last change serves nothing") {
    auto src = CloneSources::OpenScanned(**store, d, snap::NowNs() - 10'000'000'000);
    CHECK(!CopyFrom(*src, "a/x", scanned["a/x"], t.str() + "/o9"));
  }
}

TEST_CASE("init copies the tree from its source and records exactly what it copied", "[snap]") {
  TempDir t;
  const std::string d = t.str() + "/src";
  REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  for (int i = 0; i < 40; ++i)
    REQUIRE(WriteFileAt(d + "/f" + std::to_string(i), RandomString(1000 + 4000 * i, uint64_t(i))));
  REQUIRE(::mkdir((d + "/sub").c_str(), 0700) == 0);
  REQUIRE(WriteFileAt(d + "/sub/big", RandomString(3 << 20, 7), 0600));
  Manifest want = Capture(d);
  auto repo = snap::Repo::CreateStaged(t.str() + "/repo");
  REQUIRE(repo);
  Settle(**repo);
  auto seeded = (*repo)->Seed(d, "init");
  REQUIRE(seeded);
  REQUIRE((*repo)->FinishInit());
  for (const auto& diff : CompareManifests(want, Capture((*repo)->work_dir()))) FAIL_CHECK(diff);
  // The live tree is what the node records: a snapshot finds nothing new.
  auto again = (*repo)->Snapshot({});
  REQUIRE(again);
  CHECK(!again->node);
}

}  // namespace
}  // namespace agentenv::test
