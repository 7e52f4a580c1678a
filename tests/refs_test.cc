// snap/refs.cc: time refs on an injected clock. ParseWhen takes "now" as
// an argument, and nodes are made with the times the test gives them, so
// nothing here waits for time to pass.
#include <catch2/catch.hpp>

#include <cstdint>
#include <ctime>
#include <string>

#include "snap/repo.h"
#include "snap_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

constexpr int64_t kSec = 1000000000;

// `t` (seconds) as "YYYY-MM-DD HH:MM:SS" in local time, as a user types it.
std::string LocalTime(time_t t) {
  char buf[32];
  struct tm tm {};
  ::localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

TEST_CASE("refs: ParseWhen reads relative times against the now it is given", "[snap][refs]") {
  const int64_t now = int64_t(1800000000) * kSec + 123;
  CHECK(*snap::ParseWhen("now", now) == now);
  CHECK(*snap::ParseWhen("0 seconds ago", now) == now);
  CHECK(*snap::ParseWhen("10 minutes ago", now) == now - 600 * kSec);
  CHECK(*snap::ParseWhen("1 min ago", now) == now - 60 * kSec);
  CHECK(*snap::ParseWhen("2 h ago", now) == now - 7200 * kSec);
  CHECK(*snap::ParseWhen("3 days ago", now) == now - 3 * 86400 * kSec);
  CHECK(*snap::ParseWhen("1 weeks ago", now) == now - 604800 * kSec);
  // Too far back to count: before every node, not an error or a wrap.
  CHECK(*snap::ParseWhen("99999999999999999 weeks ago", now) == INT64_MIN);
  for (const char* bad : {"-5 minutes ago", "5 fortnights ago", "yesterday-ish", "", "10 minutes", "2026-13-01"}) {
    INFO(bad);
    auto r = snap::ParseWhen(bad, now);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalid);
  }
}

TEST_CASE("refs: ParseWhen reads a local date as its midnight and a time as the end of its second", "[snap][refs]") {
  struct tm tm {};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 23;
  tm.tm_isdst = -1;
  const int64_t midnight = int64_t(::mktime(&tm)) * kSec;
  CHECK(*snap::ParseWhen("2026-11-23", 0) == midnight);
  CHECK(*snap::ParseWhen("2026-11-23 14:00", 0) == midnight + 14 * 3600 * kSec + kSec - 1);
  CHECK(*snap::ParseWhen("2026-11-23 14:00:05", 0) == midnight + (14 * 3600 + 5) * kSec + kSec - 1);
}

// Three nodes an hour apart, the newest an hour ago: every @{...} below
// has an hour of margin, however slow the host is between the lines.
TEST_CASE("refs: @{time} names the newest node made at or before that time", "[snap][refs]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const int64_t now_s = ::time(nullptr);
  std::vector<store::ObjectId> nodes;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(WriteFileAt(repo->work_dir() + "/state", std::to_string(i) + "\n"));
    snap::SnapOptions o;
    o.time_ns = (now_s - 3600 * (3 - i)) * kSec;
    auto r = repo->Snapshot(o);
    REQUIRE(r);
    REQUIRE(r->node);
    nodes.push_back(*r->node);
  }
  CHECK(*repo->Resolve("@{now}") == nodes[2]);
  CHECK(*repo->Resolve("@{30 minutes ago}") == nodes[2]);
  CHECK(*repo->Resolve("@{90 minutes ago}") == nodes[1]);
  CHECK(*repo->Resolve("@{150 minutes ago}") == nodes[0]);
  CHECK(*repo->Resolve("@{90 minutes ago}~1") == nodes[0]);
  // A node's own second names it; the second before names its parent.
  const time_t second = now_s - 7200;
  CHECK(*repo->Resolve("@{" + LocalTime(second) + "}") == nodes[1]);
  CHECK(*repo->Resolve("@{" + LocalTime(second - 1) + "}") == nodes[0]);
  auto before = repo->Resolve("@{4 hours ago}");
  REQUIRE_FALSE(before);
  CHECK(before.error().code == ErrorCode::kNotFound);
  CHECK(before.error().message.find("no node was made at or before that time") != std::string::npos);
  auto bad = repo->Resolve("@{yesterday-ish}");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ErrorCode::kInvalid);
  CHECK(bad.error().message.find("expected \"N minutes ago\"") != std::string::npos);
}

}  // namespace
}  // namespace agentenv::test
