// Retention and gc on a simulated week of history.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <thread>

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
  auto all = AllNodes(repo->meta());
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

// A span of exec, capture, failed and unrecorded nodes dropped below a
// kept node: the node keeps its own provenance, gains the span's summary,
// and its title is rendered again from provenance; a node without
// provenance keeps its title's words.
TEST_CASE("retention: a kept node says what the span thinned below it held", "[retention][provenance]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  const std::string w = repo->work_dir();
  const int64_t t0 = int64_t(1700000000) * 1000000000;
  auto snap_at = [&](int64_t ns, const std::string& file, std::optional<snap::Provenance> p,
                     const std::string& label = "") {
    Write(w + "/" + file, file);
    snap::SnapOptions o;
    o.time_ns = ns;
    o.provenance = std::move(p);
    o.label = label;
    auto s = repo->Snapshot(o);
    REQUIRE(s);
    REQUIRE(s->node);
    return *s->node;
  };
  auto exec = [](std::vector<std::string> argv, int code) {
    snap::Provenance p;
    p.kind = snap::ProvenanceKind::kExec;
    p.argv = std::move(argv);
    p.outcome.exit_code = code;
    return p;
  };
  snap::Provenance capture;
  capture.kind = snap::ProvenanceKind::kCapture;
  // root <- x (kept: its slot's oldest) <- make (exit 2) <- capture <- ls
  // <- unrecorded <- capture K (HEAD)
  snap_at(t0, "root", capture);
  store::ObjectId x = snap_at(t0 + 1, "x", capture);
  snap_at(t0 + 2, "a", exec({"make"}, 2));
  snap_at(t0 + 3, "b", capture);
  snap_at(t0 + 4, "c", exec({"/bin/sh", "-c", "ls -l"}, 0));
  snap_at(t0 + 5, "d", std::nullopt);
  store::ObjectId k = snap_at(t0 + 6, "e", capture);
  auto before = repo->Record(k);
  REQUIRE(before);

  snap::RetentionPolicy p;
  p.keep_last = 0;
  p.keep_within = std::chrono::seconds(0);
  p.buckets = {{std::chrono::hours(24 * 365), std::chrono::hours(24 * 365 * 100)}};
  auto res = repo->Retain(p, false, t0 + 100);
  REQUIRE(res);
  CHECK(res->dropped.size() == 4);
  CHECK(res->reparented == 1);
  auto rec = repo->Record(k);
  REQUIRE(rec);
  CHECK(rec->parent == x);
  REQUIRE(rec->provenance);
  CHECK(rec->provenance->kind == snap::ProvenanceKind::kCapture);
  REQUIRE(rec->provenance->thinned);
  const snap::Thinned& th = *rec->provenance->thinned;
  CHECK(th.nodes == 4);
  CHECK(th.kinds == std::map<snap::ProvenanceKind, uint64_t>{{snap::ProvenanceKind::kUnknown, 1},
                                                             {snap::ProvenanceKind::kCapture, 1},
                                                             {snap::ProvenanceKind::kExec, 2}});
  CHECK(th.failed == 1);
  CHECK(th.first_ns == t0 + 2);
  CHECK(th.last_ns == t0 + 5);
  CHECK(th.commands == std::vector<std::string>{"make (exit 2)", "ls -l"});
  // A capture's title is its changes: summarized again against x.
  auto d = snap::Delta(repo->store(), repo->Record(x)->tree, rec->tree);
  REQUIRE(d);
  CHECK(rec->changes == 5);
  CHECK(rec->title == d->changes.Label());
  CHECK(rec->title != before->title);
  CHECK(rec->flags == snap::NodeRecord::kTitleRendered);

  // Thinned again: K itself goes, and its span comes along into the next
  // kept node's summary; an exec's title stays its command.
  store::ObjectId k2 = snap_at(t0 + 7, "f", exec({"make", "test"}, 0));
  store::ObjectId k3 = snap_at(t0 + 8, "g", exec({"make", "install"}, 1));
  res = repo->Retain(p, false, t0 + 200);
  REQUIRE(res);
  CHECK(res->dropped.size() == 2);  // K and k2
  rec = repo->Record(k3);
  REQUIRE(rec);
  CHECK(rec->parent == x);
  CHECK(rec->title == "exec: make install (exit 1)");
  REQUIRE(rec->provenance->thinned);
  const snap::Thinned& all = *rec->provenance->thinned;
  CHECK(all.nodes == 6);
  CHECK(all.kinds.at(snap::ProvenanceKind::kCapture) == 2);
  CHECK(all.kinds.at(snap::ProvenanceKind::kExec) == 3);
  CHECK(all.failed == 1);
  CHECK(all.first_ns == t0 + 2);
  CHECK(all.last_ns == t0 + 7);
  CHECK(all.commands == std::vector<std::string>{"make (exit 2)", "ls -l", "make test"});
  CHECK(snap::ThinnedText(all) == "6 nodes thinned (2 capture, 3 exec, 1 unknown; 1 failed): make (exit 2); ls -l; make test");
  (void)k2;
}

