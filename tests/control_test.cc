// control/: operations called in process, without the agentenv binary.
// The op table's schemas against the typed requests, strict argument
// checking, the JSON entry against the typed one, routing without a
// daemon, a rollback that drains the capture, and the frame encodings.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <atomic>
#include <thread>

#include "control/archive.h"
#include "control/client.h"
#include "control/errors.h"
#include "common/text.h"
#include "control/frames.h"
#include "control/open_repo.h"
#include "control/ops.h"
#include "control/tokens.h"
#include "common/read_all.h"
#include "workspace/workspace.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

using control::json;

// The keys a Fields list names.
struct KeyList {
  std::set<std::string> keys;
  template <class T>
  void operator()(const char* key, T&, unsigned = 0) { keys.insert(key); }
};
template <class Req>
std::set<std::string> KeysOf() {
  Req r{};
  KeyList k;
  r.Fields(k);
  return k.keys;
}
std::set<std::string> SchemaKeys(const std::string& op) {
  const control::OpSpec* spec = control::FindOp(op);
  REQUIRE(spec);
  std::set<std::string> keys;
  for (const auto& [k, v] : spec->input_schema["properties"].items()) keys.insert(k);
  return keys;
}

// A repository made by init from a small tree.
struct Repo {
  TempDir tmp;
  std::string root = tmp.str() + "/repo";
  Repo() {
    std::filesystem::create_directories(tmp.str() + "/src/etc");
    std::filesystem::create_directories(tmp.str() + "/src/bin");
    REQUIRE(WriteFileAt(tmp.str() + "/src/etc/app.conf", "mode=good\n"));
    REQUIRE(WriteFileAt(tmp.str() + "/src/bin/tool", "#!/bin/sh\n", 0755));
    control::InitRequest init;
    init.from = tmp.str() + "/src";
    auto r = control::Init(root, init);
    REQUIRE(r);
  }
  std::string work() const { return snap::layout::Work(root); }
};

TEST_CASE("control: every op has a schema listing exactly its request's fields, and every schema an op", "[control]") {
  std::set<std::string> typed, described;
  control::ForEachOp([&]<class Req>() {
    std::string name(control::Op<Req>::kName);
    INFO(name);
    typed.insert(name);
    CHECK(SchemaKeys(name) == KeysOf<Req>());
  });
  for (const control::OpSpec& op : control::Ops()) described.insert(op.name);
  CHECK(typed == described);
  CHECK(typed.size() >= 25);
  // Aliases name the same operation.
  CHECK(control::FindOp("commit") == control::FindOp("snapshot"));
  CHECK(control::FindOp("checkout") == control::FindOp("rollback"));
  CHECK(control::FindOp("nope") == nullptr);
}

TEST_CASE("control: unknown and wrongly typed arguments are refused by name, nothing runs", "[control]") {
  Repo repo;
  control::Client client(repo.root);
  auto server = client.Local();
  REQUIRE(server);
  // MCP once ignored "timeout" (the key is timeout_s) and ran unbounded.
  auto r = control::CallJson(**server, "exec", {{"argv", {"/bin/true"}}, {"timeout", 1}}, nullptr);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kInvalid);
  CHECK(r.error().message.find("unknown argument 'timeout'") != std::string::npos);
  CHECK(r.error().message.find("timeout_s") != std::string::npos);  // the known keys are listed

  // A timeout beyond what milliseconds hold is refused, not converted.
  for (double t : {1e300, -1.0}) {
    r = control::CallJson(**server, "exec", {{"argv", {"/bin/true"}}, {"timeout_s", t}}, nullptr);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalid);
    CHECK(r.error().message.find("'timeout_s' must be a number of seconds from 0 to 1e9") != std::string::npos);
  }

  r = control::CallJson(**server, "log", {{"limit", "ten"}}, nullptr);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kInvalid);
  CHECK(r.error().message.find("'limit'") != std::string::npos);

  r = control::CallJson(**server, "snapshot", json::array(), nullptr);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kInvalid);

  r = control::CallJson(**server, "frobnicate", json::object(), nullptr);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("unknown op 'frobnicate'") != std::string::npos);

  // Nothing above made a node.
  auto log = (*server)->Log({});
  REQUIRE(log);
  CHECK(log->nodes.size() == 1);
}

