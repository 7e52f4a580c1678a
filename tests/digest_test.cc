// log --digest (history/digest.h) on a generated day of automatic capture
// (bench/day_gen.h): one page, within the token budget, naming every
// package change, the rollback and the tournament.
#include <catch2/catch.hpp>
#include <ctime>
#include <set>

#include "bench/day_gen.h"
#include "history/digest.h"
#include "control/ops.h"
#include "control/server.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

int64_t LocalNs(int y, int mo, int d, int h, int mi) {
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_isdst = -1;
  return int64_t(::mktime(&tm)) * 1000000000;
}

}  // namespace

TEST_CASE("digest: a generated day of ~2,400 nodes fits 2,000 tokens and names every package change, rollback and "
          "tournament",
          "[control][digest]") {
  TempDir t;
  auto repo = snap::Repo::Create(t.str() + "/repo");
  REQUIRE(repo);
  bench::DayGen gen(**repo, LocalNs(2025, 3, 12, 7, 0), 2400);
  auto day = gen.Run();
  INFO((day ? "" : day.error().message));
  REQUIRE(day);
  CHECK(day->nodes >= 2300);

  control::DigestRequest req;
  req.since = "2025-03-12";
  auto d = history::Digest(**repo, req, day->end_ns + int64_t(3600) * 1000000000);
  REQUIRE(d);
  INFO(d->text);
  CHECK(d->nodes == day->nodes);
  CHECK(d->text.size() <= 2000 * 4);
  CHECK(d->tokens <= 2000);
  // Every package delta any record of the day holds, by name.
  auto all = (*repo)->Log(SIZE_MAX);
  REQUIRE(all);
  size_t deltas = 0;
  for (const auto& n : *all) {
    if (!n.packages || !n.parent) continue;  // the first node's packages are counted, not listed
    for (const auto& p : n.packages->items) {
      ++deltas;
      CHECK(d->text.find(p.name) != std::string::npos);
    }
  }
  CHECK(deltas >= day->packages.size());
  for (const auto& name : day->packages) CHECK(d->text.find(name) != std::string::npos);
  CHECK(d->text.find("+jq 1.6-2.1") != std::string::npos);
  CHECK(d->text.find(" holds apt 154 packages") != std::string::npos);
  CHECK(d->text.find("lib42-base") == std::string::npos);
  CHECK(d->text.find("~curl 7.88.1-10 -> 7.88.1-10+deb12u5") != std::string::npos);
  CHECK(d->text.find("-vim") != std::string::npos);
  CHECK(d->text.find("1 rollback,") != std::string::npos);
  CHECK(d->text.find("rollback 14:") != std::string::npos);
  CHECK(d->text.find(" to " + day->rollback_target) != std::string::npos);
  CHECK(d->text.find("1 tournament") != std::string::npos);
  CHECK(d->text.find(day->tournament_id + ": 3 candidates") != std::string::npos);
  CHECK(d->text.find("applied \"" + day->tournament_winner + "\"") != std::string::npos);
  CHECK(d->text.find("+numpy 2.0.0") != std::string::npos);
  CHECK(d->text.find(day->tag) != std::string::npos);
  // Phases follow the breaks: morning, after lunch, late afternoon.
  REQUIRE(d->phases.size() == 3);
  CHECK(d->phases[0].start == "08:00");
  CHECK(d->phases[1].start == "13:00");
  CHECK(d->phases[2].start == "15:30");
  CHECK_FALSE(d->phases[0].dirs.empty());

  // A smaller budget keeps every package name, dropping detail first.
  req.max_tokens = 250;
  auto small = history::Digest(**repo, req, day->end_ns);
  REQUIRE(small);
  CHECK(small->text.size() < d->text.size());
  for (const auto& name : day->packages) CHECK(small->text.find(name) != std::string::npos);

  // The same digest as the MCP tool and socket op.
  control::Server server(std::move(*repo));
  auto j = control::CallJson(server, "digest", {{"since", "2025-03-12"}, {"until", "2025-03-12 23:59"}}, nullptr);
  REQUIRE(j);
  CHECK((*j)["text"].get<std::string>().find(day->tournament_id) != std::string::npos);
  CHECK((*j)["tokens"].get<uint64_t>() <= 2000);
  std::set<std::string> keys;
  for (const auto& [k, v] : control::FindOp("digest")->input_schema["properties"].items()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"since", "until", "max_tokens"});
  auto bad = control::CallJson(server, "digest", {{"since", "yesterday-ish"}}, nullptr);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.starts_with("since: "));
}

TEST_CASE("digest: a window without nodes says so", "[control][digest]") {
  TempDir t;
  auto repo = snap::Repo::Create(t.str() + "/repo");
  REQUIRE(repo);
  control::DigestRequest req;
  auto empty = history::Digest(**repo, req, 0);
  REQUIRE(empty);
  CHECK(empty->text == "no snapshots yet");
  bench::DayGen gen(**repo, LocalNs(2025, 3, 12, 7, 0), 200);
  REQUIRE(gen.Run());
  req.since = "2025-03-13";
  auto none = history::Digest(**repo, req, LocalNs(2025, 3, 14, 0, 0));
  REQUIRE(none);
  CHECK(none->nodes == 0);
  CHECK(none->text.starts_with("no nodes between "));
}

}  // namespace agentenv::test
