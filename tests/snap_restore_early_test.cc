// snap/restore EarlyWriter: a fresh tree written directory by directory as
// a scan completes them, the final restore writing only the rest, and a
// clean start over when a source changed under the early writer.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "snap/clone_sources.h"
#include "snap/fsops.h"
#include "snap/meta.h"
#include "snap/restore.h"
#include "snap/scan.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

// A directory a scan handed over.
struct Handed {
  std::string rel;
  snap::Entry entry;
  snap::Tree tree;
};

// The source: plain directories written early; p/q holds a hardlink pair,
// so p/q and p wait for the final restore while p/r is written early.
// Returns the start of a scan that takes them as settled (older than it
// by more than the racy window).
int64_t MakeSource(const std::string& d) {
  REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(d + "/top", "top\n"));
  REQUIRE(::mkdir((d + "/a").c_str(), 0750) == 0);
  REQUIRE(::mkdir((d + "/a/b").c_str(), 0755) == 0);
  REQUIRE(::mkdir((d + "/a/b/empty").c_str(), 0700) == 0);
  for (int i = 0; i < 30; ++i)
    REQUIRE(WriteFileAt(d + "/a/b/f" + std::to_string(i), RandomString(100 + 997 * i, uint64_t(i)), 0640));
  REQUIRE(WriteFileAt(d + "/a/big", RandomString(3 << 20, 5)));  // a manifest
  REQUIRE(WriteFileAt(d + "/a/empty-file", ""));
  REQUIRE(::symlink("b/f1", (d + "/a/link").c_str()) == 0);
  REQUIRE(::setxattr((d + "/a/b/f2").c_str(), "user.note", "x", 1, 0) == 0);
  REQUIRE(::mkdir((d + "/ro").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(d + "/ro/f", "read-only dir\n", 0444));
  REQUIRE(::chmod((d + "/ro").c_str(), 0555) == 0);
  REQUIRE(::mkdir((d + "/p").c_str(), 0755) == 0);
  REQUIRE(::mkdir((d + "/p/q").c_str(), 0755) == 0);
  REQUIRE(::mkdir((d + "/p/r").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(d + "/p/q/x", "linked\n"));
  REQUIRE(::link((d + "/p/q/x").c_str(), (d + "/p/q/y").c_str()) == 0);
  REQUIRE(WriteFileAt(d + "/p/r/z", "z\n"));
  SetMtime(d + "/a/b", 1000000, 5);
  return SettledScanStart(NextClockTick());
}

class Fixture {
 public:
  Fixture() {
    src = t.str() + "/src";
    target = t.str() + "/target";
    scan_start = MakeSource(src);
    REQUIRE(::mkdir(target.c_str(), 0755) == 0);
    auto s = store::Store::Open(t.str() + "/store", store::Store::Mode::kCreate);
    REQUIRE(s);
    store = std::move(*s);
    auto m = snap::MetaDb::Open(t.str() + "/meta", true);
    REQUIRE(m);
    meta = std::move(*m);
    target_fd = UniqueFd(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(target_fd);
    ro.fresh = true;
    ro.privileged = IsRoot();
    // Before the scan begins, as init does.
    ro.sources = snap::CloneSources::OpenScanned(*store, src, scan_start);
    ro.start_ns = scan_start;
  }

  // Scans the source, handing each directory to `on_dir`, and commits.
  snap::ScanOutput Scan(const decltype(snap::ScanContext::on_dir)& on_dir) {
    auto batch = store->BeginBatch();
    REQUIRE(batch);
    snap::ScanContext ctx{*store, **batch, *meta, {}, scan_start};
    ctx.live = false;
    ctx.on_dir = on_dir;
    UniqueFd fd(::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto out = snap::ScanTree(ctx, fd.get());
    REQUIRE(out);
    REQUIRE((*batch)->Commit());
    return std::move(*out);
  }

  // Scans with an early writer following the scan; what it wrote in
  // *written, its stats in *es.
  snap::ScanOutput ScanWritingEarly(Result<snap::WrittenDirs>* written, snap::RestoreStats* es) {
    snap::EarlyWriter early(*store, target_fd.get(), ro);
    snap::ScanOutput out = Scan([&](const std::string& rel, const snap::Entry& e, snap::Tree&& t) {
      early.Add(rel, e, std::move(t));
    });
    *written = early.Finish(es);
    return out;
  }

  // Hands what a scan handed over to an early writer, after the fact.
  Result<snap::WrittenDirs> WriteEarly(std::vector<Handed>& handed, snap::RestoreStats* es) {
    snap::EarlyWriter early(*store, target_fd.get(), ro);
    for (auto& h : handed) early.Add(h.rel, h.entry, std::move(h.tree));
    return early.Finish(es);
  }

  snap::RestoreStats Finish(const snap::ScanOutput& out, const snap::WrittenDirs& written) {
    ro.written = &written;
    auto rs = snap::RestoreTree(*store, target_fd.get(), snap::EmptyTreeId(), out.tree, out.root, out.links, ro);
    REQUIRE(rs);
    return std::move(*rs);
  }

  TempDir t;
  std::string src, target;
  int64_t scan_start = 0;  // settled: what MakeSource wrote is past the racy window
  std::unique_ptr<store::Store> store;
  std::unique_ptr<snap::MetaDb> meta;
  UniqueFd target_fd;
  snap::RestoreOptions ro;
};

TEST_CASE("an early writer writes each directory the scan completes and the final restore only the rest", "[snap]") {
  Fixture f;
  Manifest want = Capture(f.src);
  snap::RestoreStats es;
  Result<snap::WrittenDirs> written;
  snap::ScanOutput out = f.ScanWritingEarly(&written, &es);
  REQUIRE(written);
  std::set<std::string> whole;
  for (const auto& [rel, id] : written->whole) whole.insert(rel);
  CHECK(whole == std::set<std::string>{"a", "a/b", "a/b/empty", "p/r", "ro"});
  // p holds p/r, written whole, and waits for p/q's hardlinks.
  CHECK(written->made == std::set<std::string>{"p"});
  // 30 + big + empty-file (a, a/b), ro/f, p/r/z.
  CHECK(es.files_written == 34);
  snap::RestoreStats rs = f.Finish(out, *written);
  CHECK(rs.files_written == 2);  // top, p/q/x; p/q/y is linked
  for (const auto& diff : CompareManifests(want, Capture(f.target))) FAIL_CHECK(diff);
  // Every file the early writer wrote has a stat cache entry, the big one
  // (its content a manifest) among them.
  size_t manifests = 0;
  for (const auto& [rel, se] : es.stat_entries) manifests += se.ref.type == store::ObjectType::kManifest;
  CHECK(es.stat_entries.size() == 34);
  CHECK(manifests == 1);
}

TEST_CASE("an early writer whose source changed after the scan leaves the target empty for the final restore", "[snap]") {
  Fixture f;
  Manifest want = Capture(f.src);
  std::vector<Handed> handed;
  snap::ScanOutput out = f.Scan([&](const std::string& rel, const snap::Entry& e, snap::Tree&& t) {
    handed.push_back({rel, e, std::move(t)});
  });
  // After the scan read it, before the early writer copies it: the source
  // no longer holds the content the tree names.
  REQUIRE(WriteFileAt(f.src + "/a/b/f7", "changed since the scan\n"));
  snap::RestoreStats es;
  auto written = f.WriteEarly(handed, &es);
  REQUIRE(written);
  CHECK(written->whole.empty());
  CHECK(written->made.empty());
  CHECK(es.files_written == 0);
  CHECK(Capture(f.target).size() == 1);  // the root alone
  f.Finish(out, *written);
  // The tree as scanned, f7 from the store.
  for (const auto& diff : CompareManifests(want, Capture(f.target))) FAIL_CHECK(diff);
}

TEST_CASE("an early writer leaves a directory changed since the scan and those above it to the final restore", "[snap]") {
  Fixture f;
  Manifest want = Capture(f.src);
  std::vector<Handed> handed;
  snap::ScanOutput out = f.Scan([&](const std::string& rel, const snap::Entry& e, snap::Tree&& t) {
    handed.push_back({rel, e, std::move(t)});
  });
  REQUIRE(::chmod((f.src + "/a/b").c_str(), 0755) == 0);  // the same mode: only its ctime moves
  snap::RestoreStats es;
  auto written = f.WriteEarly(handed, &es);
  REQUIRE(written);
  std::set<std::string> whole;
  for (const auto& [rel, id] : written->whole) whole.insert(rel);
  CHECK(whole == std::set<std::string>{"p/r", "ro"});
  CHECK(es.files_written == 2);
  snap::RestoreStats rs = f.Finish(out, *written);
  CHECK(rs.files_written == 34);  // a, a/b (from the store), top, p/q/x
  for (const auto& diff : CompareManifests(want, Capture(f.target))) FAIL_CHECK(diff);
}

TEST_CASE("an early writer rootless writes read-only directories and keeps owners as the final restore does", "[snap]") {
  if (!IsRoot()) Skip("needs root to become another user (uid 65534)");
  for (const auto& problem : RunAsNobody([&] {
         std::vector<std::string> problems;
         Fixture f;
         Manifest want = Capture(f.src);
         snap::RestoreStats es;
         Result<snap::WrittenDirs> written;
         snap::ScanOutput out = f.ScanWritingEarly(&written, &es);
         if (!written) return std::vector<std::string>{written.error().message};
         if (written->whole.size() != 5) problems.push_back("whole: " + std::to_string(written->whole.size()));
         f.Finish(out, *written);
         for (const auto& diff : CompareManifests(want, Capture(f.target))) problems.push_back(diff);
         return problems;
       }))
    FAIL_CHECK(problem);
}

// init --from's early writer commits stat cache batches while the scan
// runs. A read transaction the scan held meanwhile would keep every page
// those commits free from being reused (at 1M files the metadata file grew
// to 3 GB for 0.3 GB of data): a foreign scan must hold none.
TEST_CASE("a foreign scan holds no metadata read transaction: commits while it runs reuse their pages", "[snap]") {
  Fixture f;
  const std::string data = f.t.str() + "/meta/data.mdb";
  auto file_size = [&] {
    struct stat st;
    return ::stat(data.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
  };
  // 20 commits, each rewriting the same 2,000 stat cache rows.
  auto rewrite = [&](uint64_t round) -> bool {
    for (uint64_t c = 0; c < 20; ++c) {
      auto txn = f.meta->Begin();
      if (!txn) return false;
      for (int i = 0; i < 2000; ++i) {
        snap::StatEntry e;
        e.ino = uint64_t(i);
        e.size = round * 100 + c;
        if (!(*txn)->PutStat("some/dir/file" + std::to_string(i), e)) return false;
      }
      if (!(*txn)->Commit()) return false;
    }
    return true;
  };
  REQUIRE(rewrite(0));
  const uint64_t before = file_size();
  std::atomic<uint64_t> rounds{0};
  std::atomic<bool> failed{false};
  f.Scan([&](const std::string&, const snap::Entry&, snap::Tree&&) {
    if (!rewrite(++rounds)) failed = true;
  });
  CHECK_FALSE(failed);
  CHECK(rounds >= 5);  // 100+ commits while the scan ran
  // Held, every commit's freed pages stay unused: 28 MB more for 5 rounds.
  INFO("metadata file " << before << " bytes before the scan, " << file_size() << " after " << rounds
                        << " rounds of commits during it");
  CHECK(file_size() < before + (uint64_t{4} << 20));
}

}  // namespace
}  // namespace agentenv::test