TEST_CASE("control: the JSON entry and the typed call give the same reply", "[control]") {
  Repo repo;
  control::Client client(repo.root);
  REQUIRE(WriteFileAt(repo.work() + "/etc/app.conf", "mode=broken\n"));
  control::SnapshotRequest snap;
  snap.message = "broke it";
  auto typed = client.Call(snap);  // no daemon: runs here
  REQUIRE(typed);
  REQUIRE(typed->created);
  REQUIRE(typed->node);
  CHECK(typed->node->title == "broke it");
  CHECK(typed->modified == 1);

  auto server = client.Local();
  REQUIRE(server);
  auto log_json = control::CallJson(**server, "log", {{"limit", 5}}, nullptr);
  REQUIRE(log_json);
  auto log_typed = (*server)->Log({5});
  REQUIRE(log_typed);
  CHECK(*log_json == control::ToJson(*log_typed));
  REQUIRE(log_typed->nodes.size() == 2);
  CHECK(log_typed->nodes[0].head);
  CHECK((*log_json)["nodes"][0]["short"] == typed->node->short_id);

  // A reply read back from JSON (as a client of a daemon does) is the same.
  auto back = control::ReadReply<control::LogReply>("log", *log_json);
  REQUIRE(back);
  CHECK(control::ToJson(*back) == *log_json);
  auto show = (*server)->Show({"HEAD"});
  REQUIRE(show);
  auto show_back = control::ReadReply<control::ShowReply>("show", control::ToJson(*show));
  REQUIRE(show_back);
  CHECK(control::ToJson(*show_back) == control::ToJson(*show));
  REQUIRE(show->details);
  CHECK(show->details->message == "broke it");

  // Rollback through the alias, typed reply fields as the CLI prints them.
  auto rb = control::CallJson(**server, "restore", {{"ref", "HEAD~1"}}, nullptr);
  REQUIRE(rb);
  CHECK((*rb)["files_written"] == 1);
  CHECK((*rb)["saved"].is_null());
  CHECK(ReadFileAt(repo.work() + "/etc/app.conf") == "mode=good\n");
}

TEST_CASE("control: a rollback drains the running capture first, no full scan", "[control]") {
  Repo repo;
  auto opened = control::OpenRepo(repo.root);
  REQUIRE(opened);
  control::Server server(std::move(*opened));
  auto head = server.Head({});
  REQUIRE(head);
  // A long quiet period: only the drain can snapshot the change in time.
  REQUIRE(server.StartCapture({60000, 600000}));
  REQUIRE(WriteFileAt(repo.work() + "/etc/uncommitted", "not yet captured"));
  auto rb = server.Rollback({head->node.id});
  REQUIRE(rb);
  // The journal's change became the capture's node, not a save by scan.
  CHECK_FALSE(rb->saved);
  CHECK_FALSE(std::filesystem::exists(repo.work() + "/etc/uncommitted"));
  auto log = server.Log({});
  REQUIRE(log);
  REQUIRE(log->nodes.size() == 2);
  CHECK(log->nodes[0].node.title.find("etc/uncommitted") != std::string::npos);
  server.StopCapture(true);
}

TEST_CASE("control: status and diff against the live tree run here without a daemon", "[control]") {
  Repo repo;
  control::Client client(repo.root);
  REQUIRE(WriteFileAt(repo.work() + "/new.txt", "x"));
  auto st = client.Call(control::StatusRequest{});
  REQUIRE(st);
  CHECK(st->dirty);
  CHECK(st->changed == 1);
  control::DiffRequest d;
  auto diff = client.Call(d);
  REQUIRE(diff);
  REQUIRE(diff->changes.size() == 1);
  CHECK(diff->changes[0].op == "+");
  CHECK(diff->changes[0].path == "new.txt");
  CHECK_FALSE(diff->truncated);
  // A bad ref is kNotFound and changes nothing.
  auto bad = client.Call(control::RollbackRequest{"no-such-node"});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ErrorCode::kNotFound);
  CHECK(ReadFileAt(repo.work() + "/new.txt") == "x");
}

TEST_CASE("control: a root that is no repository fails each call clearly", "[control]") {
  TempDir tmp;
  control::Client client(tmp.str() + "/none");
  auto r = client.Call(control::LogRequest{});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kNotFound);
  CHECK(r.error().message.find("not an agentenv repository") != std::string::npos);
}

