// web/: the web DVR's JSON endpoints over a real repository, on a real
// loopback listener: the timeline's paging and buckets, the token every
// action needs (and that a refused one changes nothing), a cross-origin
// POST, path traversal in the file routes, and the bounded event queue.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <filesystem>
#include <fstream>

#include "control/archive.h"
#include "control/open_repo.h"
#include "control/ops.h"
#include "serve/http.h"
#include "snap/layout.h"
#include "snap_testutil.h"
#include "web/dvr_routes.h"

namespace agentenv::test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
const std::string kToken = "0123456789abcdef0123456789abcdef";

// A repository made by init, its server, and the DVR on a loopback
// listener without a listener token (reads are open, as on loopback).
struct Dvr {
  TempDir tmp;
  std::string root = tmp.str() + "/repo";
  std::unique_ptr<control::Server> server;
  std::unique_ptr<web::Dvr> dvr;
  std::unique_ptr<serve::HttpServer> http;
  std::unique_ptr<httplib::Client> client;

  Dvr() {
    fs::create_directories(tmp.str() + "/src/etc");
    REQUIRE(WriteFileAt(tmp.str() + "/src/etc/app.conf", "mode=good\n"));
    control::InitRequest init;
    init.from = tmp.str() + "/src";
    REQUIRE(control::Init(root, init));
    auto repo = control::OpenRepo(root);
    REQUIRE(repo);
    server = std::make_unique<control::Server>(std::move(*repo));
    dvr = std::make_unique<web::Dvr>(*server, web::DvrOptions{root, kToken});
    auto h = serve::HttpServer::Start({}, {dvr->Routes()});
    REQUIRE(h);
    http = std::move(*h);
    client = std::make_unique<httplib::Client>("127.0.0.1", http->port());
  }
  ~Dvr() {
    dvr->Stop();
    http->Stop();
  }
  std::string work() const { return snap::layout::Work(root); }
  // Writes `content` to the live tree's etc/app.conf and snapshots it.
  std::string Snap(const std::string& content, const std::string& message) {
    REQUIRE(WriteFileAt(work() + "/etc/app.conf", content));
    control::SnapshotRequest r;
    r.message = message;
    auto rep = control::Op<control::SnapshotRequest>::Run(*server, r, {});
    REQUIRE(rep);
    REQUIRE(rep->node);
    return rep->node->id;
  }
  json Get(const std::string& path, int want = 200) {
    INFO(path);
    auto res = client->Get(path);
    REQUIRE(res);
    INFO(res->status << " " << res->body);
    REQUIRE(res->status == want);
    return json::parse(res->body, nullptr, false);
  }
  httplib::Result Post(const std::string& path, const json& body, const httplib::Headers& headers) {
    return client->Post(path, headers, body.dump(), "application/json");
  }
  std::string Head() {
    auto h = control::Op<control::HeadRequest>::Run(*server, {}, {});
    REQUIRE(h);
    return h->node.id;
  }
  std::string Live() {
    std::ifstream f(work() + "/etc/app.conf");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
};

const httplib::Headers kAuth = {{"Authorization", "Bearer " + kToken}};

TEST_CASE("web: the timeline lists the nodes of a range, or buckets them when there are more", "[web]") {
  Dvr d;
  // More than a poll's page (64): the first request still sees them all.
  for (int i = 0; i < 70; ++i) d.Snap("mode=" + std::to_string(i) + "\n", "step " + std::to_string(i));
  json all = d.Get("/api/timeline?max_nodes=100");
  REQUIRE(all["total"] == 71);
  REQUIRE(all["nodes"].size() == 71);
  CHECK(all["nodes"].back()["head"] == true);
  CHECK(all["nodes"].back()["title"] == "step 69");
  CHECK(all["nodes"].back()["changes"] == 1);
  CHECK(all["nodes"][1]["parent"] == all["nodes"][0]["id"]);

  json b = d.Get("/api/timeline?max_nodes=10&buckets=4");
  REQUIRE(b.contains("buckets"));
  REQUIRE(!b.contains("nodes"));
  CHECK(b["buckets"].size() <= 4);
  uint64_t sum = 0;
  for (const auto& x : b["buckets"]) sum += x["count"].get<uint64_t>();
  CHECK(sum == 71);
  CHECK(b["buckets"].back()["head"] == true);

  // A range: only the nodes inside it, with how many lie before and after.
  int64_t from = all["nodes"][10]["time_ns"], to = all["nodes"][19]["time_ns"];
  json part = d.Get("/api/timeline?max_nodes=100&from=" + std::to_string(from) + "&to=" + std::to_string(to));
  CHECK(part["in_range"] == 10);
  CHECK(part["nodes"].front()["id"] == all["nodes"][10]["id"]);
  CHECK(part["before"] == 10);
  CHECK(part["after"] == 51);
  d.Get("/api/timeline?from=yesterday", 400);

  // Nodes retention dropped show as a gap before the next kept node.
  control::RetainRequest keep;
  keep.keep_last = 3;
  keep.keep_within_s = 0;
  auto retained = control::Op<control::RetainRequest>::Run(*d.server, keep, {});
  REQUIRE(retained);
  REQUIRE(!retained->dropped.empty());
  json thin = d.Get("/api/timeline?max_nodes=100");
  CHECK(thin["total"] == 71 - retained->dropped.size());
  uint64_t thinned = 0;
  for (const auto& n : thin["nodes"]) thinned += n.value("thinned", 0);
  CHECK(thinned == retained->dropped.size());
}

TEST_CASE("web: a node shows its changes and the text diff, and files are read from the store", "[web]") {
  Dvr d;
  std::string old_node = d.Snap("mode=old\n", "old");
  std::string new_node = d.Snap("mode=new\n", "new");
  json node = d.Get("/api/node?ref=" + new_node);
  CHECK(node["show"]["node"]["parent"] == old_node);
  REQUIRE(node["diff"]["changes"].size() == 1);
  CHECK(node["diff"]["changes"][0]["path"] == "etc/app.conf");
  json patch = d.Get("/api/diff?from=" + old_node + "&to=" + new_node + "&path=etc/app.conf&patch=1");
  REQUIRE(patch["patches"].size() == 1);
  CHECK(patch["patches"][0]["diff"].get<std::string>().find("-mode=old\n+mode=new") != std::string::npos);

  json ls = d.Get("/api/ls?ref=" + old_node + "&path=etc");
  REQUIRE(ls["entries"].size() == 1);
  CHECK(ls["entries"][0]["name"] == "app.conf");
  auto cat = d.client->Get("/api/cat?ref=" + old_node + "&path=etc/app.conf");
  REQUIRE(cat);
  CHECK(cat->status == 200);
  CHECK(cat->body == "mode=old\n");
  auto cut = d.client->Get("/api/cat?ref=" + old_node + "&path=etc/app.conf&max=4");
  REQUIRE(cut);
  CHECK(cut->body == "mode");
  CHECK(d.Get("/api/cat?ref=" + old_node + "&path=etc/none", 404)["error"].get<std::string>().find("etc/none") == 0);
  d.Get("/api/cat?ref=" + old_node + "&path=etc", 400);
  d.Get("/api/node?ref=nosuchtag", 404);
}

TEST_CASE("web: file routes refuse paths that leave the node, and the page serves only its own files", "[web]") {
  Dvr d;
  for (const char* p : {"../../etc/passwd", "etc/../../..", "./etc", "etc/%00x", "..", "etc/.."}) {
    INFO(p);
    d.Get(std::string("/api/cat?ref=HEAD&path=") + p, 400);
    d.Get(std::string("/api/ls?ref=HEAD&path=") + p, 400);
    d.Get(std::string("/api/diff?from=HEAD&to=HEAD&path=") + p, 400);
  }
  auto page = d.client->Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->get_header_value("Content-Security-Policy").find("frame-ancestors 'none'") != std::string::npos);
  CHECK(d.client->Get("/static/app.js")->status == 200);
  for (const char* p : {"/static/../../etc/passwd", "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/static/nope.js",
                        "/static/index.html"}) {
    auto res = d.client->Get(p);
    INFO(p);
    REQUIRE(res);
    // An escaped path is refused by the listener before any route (400).
    CHECK(res->status == (std::string(p).find('%') == std::string::npos ? 404 : 400));
    CHECK(res->body.find("root:") == std::string::npos);
  }
}

