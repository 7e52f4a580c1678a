// Retention and gc on a simulated week of history.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include "snap/diff.h"
#include "snap/repo.h"
#include "tests/history_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::Repo;
constexpr int64_t kMinute = 60'000'000'000LL, kHour = 60 * kMinute, kDay = 24 * kHour;

void Write(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

TEST_CASE("retention: a simulated week stays bounded with an exponential tail, gc frees and keeps") {
  // Thousands of durable commits: on tmpfs, fsync costs nothing.
  ::setenv("TMPDIR", "/dev/shm", 1);
  TempDir t;
  ::unsetenv("TMPDIR");
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  // One week at 12 snapshots an hour; each changes one file.
  const int64_t start = 1'700'000'000'000'000'000LL;
  const int per_hour = 12, hours = 24 * 7;
  auto shared = RandomBytes(64 * 1024, 7);
  Write(w + "/shared", std::string(shared.begin(), shared.end()));
  snap::SnapOptions first;
  first.time_ns = start;
  first.allow_empty = true;
  REQUIRE(repo->Snapshot(first));
  std::optional<store::ObjectId> tagged;
  for (int i = 1; i <= per_hour * hours; ++i) {
    auto data = RandomBytes(2000, i);
    Write(w + "/log", std::string(data.begin(), data.end()));
    snap::SnapOptions o;
    o.time_ns = start + i * (kHour / per_hour);
    auto r = repo->Snapshot(o);
    REQUIRE(r);
    REQUIRE(r->node);
    if (i == 100) tagged = *r->node;
  }
  REQUIRE(repo->Tag("milestone", tagged->Hex()));
  // A branch: back to an old node, new work there.
  REQUIRE(repo->Restore("HEAD~500"));
  auto branch_point = *repo->Resolve("HEAD");
  Write(w + "/branch-file", "on a branch");
  snap::SnapOptions b;
  b.time_ns = start + hours * kHour + 1;
  auto branch_tip = *repo->Snapshot(b);
  REQUIRE(branch_tip.node);

  uint64_t before_nodes = *repo->meta().NodeCount();
  int64_t now = start + hours * kHour + kMinute;
  uint64_t disk_before = DiskBytes(t.str() + "/r/store");
  auto plan = repo->Retain(snap::RetentionPolicy{}, true, now);
  REQUIRE(plan);
  CHECK(*repo->meta().NodeCount() == before_nodes);  // dry run changes nothing
  auto res = repo->Retain(snap::RetentionPolicy{}, false, now);
  REQUIRE(res);
  CHECK(res->dropped.size() == plan->dropped.size());
  uint64_t after = *repo->meta().NodeCount();
  INFO(before_nodes << " nodes before, " << after << " after");
  // 50 newest + last 10 min + ~60 per-minute... bounded far below 2000.
  CHECK(after < 400);
  CHECK(after > 50);

  // Survivors: tag, HEAD, branch point, both tips, the root.
  std::set<store::ObjectId> alive;
  std::map<store::ObjectId, snap::NodeRecord> by_id;
  auto all = repo->meta().AllNodes();
  REQUIRE(all);
  for (auto& r : *all) {
    alive.insert(r.id);
    by_id[r.id] = r;
  }
  CHECK(alive.count(*tagged));
  CHECK(alive.count(branch_point));
  CHECK(alive.count(*branch_tip.node));
  // An exponential tail: nodes older than a day exist, sparse.
  int older_than_day = 0, last_hour = 0;
  for (auto& [id, r] : by_id) {
    if (now - r.time_ns > kDay) ++older_than_day;
    if (now - r.time_ns < kHour) ++last_hour;
  }
  // Dense recently (12 an hour were taken), about one an hour older than a
  // day, none lost entirely.
  CHECK(last_hour >= 12);
  CHECK(older_than_day >= 6 * 24 - 2);
  CHECK(older_than_day <= 6 * 24 + 10);
  // Reparented summaries are true: each survivor's change count equals the
  // diff against its (new) parent.
  for (auto& [id, r] : by_id) {
    if (!r.parent) continue;
    REQUIRE(alive.count(*r.parent));
    auto d = snap::Delta(repo->store(), by_id[*r.parent].tree, r.tree);
    REQUIRE(d);
    CHECK(d->changes.summary().total() == r.changes);
  }

  auto gc = repo->Gc();
  REQUIRE(gc);
  CHECK(gc->dropped_objects > 0);
  uint64_t disk_after = DiskBytes(t.str() + "/r/store");
  INFO("store " << disk_before << " -> " << disk_after << " bytes");
  CHECK(disk_after < disk_before);
  // Every survivor still restores exactly; the shared chunk survived.
  REQUIRE(repo->Restore(tagged->Hex()));
  CHECK(ReadString(w + "/shared") == std::string(shared.begin(), shared.end()));
  auto expect = RandomBytes(2000, 100);
  CHECK(ReadString(w + "/log") == std::string(expect.begin(), expect.end()));
  REQUIRE(repo->Restore(branch_tip.node->Hex()));
  CHECK(ReadString(w + "/branch-file") == "on a branch");

  // History check: clean after gc; a lost tree object is named.
  auto clean = repo->CheckHistory({});
  REQUIRE(clean);
  CHECK(*clean == 0);
  auto tag_rec = *repo->Record(*tagged);
  {
    auto b = *repo->store().BeginBatch();
    REQUIRE(b->Drop(tag_rec.tree));
    REQUIRE(b->Commit());
  }
  std::vector<std::string> found;
  auto broken = repo->CheckHistory([&](const snap::HistoryFinding& f) { found.push_back(f.kind + ": " + f.message); });
  REQUIRE(broken);
  CHECK(*broken >= 1);
  REQUIRE(!found.empty());
  CHECK(found[0].find(tag_rec.tree.Hex()) != std::string::npos);
}

}  // namespace
}  // namespace agentenv::test