TEST_CASE("control: errors travel with their code and the partial flag", "[control]") {
  Error e{"the command ran (exit 0) but its snapshot failed: disk full", 0, ErrorCode::kIo};
  e.partial = true;
  Error back = control::ErrorFromJson(control::ErrorJson(e));
  CHECK(back.message == e.message);
  CHECK(back.code == ErrorCode::kIo);
  CHECK(back.partial);
  for (ErrorCode c : {ErrorCode::kIo, ErrorCode::kInvalid, ErrorCode::kNotFound, ErrorCode::kExists,
                      ErrorCode::kBusy, ErrorCode::kCorrupt, ErrorCode::kUnsupported})
    CHECK(control::ErrorCodeNamed(control::ErrorCodeName(c)) == c);
  CHECK(control::ErrorCodeNamed("something new") == ErrorCode::kIo);
}

TEST_CASE("control: base64 matches RFC 4648's vectors and refuses what is not base64", "[control]") {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}, {std::string("\xff\xfe\x00\x01", 4), "//4AAQ=="}};
  for (const auto& [raw, enc] : vectors) {
    CHECK(Base64Encode(raw) == enc);
    auto dec = Base64Decode(enc);
    REQUIRE(dec);
    CHECK(*dec == raw);
  }
  for (const char* bad : {"Zg=", "Z===", "Zm9v\n", "Zm 9", "Zg==Zg==", "=Zg="}) CHECK_FALSE(Base64Decode(bad));
  bool tail = false;
  CHECK(Utf8Prefix("h\xc3\xa9llo", &tail) == 6);
  CHECK(Utf8Prefix("ab\xe2\x82", &tail) == 2);
  CHECK(tail);  // a character split by a read
  CHECK(Utf8Prefix("ab\xff", &tail) == 2);
  CHECK_FALSE(tail);
}

}  // namespace
}  // namespace agentenv::test