TEST_CASE("web: actions need the token, also on loopback, and a refused one changes nothing", "[web]") {
  Dvr d;
  std::string good = d.Snap("mode=good\n", "good");
  std::string bad = d.Snap("mode=bad\n", "bad");
  const json restore = {{"ref", good}};
  for (const auto& headers : {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer wrong"}},
                              httplib::Headers{{"Authorization", "Basic " + kToken}}}) {
    for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
             {"/api/restore", restore}, {"/api/tag", {{"name", "t1"}, {"ref", good}}},
             {"/api/fork", {{"ref", good}, {"name", "ws1"}}}, {"/api/export", {{"ref", good}}}}) {
      auto res = d.Post(path, body, headers);
      REQUIRE(res);
      INFO(path);
      CHECK(res->status == 401);
    }
  }
  CHECK(d.Head() == bad);
  CHECK(d.Live() == "mode=bad\n");
  auto tags = control::Op<control::TagRequest>::Run(*d.server, {}, {});
  REQUIRE(tags);
  CHECK(tags->tags.value_or(std::vector<control::TagEntry>{}).empty());
  auto ws = control::Op<control::WorkspacesRequest>::Run(*d.server, {}, {});
  REQUIRE(ws);
  CHECK(ws->workspaces.empty());

  // A form post (what a page of another site can send) carries no such
  // header, and with one a form type is still refused.
  auto form = d.client->Post("/api/restore", kAuth, "ref=" + good, "application/x-www-form-urlencoded");
  REQUIRE(form);
  CHECK(form->status == 415);

  // The dry run says what would change, and changes nothing.
  auto dry = d.Post("/api/restore", {{"ref", good}, {"dry_run", true}}, kAuth);
  REQUIRE(dry);
  REQUIRE(dry->status == 200);
  json plan = json::parse(dry->body);
  CHECK(plan["total"] == 1);
  CHECK(plan["changes"][0]["path"] == "etc/app.conf");
  // It leads with the counts per top directory.
  REQUIRE(plan["dirs"].size() == 1);
  CHECK(plan["dirs"][0]["dir"] == "etc");
  CHECK(plan["dirs"][0]["modified"] == 1);
  CHECK(plan["counted"] == 1);
  CHECK(d.Live() == "mode=bad\n");

  auto done = d.Post("/api/restore", restore, kAuth);
  REQUIRE(done);
  CHECK(done->status == 200);
  CHECK(d.Live() == "mode=good\n");
  auto tagged = d.Post("/api/tag", {{"name", "t1"}, {"ref", good}}, kAuth);
  REQUIRE(tagged);
  CHECK(tagged->status == 200);
  CHECK(d.Get("/api/timeline")["tags"][0]["names"] == "t1");
}

