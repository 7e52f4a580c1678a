// web/: what the timeline says of a scripted day (bench/day_gen.h) from
// recorded provenance and the operation log: failed commands with their
// exit code, the rollback as a jump with the commands it undid, the
// tournament's candidates and winner, lanes named after their workspace;
// and the session cookie a page trades its token for, over a real
// listener that wants the token on every request.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <atomic>
#include <thread>

#include "bench/day_gen.h"
#include "control/open_repo.h"
#include "serve/http.h"
#include "snap_testutil.h"
#include "web/dvr_routes.h"

namespace agentenv::test {
namespace {

using json = nlohmann::json;
const std::string kToken = "00112233445566778899aabbccddeeff";
constexpr int64_t kDay = int64_t(1741762800) * 1000000000;  // 2025-03-12 07:00 UTC

// The scripted day (~`nodes` nodes) in a repository, its server and DVR on
// a loopback listener that wants `listener_token` on every request (as a
// bind that is not loopback does), when not empty.
struct Day {
  TempDir tmp;
  std::string root = tmp.str() + "/repo";
  bench::DayResult day;
  std::unique_ptr<control::Server> server;
  std::unique_ptr<web::Dvr> dvr;
  std::unique_ptr<serve::HttpServer> http;
  std::unique_ptr<httplib::Client> client;