namespace agentenv::test {

// Looking at whether a workspace is busy (workspace ls, a tournament's
// sweep of killed tournaments' workspaces) tests its lock without taking
// it: a command that wants the workspace meanwhile never meets "busy".
TEST_CASE("control: a look at a workspace's lock never makes it busy for a command", "[control][workspace]") {
  Repo repo;
  control::Client client(repo.root);
  control::ForkRequest fork;
  fork.ref = "HEAD";
  fork.name = "w";
  REQUIRE(client.Call(fork));
  auto ws = workspace::LoadWorkspace(repo.root, "w");
  REQUIRE(ws);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> looks{0};
  std::thread looker([&] {
    while (!stop) {
      (void)workspace::WorkspaceBusy(*ws);
      ++looks;
    }
  });
  int busy = 0;
  for (int i = 0; i < 3000; ++i) {
    auto lock = workspace::LockWorkspace(*ws, "test");
    if (!lock) ++busy;
  }
  stop = true;
  looker.join();
  CHECK(looks > 100);
  CHECK(busy == 0);
  // Held, it is busy to a look and to a command, which is told who holds it.
  auto held = workspace::LockWorkspace(*ws, "exec: make test");
  REQUIRE(held);
  CHECK(workspace::WorkspaceBusy(*ws));
  auto second = workspace::LockWorkspace(*ws, "another");
  REQUIRE_FALSE(second);
  CHECK(second.error().code == ErrorCode::kBusy);
  CHECK(second.error().message.find("exec: make test (pid ") != std::string::npos);
}

TEST_CASE("control: a token is found by its secret until it expires or is revoked, by that secret only", "[control][token]") {
  TempDir tmp;
  const int64_t hour = int64_t{3600} * 1000000000;
  auto made = control::CreateToken(tmp.path().string(), "a", false, 1000 + hour);
  REQUIRE(made);
  const auto& [token, secret] = *made;
  auto tokens = control::LoadTokens(tmp.path().string());
  REQUIRE(tokens);
  REQUIRE(tokens->size() == 1);
  CHECK(control::FindToken(*tokens, secret, 1000)->id == token.id);
  CHECK(control::FindToken(*tokens, secret, 1000 + hour - 1));
  CHECK(!control::FindToken(*tokens, secret, 1000 + hour));  // expired
  std::string other = secret;
  other.back() = other.back() == '0' ? '1' : '0';
  CHECK(!control::FindToken(*tokens, other, 1000));
  CHECK(!control::FindToken(*tokens, "", 1000));
  auto revoked = control::RevokeToken(tmp.path().string(), token.id);
  REQUIRE(revoked);
  CHECK(*revoked);
  CHECK(control::LoadTokens(tmp.path().string())->empty());
}

// The lease `holder` names, if any.
std::optional<store::ObjectId> LeaseOf(snap::Repo& repo, const std::string& holder) {
  auto leases = repo.NodeLeases();
  REQUIRE(leases);
  for (const auto& [h, id] : *leases)
    if (h == holder) return id;
  return std::nullopt;
}

TEST_CASE("workspace: a reset is one switch: killed before it the workspace is as it was, after it the next command finishes it", "[control][workspace]") {
  Repo r;
  auto repo = snap::Repo::Open(r.root);
  REQUIRE(repo);
  const store::ObjectId first = *(*repo)->Resolve("HEAD");
  REQUIRE(WriteFileAt(r.work() + "/etc/app.conf", "mode=second\n"));
  REQUIRE((*repo)->Snapshot({}));
  const store::ObjectId second = *(*repo)->Resolve("HEAD");
  REQUIRE(second != first);
  auto second_lower = (*repo)->LeaseLower(second);
  REQUIRE(second_lower);
  auto made = workspace::CreateWorkspace(**repo, "w", second, second_lower->dir());
  REQUIRE(made);
  workspace::Workspace ws = *made;
  REQUIRE(WriteFileAt(ws.upper() + "/mine", "unsaved\n"));
  auto first_lower = (*repo)->LeaseLower(first);
  REQUIRE(first_lower);

  SECTION("killed before the switch: the next pair and the next lease are dropped, the state is untouched") {
    std::filesystem::create_directories(ws.dir + "/upper.1/etc");
    std::filesystem::create_directories(ws.dir + "/work.1");
    REQUIRE((*repo)->LeaseNode(workspace::NextLease(ws), first));
    auto now = workspace::LoadWorkspace(r.root, "w");
    REQUIRE(now);
    CHECK(now->generation == 0);
    CHECK(now->base == second);
    auto mine = ReadFileUpTo(now->upper() + "/mine", 4096);
    REQUIRE(mine);
    CHECK(*mine == "unsaved\n");
    auto released = workspace::ReleaseOrphanLeases(**repo);
    REQUIRE(released);
    CHECK(*released == 1);
    CHECK(!LeaseOf(**repo, workspace::NextLease(ws)));
    CHECK(LeaseOf(**repo, ws.lease) == second);
    REQUIRE(workspace::DropStaleDirectories(*now));
    CHECK(!std::filesystem::exists(ws.dir + "/upper.1"));
    CHECK(!std::filesystem::exists(ws.dir + "/work.1"));
    CHECK(std::filesystem::exists(ws.dir + "/upper/mine"));
  }
  SECTION("a whole reset, then one killed after its switch: the lease moves to the new base, the old pair goes") {
    REQUIRE(workspace::ResetWorkspace(**repo, ws, first, first_lower->dir()));
    CHECK(ws.generation == 1);
    auto now = workspace::LoadWorkspace(r.root, "w");
    REQUIRE(now);
    CHECK(now->generation == 1);
    CHECK(now->base == first);
    CHECK(now->head == first);
    CHECK(now->lower == first_lower->dir());
    CHECK(now->upper() == ws.dir + "/upper.1");
    CHECK(std::filesystem::is_empty(now->upper()));
    CHECK(!std::filesystem::exists(ws.dir + "/upper"));
    CHECK(!std::filesystem::exists(ws.dir + "/work"));
    CHECK(LeaseOf(**repo, ws.lease) == first);
    CHECK(!LeaseOf(**repo, workspace::NextLease(ws)));
    // As a kill right after the next switch would leave it: the state at
    // generation 2 and `second`, the lease still on the old base, the next
    // lease on the new one, the old pair in place.
    workspace::Workspace next = *now;
    next.generation = 2;
    next.base = next.head = second;
    next.lower = second_lower->dir();
    std::filesystem::create_directories(next.upper());
    std::filesystem::create_directories(next.work());
    REQUIRE((*repo)->LeaseNode(workspace::NextLease(ws), second));
    REQUIRE(workspace::SaveWorkspace(next));
    auto released = workspace::ReleaseOrphanLeases(**repo);
    REQUIRE(released);
    CHECK(*released == 1);
    CHECK(LeaseOf(**repo, ws.lease) == second);
    CHECK(!LeaseOf(**repo, workspace::NextLease(ws)));
    REQUIRE(workspace::DropStaleDirectories(next));
    CHECK(!std::filesystem::exists(ws.dir + "/upper.1"));
    CHECK(!std::filesystem::exists(ws.dir + "/work.1"));
    CHECK(std::filesystem::exists(next.upper()));
  }
}

}  // namespace agentenv::test