TEST_CASE("retention: a node without provenance keeps its title's words", "[retention][provenance]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  const std::string w = repo->work_dir();
  const int64_t t0 = int64_t(1700000000) * 1000000000;
  auto snap_at = [&](int64_t ns, const std::string& file, const std::string& label) {
    Write(w + "/" + file, file);
    snap::SnapOptions o;
    o.time_ns = ns;
    o.label = label;
    auto s = repo->Snapshot(o);
    REQUIRE(s);
    REQUIRE(s->node);
    return *s->node;
  };
  snap_at(t0, "root", "");
  snap_at(t0 + 1, "x", "");
  snap_at(t0 + 2, "a", "exec: make");
  store::ObjectId legacy = snap_at(t0 + 3, "b", "exec: old way");
  snap_at(t0 + 4, "c", "");
  store::ObjectId summary = snap_at(t0 + 5, "d", "");
  auto was = repo->Record(summary);
  REQUIRE(was);
  // Dropped: "exec: make" below `legacy` (tagged), c below `summary` (HEAD).
  snap::RetentionPolicy p;
  p.keep_last = 0;
  p.keep_within = std::chrono::seconds(0);
  p.buckets = {{std::chrono::hours(24 * 365), std::chrono::hours(24 * 365 * 100)}};
  REQUIRE(repo->Tag("keep", legacy.Hex()));
  auto res = repo->Retain(p, false, t0 + 100);
  REQUIRE(res);
  CHECK(res->dropped.size() == 2);
  auto l = repo->Record(legacy);
  REQUIRE(l);
  CHECK(l->title == "exec: old way");
  CHECK(l->flags == 0);
  REQUIRE(l->provenance);  // gains one holding only the span
  CHECK(l->provenance->kind == snap::ProvenanceKind::kUnknown);
  CHECK(l->provenance->thinned->nodes == 1);
  auto s = repo->Record(summary);
  REQUIRE(s);
  CHECK(s->title == was->title);  // the words it had: not guessed from
  CHECK(s->changes == 2);         // its count is against its new parent
}

// Each node's parent and how many nodes retention dropped below it.
std::map<store::ObjectId, std::pair<std::optional<store::ObjectId>, uint64_t>> Shape(Repo& repo) {
  std::map<store::ObjectId, std::pair<std::optional<store::ObjectId>, uint64_t>> out;
  auto all = AllNodes(repo.meta());
  REQUIRE(all);
  for (const auto& r : *all)
    out[r.id] = {r.parent, r.provenance && r.provenance->thinned ? r.provenance->thinned->nodes : 0};
  return out;
}

TEST_CASE("retention: a retain killed mid-way loses nothing and the next one finishes the same thinning",
          "[retention][crash]") {
  ::setenv("TMPDIR", "/dev/shm", 1);
  TempDir t;
  ::unsetenv("TMPDIR");
  const std::string pristine = t.str() + "/pristine", twin = t.str() + "/twin", root = t.str() + "/r";
  const int64_t start = 1'700'000'000'000'000'000LL, now = start + 3 * kDay;
  const uint64_t made = 1000;
  {
    auto repo = *Repo::Create(pristine);
    for (uint64_t i = 0; i < made; ++i) {
      Write(repo->work_dir() + "/f", RandomString(3000, i));
      snap::SnapOptions o;
      o.time_ns = start + int64_t(i) * 20'000'000'000LL;
      o.allow_empty = true;
      auto id = SnapNode(*repo, o);
      if (i == made / 2) REQUIRE(repo->Tag("half", id.Hex()));
    }
  }
  snap::RetentionPolicy policy;
  policy.keep_last = 5;
  policy.keep_within = std::chrono::seconds(0);
  policy.drops_per_commit = 4;  // hundreds of commits to land a kill between
  REQUIRE(std::system(("cp -a " + pristine + " " + twin).c_str()) == 0);
  auto want = [&] {
    auto repo = *Repo::Open(twin);
    auto res = repo->Retain(policy, false, now);
    REQUIRE(res);
    return Shape(*repo);
  }();
  REQUIRE(want.size() < made / 10);

  // Kill a retain at a growing delay until one lands mid-way.
  bool midway = false;
  int delay_ms = 5;
  for (int round = 0; round < 30 && !midway; ++round) {
    REQUIRE(std::system(("rm -rf " + root + " && cp -a " + pristine + " " + root).c_str()) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto repo = Repo::Open(root);
      ::_exit(repo && (*repo)->Retain(policy, false, now) ? 0 : 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms * kSanitizerSlowdown));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0)));
    auto repo = *Repo::Open(root);
    const uint64_t left = *repo->meta().NodeCount();
    INFO("round " << round << ", killed after " << delay_ms << " ms: " << left << " nodes left");
    if (left == made) {
      delay_ms += 5 + delay_ms / 2;  // killed before its first commit
      continue;
    }
    if (left == want.size()) {
      delay_ms = std::max(1, delay_ms / 2);  // it finished first
      continue;
    }
    midway = true;
    // History is whole and counted right, and every node dropped so far
    // is summarized exactly once by a node still there.
    auto errors = repo->CheckHistory([](const snap::HistoryFinding& f) { UNSCOPED_INFO(f.kind << ": " << f.message); });
    REQUIRE(errors);
    CHECK(*errors == 0);
    uint64_t summarized = 0;
    for (const auto& [id, shape] : Shape(*repo)) summarized += shape.second;
    CHECK(left + summarized == made);
    // The next retain goes on to the same thinning as one never killed.
    auto res = repo->Retain(policy, false, now);
    REQUIRE(res);
    CHECK(Shape(*repo) == want);
    errors = repo->CheckHistory({});
    REQUIRE(errors);
    CHECK(*errors == 0);
  }
  CHECK(midway);
}

}  // namespace
}  // namespace agentenv::test