  // The sessions' clock runs `skew` ahead of the steady clock.
  std::atomic<int64_t> skew_s{0};
  explicit Day(size_t nodes, const std::string& listener_token = "") {
    {
      auto repo = snap::Repo::Create(root);
      REQUIRE(repo);
      bench::DayGen gen(**repo, kDay, nodes);
      auto d = gen.Run();
      INFO((d ? "" : d.error().message));
      REQUIRE(d);
      day = *d;
    }
    auto repo = control::OpenRepo(root);
    REQUIRE(repo);
    server = std::make_unique<control::Server>(std::move(*repo));
    web::DvrOptions dvr_opt{root, kToken};
    dvr_opt.clock = [this] { return std::chrono::steady_clock::now() + std::chrono::seconds(skew_s.load()); };
    dvr = std::make_unique<web::Dvr>(*server, std::move(dvr_opt));
    serve::HttpOptions opt;
    opt.token = listener_token;
    opt.allowed_origins = {"https://dvr.example.com"};
    auto h = serve::HttpServer::Start(opt, {dvr->Routes()});
    REQUIRE(h);
    http = std::move(*h);
    client = std::make_unique<httplib::Client>("127.0.0.1", http->port());
  }
  ~Day() {
    dvr->Stop();
    http->Stop();
  }
  int Status(const std::string& path, const httplib::Headers& h = {}) {
    auto res = client->Get(path, h);
    REQUIRE(res);
    return res->status;
  }
};

bool Contains(const json& list, const std::string& s) {
  for (const auto& x : list)
    if (x.get<std::string>().find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("web: the timeline of a day shows failed commands with their exit code, the rollback as a jump, the "
          "tournament's winner and lanes named after their workspace",
          "[web]") {
  Day d(300);
  auto res = d.client->Get("/api/timeline?max_nodes=5000");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  json t = json::parse(res->body);
  REQUIRE(t.contains("nodes"));

  size_t failed = 0, exit2 = 0;
  json winner, loser;
  for (const auto& n : t["nodes"]) {
    if (n.value("failed", false)) {
      ++failed;
      REQUIRE(n.contains("exit"));
      CHECK(n["outcome"] == "exit " + std::to_string(n["exit"].get<int>()));
      exit2 += n["exit"] == 2;
    }
    if (n.contains("tournament")) (n["tournament"]["won"] == true ? winner : loser) = n;
  }
  CHECK(failed >= d.day.failed_tests);
  CHECK(exit2 >= 1);  // the build that fails once
  // The tournament: the winner is the applied candidate, marked; a loser
  // shows its test's exit.
  REQUIRE(winner.is_object());
  CHECK(winner["tournament"]["index"] == d.day.tournament_winner_index);
  CHECK(winner["tournament"]["count"] == 3);
  CHECK(winner["tournament"]["id"] == d.day.tournament_id);
  CHECK(winner["command"].get<std::string>().starts_with("pip install numpy==1.26.4"));
  REQUIRE(loser.is_object());
  CHECK(loser["tournament"]["won"] == false);

  // Lanes: named after the workspace or tournament of their nodes.
  std::string names;
  for (const auto& [lane, name] : t["lane_names"].items()) names += name.get<std::string>() + "\n";
  INFO(names);
  CHECK(names.find("workspace " + d.day.fork) != std::string::npos);
  CHECK(names.find("tournament " + d.day.tournament_id + " #" + std::to_string(d.day.tournament_winner_index + 1)) !=
        std::string::npos);
  CHECK(winner["lane"] != 0);

  // Jumps: the rollback, from the node HEAD was at to its target, with the
  // commands it undid; then the tournament's winner applied.
  json rollback, apply;
  for (const auto& j : t["jumps"]) {
    if (j["kind"] == "restore") rollback = j;
    if (j["kind"] == "tournament_apply") apply = j;
  }
  REQUIRE(rollback.is_object());
  CHECK(rollback["from"].get<std::string>().starts_with(d.day.rollback_from));
  CHECK(rollback["to"].get<std::string>().starts_with(d.day.rollback_target));
  CHECK(rollback.contains("from_ns"));
  CHECK(rollback.contains("to_ns"));
  REQUIRE(rollback.contains("undid"));
  for (const auto& cmd : d.day.undone_commands) CHECK(Contains(rollback["undid"], cmd));
  REQUIRE(apply.is_object());
  CHECK(apply["to"] == winner["id"]);
  CHECK(apply["tournament"] == d.day.tournament_id);

  // A range without the rollback has no jump.
  const std::string early = "&from=" + std::to_string(kDay) + "&to=" + std::to_string(kDay + int64_t(3600) * 1000000000);
  json morning = json::parse(d.client->Get("/api/timeline?max_nodes=5000" + early)->body);
  CHECK(morning["jumps"].empty());
}

TEST_CASE("web: a restore's dry run leads with counts per directory and the packages it undoes, and compare lists the "
          "nodes between with their provenance",
          "[web]") {
  Day d(200);
  json t = json::parse(d.client->Get("/api/timeline?max_nodes=5000")->body);
  const std::string first = t["nodes"][0]["id"];  // before the day's first apt install
  auto dry = d.client->Post("/api/restore", {{"Authorization", "Bearer " + kToken}},
                            json{{"ref", first}, {"dry_run", true}}.dump(), "application/json");
  REQUIRE(dry);
  REQUIRE(dry->status == 200);
  json plan = json::parse(dry->body);
  INFO(plan.dump().substr(0, 2000));
  REQUIRE(!plan["dirs"].empty());
  // Most changed first, and they add up.
  uint64_t sum = 0, last = UINT64_MAX;
  for (const auto& x : plan["dirs"]) {
    CHECK(x["total"].get<uint64_t>() <= last);
    last = x["total"];
    sum += x["total"].get<uint64_t>();
  }
  CHECK(sum == plan["counted"]);
  bool jq_removed = false;
  for (const auto& p : plan["packages"]) jq_removed |= p["name"] == "jq" && p["op"] == "-";
  CHECK(jq_removed);

  // Compare HEAD~6..HEAD: the six nodes after HEAD~6 on HEAD's line.
  auto cmp = d.client->Get("/api/compare?from=HEAD~6&to=HEAD");
  REQUIRE(cmp);
  REQUIRE(cmp->status == 200);
  json c = json::parse(cmp->body);
  CHECK(c["related"] == true);
  CHECK(c["nodes"].size() == 6);
  CHECK(c["nodes"][0]["id"] == t["head"]);
  for (const auto& n : c["nodes"]) CHECK(n.contains("kind"));
  CHECK(c.contains("packages"));
  CHECK(c["diff"].contains("changes"));
  CHECK(d.client->Get("/api/compare?from=HEAD")->status == 400);
}

TEST_CASE("web: on a listener that wants the token the page trades it once for an HttpOnly SameSite Strict "
          "session cookie that reads and the event stream carry, and a forged or expired one is refused",
          "[web]") {
  Day d(40, kToken);
  // The page and its scripts load without anything; the data does not.
  CHECK(d.Status("/") == 200);
  CHECK(d.Status("/static/app.js") == 200);
  CHECK(d.Status("/api/timeline") == 401);
  CHECK(d.Status("/api/events") == 401);

  // The exchange wants the token itself.
  auto refused = d.client->Post("/api/session", "{}", "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 401);
  CHECK(!refused->has_header("Set-Cookie"));
  auto made = d.client->Post("/api/session", {{"Authorization", "Bearer " + kToken}}, "{}", "application/json");
  REQUIRE(made);
  REQUIRE(made->status == 200);
  const std::string set = made->get_header_value("Set-Cookie");
  INFO(set);
  const std::string name = "agentenv_dvr_" + std::to_string(d.http->port());
  REQUIRE(set.starts_with(name + "="));
  CHECK(set.find("; HttpOnly") != std::string::npos);
  CHECK(set.find("; SameSite=Strict") != std::string::npos);
  CHECK(set.find("; Path=/") != std::string::npos);
  CHECK(set.find("Secure") == std::string::npos);  // plain HTTP
  const std::string cookie = set.substr(0, set.find(';'));
  CHECK(d.dvr->sessions().size() == 1);

  // Behind TLS (the page's origin is https): Secure.
  auto tls = d.client->Post("/api/session", {{"Authorization", "Bearer " + kToken}, {"Origin", "https://dvr.example.com"}},
                            "{}", "application/json");
  REQUIRE(tls);
  CHECK(tls->get_header_value("Set-Cookie").find("; Secure") != std::string::npos);

  // The cookie carries reads and the event stream.
  const httplib::Headers with = {{"Cookie", "other=1; " + cookie}};
  CHECK(d.Status("/api/timeline", with) == 200);
  CHECK(d.Status("/api/node?ref=HEAD", with) == 200);
  std::string events;
  auto stream = d.client->Get("/api/events", with, [&](const char* data, size_t n) {
    events.append(data, n);
    return events.find("event: hello") == std::string::npos;  // enough once it said hello
  });
  CHECK(events.find("event: hello") != std::string::npos);
  // Not actions: they want the token itself.
  auto action = d.client->Post("/api/tag", with, json{{"ref", "HEAD"}, {"name", "x"}}.dump(), "application/json");
  REQUIRE(action);
  CHECK(action->status == 401);

  // Forged: a value of the right shape the server never made, or another
  // name; refused.
  CHECK(d.Status("/api/timeline", {{"Cookie", name + "=" + std::string(32, 'a')}}) == 401);
  CHECK(d.Status("/api/timeline", {{"Cookie", "session=" + cookie.substr(cookie.find('=') + 1)}}) == 401);
  // Expired: 12 h later by the sessions' clock.
  CHECK(d.Status("/api/timeline", with) == 200);
  d.skew_s = 12 * 3600 + 1;
  CHECK(d.Status("/api/timeline", with) == 401);
}

TEST_CASE("web: sessions end after their lifetime, at most 256 live at once, the oldest ending first", "[web]") {
  web::SessionStore::Clock::time_point now{};
  web::SessionStore store(std::chrono::hours(1), [&] { return now; });
  CHECK(!store.Open(""));  // a session stands for a token
  auto brief = store.Open(kToken);
  REQUIRE(brief);
  now += std::chrono::minutes(59);
  CHECK(store.TokenOf("agentenv_dvr_1=" + *brief) == kToken);
  now += std::chrono::minutes(2);
  CHECK(store.TokenOf("agentenv_dvr_1=" + *brief).empty());  // past its hour
  CHECK(store.size() == 0);
  auto first = store.Open(kToken);
  REQUIRE(first);
  CHECK(store.TokenOf("agentenv_dvr_1=" + *first) == kToken);
  CHECK(store.TokenOf("agentenv_dvr_1=" + *first + "x").empty());
  CHECK(store.TokenOf(*first).empty());  // not under a name of ours
  for (size_t i = 0; i < web::SessionStore::kMaxSessions; ++i) {
    now += std::chrono::seconds(1);
    REQUIRE(store.Open(kToken));
  }
  CHECK(store.size() == web::SessionStore::kMaxSessions);
  CHECK(store.TokenOf("agentenv_dvr_1=" + *first).empty());
  CHECK(store.SetCookie("[::1]:8080", "v", false) ==
        "agentenv_dvr_8080=v; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600");
}

}  // namespace agentenv::test