TEST_CASE("web: the environments are listed as env ls lists them: endpoint, last node, disk", "[web][envs]") {
  Dvr d;
  const std::string head = d.Head();
  control::ForkRequest fork;
  fork.name = "agent-a";
  REQUIRE(control::Op<control::ForkRequest>::Run(*d.server, fork, {}));
  json envs = d.Get("/api/envs")["environments"];
  INFO(envs.dump());
  REQUIRE(envs.size() == 2);
  CHECK(envs[0]["name"] == "");
  CHECK(envs[0]["endpoint"] == "/mcp");
  CHECK(envs[0]["last"] == head);
  CHECK(envs[1]["name"] == "agent-a");
  CHECK(envs[1]["endpoint"] == "/w/agent-a/mcp");
  CHECK(envs[1]["base"] == head);
  CHECK(envs[1]["disk_bytes"].is_number());
  // The page has the view.
  auto page = d.client->Get("/static/envs.js");
  REQUIRE(page);
  CHECK(page->status == 200);
}

TEST_CASE("web: a cross-origin POST is refused before any route runs", "[web]") {
  Dvr d;
  std::string good = d.Snap("mode=good\n", "good");
  d.Snap("mode=bad\n", "bad");
  httplib::Headers h = kAuth;
  h.emplace("Origin", "https://evil.example");
  auto res = d.Post("/api/restore", {{"ref", good}}, h);
  REQUIRE(res);
  CHECK(res->status == 403);
  CHECK(d.Live() == "mode=bad\n");
  // Nor does a page of another site read anything.
  auto read = d.client->Get("/api/timeline", {{"Origin", "https://evil.example"}});
  REQUIRE(read);
  CHECK(read->status == 403);
  CHECK(read->get_header_value("Access-Control-Allow-Origin").empty());
}

TEST_CASE("web: an export streams its tar once through its link, and says how much it sent", "[web]") {
  Dvr d;
  std::string node = d.Snap("mode=export\n", "export me");
  // The dry run leads with counts per directory and package deltas.
  auto dry = d.Post("/api/export", {{"ref", node}, {"dry_run", true}}, kAuth);
  REQUIRE(dry);
  REQUIRE(dry->status == 200);
  json summary = json::parse(dry->body);
  CHECK(summary.contains("dirs"));
  CHECK(summary.contains("packages"));
  auto res = d.Post("/api/export", {{"ref", node}}, kAuth);
  REQUIRE(res);
  REQUIRE(res->status == 200);
  json rep = json::parse(res->body);
  std::string link = rep["download"];
  CHECK(d.Get(rep["progress"].get<std::string>())["started"] == false);
  auto tar = d.client->Get(link);
  REQUIRE(tar);
  CHECK(tar->status == 200);
  REQUIRE(tar->body.size() >= 1024);
  CHECK(tar->body.size() % 512 == 0);
  CHECK(tar->body.substr(257, 5) == "ustar");  // a pax/ustar header
  CHECK(tar->body.find("etc/app.conf") != std::string::npos);
  CHECK(tar->body.find("mode=export") != std::string::npos);
  json progress = d.Get(rep["progress"].get<std::string>());
  CHECK(progress["done"] == true);
  CHECK(progress["sent"] == tar->body.size());
  CHECK(d.client->Get(link)->status == 404);
  CHECK(d.client->Get("/api/export/00000000000000000000000000000000")->status == 404);
}

TEST_CASE("web: a listener that falls behind holds one resync, not every event", "[web]") {
  web::Listener l;
  for (size_t i = 0; i < web::kMaxQueued * 3; ++i) l.Push(web::EventHub::Sse("nodes", {{"i", i}}));
  CHECK(l.queued() <= web::kMaxQueued);
  auto events = l.Take(0);
  bool resync = false;
  for (const auto& e : events) resync |= e.starts_with("event: resync");
  CHECK(resync);
  CHECK(l.queued() == 0);
}

}  // namespace
}  // namespace agentenv::test
