// log --digest (control/digest.h) on a generated day of automatic capture
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
      INFO(p.name);
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
  CHECK(d->text.find(" -> " + day->rollback_target) != std::string::npos);
  CHECK(d->text.find("1 tournament") != std::string::npos);
  CHECK(d->text.find(day->tournament_id + ": 3 candidates") != std::string::npos);
  CHECK(d->text.find("`" + day->tournament_winner + "`") != std::string::npos);
  CHECK(d->text.find("won: #2 (applied to HEAD)") != std::string::npos);
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

namespace {

// The line of `text` holding `needle` ("" when none).
std::string LineWith(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  size_t b = text.rfind('\n', at), e = text.find('\n', at);
  return text.substr(b == std::string::npos ? 0 : b + 1, e == std::string::npos ? std::string::npos : e - b - 1);
}

}  // namespace

// The questions a person or a model asks about an agent's day, with the
// answers the script knows: each must be read off one line of the digest.
TEST_CASE("digest: a scripted day answers the questionnaire within 2,000 tokens", "[control][digest]") {
  TempDir t;
  auto repo = snap::Repo::Create(t.str() + "/repo");
  REQUIRE(repo);
  bench::DayGen gen(**repo, LocalNs(2025, 3, 12, 7, 0), 2400);
  auto day = gen.Run();
  INFO((day ? "" : day.error().message));
  REQUIRE(day);
  control::DigestRequest req;
  req.since = "2025-03-12";
  auto d = history::Digest(**repo, req, day->end_ns + int64_t(3600) * 1000000000);
  REQUIRE(d);
  const std::string& text = d->text;
  INFO(text);
  CHECK(d->tokens <= 2000);
  struct Question {
    const char* q;
    std::string anchor;                // found on a line...
    std::vector<std::string> answers;  // ...that also holds each of these
  };
  const std::vector<Question> questions = {
      {"Which apt packages were installed?", "packages: apt +jq", {"+jq 1.6-2.1", "libjq1"}},
      {"What was built with apt later?", "+build-essential", {"make", "g++"}},
      {"Which pip package was installed (and kept)?", "+requests 2.31.0", {"certifi", "urllib3"}},
      {"What was upgraded?", "~curl", {"7.88.1-10 -> 7.88.1-10+deb12u5"}},
      {"What was removed?", "-vim", {}},
      {"When did the tests first fail, and how?", day->first_failure + " `python3 -m pytest -q tests/` exit 1", {"failed: "}},
      {"Did the build fail?", "`make -j4 -C build all` exit 2", {"failed: "}},
      {"What was rolled back, from where to where?", "rollback ",
       {"HEAD " + day->rollback_from + " -> " + day->rollback_target, "`rm -rf /root/proj/src`",
        "`cd web && npm uninstall left-pad`"}},
      {"Which packages did the rollback undo?", "rollback ", {"npm -left-pad"}},
      {"Is left-pad installed at the end?", "+left-pad 1.3.0", {"packages: "}},
      {"Which tournament candidate won, and with what command?", day->tournament_id + ": 3 candidates",
       {"#2 `" + day->tournament_winner + "` test exit 0", "won: #2 (applied to HEAD)", "#1 `pip install numpy==1.24.4 && python3 -m pytest -q tests/` test exit 1"}},
      {"Which fork was made, and what did it try?", "fork " + day->fork + " from ",
       {"`pip install flask==3.0.3`", "+flask 3.0.3", "not on HEAD's line"}},
      {"Did anything fail in the fork?", "`python3 -m pytest -q tests/` exit 1 in fork " + day->fork, {}},
      {"Which tags are there?", "tags: " + day->tag, {}},
      {"How many rollbacks and tournaments?", "1 rollback,", {"1 tournament", "1 fork"}},
  };
  CHECK(questions.size() >= 10);
  size_t answered = 0;
  for (const Question& q : questions) {
    INFO(q.q);
    std::string line = LineWith(text, q.anchor);
    CHECK_FALSE(line.empty());
    bool all = !line.empty();
    for (const auto& a : q.answers) {
      INFO(a);
      CHECK(line.find(a) != std::string::npos);
      all = all && line.find(a) != std::string::npos;
    }
    answered += all;
  }
  CHECK(answered == questions.size());
  // What is not so is not said: flask and numpy 1.24.4 never reached
  // HEAD's line; caches are no directory of the day.
  for (const auto& phase : d->phases)
    for (const auto& p : phase.packages) {
      CHECK(p.name != "flask");
      CHECK(p.new_version != "1.24.4");
    }
  CHECK(text.find("_cacache") == std::string::npos);
  CHECK(text.find(".cache/pip") == std::string::npos);
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
