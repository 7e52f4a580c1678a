// Provenance (snap/provenance.h): the section's bytes against fixed
// vectors, computed by a separate encoder of the documented layout
// (docs/meta-format.md, "Tag 2, provenance"), not by printing what the
// encoder writes; unknown fields and kinds of a newer writer; bounds and
// hostile bytes; titles rendered from it; and nodes made with it in a real
// repository.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "snap/provenance.h"
#include "snap/repo.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::Provenance;
using snap::ProvenanceKind;
using store::ObjectId;

std::string Hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

std::vector<uint8_t> Unhex(const std::string& h) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(uint8_t(std::stoul(h.substr(i, 2), nullptr, 16)));
  return b;
}

ObjectId Filled(uint8_t v) {
  ObjectId id;
  id.bytes.fill(v);
  return id;
}

std::string Id(const char* v) {
  std::string s;
  for (int i = 0; i < 32; ++i) s += v;
  return s;
}

Provenance Exec() {
  Provenance p;
  p.kind = ProvenanceKind::kExec;
  p.argv = {"make", "test"};
  p.cwd = "/src";
  p.outcome.exit_code = 2;
  p.outcome.duration_ms = 1500;
  p.workspace = "ws";
  p.who = {snap::Origin::kMcp, "claude", "s1"};
  return p;
}
const std::string kExecHex = "010104"            // kind 4, exec
                             "02046d616b65"      // arg "make"
                             "020474657374"      // arg "test"
                             "05042f737263"      // cwd "/src"
                             "060104"            // exit code 2, zigzag
                             "0902dc0b"          // duration 1500 ms
                             "0a027773"          // workspace "ws"
                             "0e0103"            // origin 3, mcp
                             "0f06636c61756465"  // client "claude"
                             "10027331";         // session "s1"

Provenance Candidate() {
  Provenance p;
  p.kind = ProvenanceKind::kTournament;
  p.line = "cd app && fix";
  p.base = Filled(0x11);
  p.tournament = snap::TournamentRole{"t1a2b3c", 1, 3, 0, true};
  p.restore.emplace();
  p.restore->source = Filled(0x22);
  p.restore->paths = {"a", "b"};
  p.restore->paths_omitted = 1;
  snap::Thinned& t = p.thinned.emplace();
  t.nodes = 3;
  t.kinds = {{ProvenanceKind::kCapture, 2}, {ProvenanceKind::kExec, 1}};
  t.failed = 1;
  t.first_ns = 1000;
  t.last_ns = 2000;
  t.commands = {"make (exit 2)"};
  p.unknown_fields = {{40, {0x07, 0x08}}};  // a newer writer's field
  return p;
}
const std::string kCandidateHex =
    "010109"                                         // kind 9, tournament
    "030d636420617070202626206669" "78"              // line "cd app && fix"
    "0b20" + Id("11") +                              // base
    "0c15" "010774316132623363" "020101" "030103"    // tournament: id, index 1, count 3,
    "040100" "050101"                                //   test exit 0, won
    "0d2b" "0120" + Id("22") +                       // restore: source,
    "030161" "030162" "040101"                       //   paths "a" "b", 1 omitted
    "1325" "010103" "0202" "0202" "0202" "0401"      // thinned: 3 nodes, 2 capture, 1 exec,
    "030101" "0402d00f" "0502a01f"                   //   1 failed, first 1000, last 2000,
    "060d6d616b65202865786974203229"                 //   "make (exit 2)"
    "28020708";                                      // field 40, kept as it was

TEST_CASE("provenance: exact bytes both ways, unknown fields kept", "[provenance]") {
  for (const auto& [p, hex] : {std::pair{Exec(), kExecHex}, std::pair{Candidate(), kCandidateHex}}) {
    INFO(snap::KindName(p.kind));
    CHECK(Hex(snap::EncodeProvenance(p)) == hex);
    auto d = snap::DecodeProvenance(Unhex(hex), "sample");
    REQUIRE(d);
    CHECK(*d == p);
  }
  // The empty provenance is the empty section; it decodes as kUnknown.
  CHECK(snap::EncodeProvenance({}).empty());
  auto empty = snap::DecodeProvenance({}, "empty");
  REQUIRE(empty);
  CHECK(empty->kind == ProvenanceKind::kUnknown);
}

TEST_CASE("provenance: a kind or origin of a newer writer reads as unknown and is kept", "[provenance]") {
  auto d = snap::DecodeProvenance(Unhex("0102e807" "0e0163"), "newer");  // kind 1000, origin 99
  REQUIRE(d);
  CHECK(snap::KindName(d->kind) == "unknown");
  CHECK_FALSE(snap::KnownKind(d->kind));
  CHECK(snap::OriginName(d->who.origin) == "unknown");
  CHECK(Hex(snap::EncodeProvenance(*d)) == "0102e807" "0e0163");
  // Names both ways.
  for (uint32_t k = 1; k <= 12; ++k) {
    auto kind = ProvenanceKind(k);
    CHECK(snap::KnownKind(kind));
    CHECK(snap::KindFromName(snap::KindName(kind)) == kind);
  }
  CHECK(snap::KindName(ProvenanceKind::kPartialRestore) == "partial_restore");
  CHECK_FALSE(snap::KindFromName("exe"));
  CHECK(snap::OriginFromName("mcp") == snap::Origin::kMcp);
}

TEST_CASE("provenance: truncated and hostile bytes are refused with kCorrupt", "[provenance]") {
  const std::vector<uint8_t> good = Unhex(kCandidateHex);
  // Every cut that falls inside a field.
  size_t refused = 0;
  for (size_t n = 1; n < good.size(); ++n) {
    auto d = snap::DecodeProvenance(std::span(good.data(), n), "cut");
    if (!d) {
      CHECK(d.error().code == ErrorCode::kCorrupt);
      ++refused;
    }
  }
  CHECK(refused >= good.size() - 8);  // only the cuts between top-level fields decode
  auto refuse = [](const std::string& hex, const char* why) {
    INFO(why);
    auto d = snap::DecodeProvenance(Unhex(hex), "hostile");
    REQUIRE_FALSE(d);
    CHECK(d.error().code == ErrorCode::kCorrupt);
    CHECK(d.error().message.find("hostile: bad provenance") == 0);
  };
  refuse("01ffffffffffffffffff7f", "a length of 2^64");
  refuse("0105", "a length past the end");
  refuse("010104" "010105", "a singular field twice");
  refuse("01020101", "a varint field with a byte after the value");
  refuse("060a" "feffffffffffffffff01", "an exit code past 32 bits");
  refuse("0b03616263", "an id that is not 32 bytes");
  refuse("0c03050105", "won that is not 0 or 1");  // nested message
  refuse("0101ff", "a varint that does not end");
  // Past the bounds: texts, the argument count, nested lists.
  refuse("05a120" + std::string(4129 * 2, '6'), "a cwd past kMaxText");
  std::string args;
  for (int i = 0; i < 257; ++i) args += "020178";
  refuse(args, "257 arguments");
  std::string paths;
  for (int i = 0; i < 33; ++i) paths += "030178";
  refuse("0d63" + paths, "33 paths");
  std::string cmds;
  for (int i = 0; i < 5; ++i) cmds += "060178";
  refuse("130f" + cmds, "5 thinned commands");
  refuse("1308" "02020201" "02020202", "a kind counted twice");
  // Random bytes: never a crash; what decodes encodes and decodes the same.
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> b(rng() % 64);
    for (auto& c : b) c = uint8_t(rng() % 24);  // small bytes: plausible tags and lengths
    auto d = snap::DecodeProvenance(b, "random");
    if (!d) continue;
    auto again = snap::DecodeProvenance(snap::EncodeProvenance(*d), "again");
    REQUIRE(again);
    CHECK(*again == *d);
  }
}

TEST_CASE("provenance: Bounded cuts to the bounds and the encoder writes only bounded values", "[provenance]") {
  Provenance p;
  p.kind = ProvenanceKind::kExec;
  p.argv = {"sh", "-c", std::string(9000, 'x')};
  p.cwd = std::string(5000, 'c');
  p.message = "é" + std::string(5000, 'm');
  p.restore.emplace().paths = std::vector<std::string>(40, "path");
  snap::Thinned& t = p.thinned.emplace();
  t.commands = std::vector<std::string>(6, std::string(300, 'k'));
  Provenance b = snap::Bounded(p);
  CHECK(b.command_cut);
  REQUIRE(b.argv.size() == 3);
  CHECK(b.argv[0].size() + b.argv[1].size() + b.argv[2].size() == Provenance::kMaxCommandBytes);
  CHECK(b.cwd.size() == Provenance::kMaxText);
  CHECK(b.message.size() <= Provenance::kMaxText);
  CHECK(b.restore->paths.size() == Provenance::kMaxPaths);
  CHECK(b.restore->paths_omitted == 8);
  CHECK(b.thinned->commands.size() == 4);  // 4 x 256 = kMaxThinnedBytes
  for (const auto& c : b.thinned->commands) CHECK(c.size() == Provenance::kMaxThinnedCommand);
  CHECK(snap::Bounded(b) == b);  // idempotent
  auto d = snap::DecodeProvenance(snap::EncodeProvenance(p), "bounded");
  REQUIRE(d);
  CHECK(*d == b);
  // A cut never splits a UTF-8 character.
  CHECK(snap::CutUtf8("aé", 2) == "a");
  CHECK(snap::CutUtf8("aé", 3) == "aé");
}

TEST_CASE("provenance: titles rendered from it", "[provenance]") {
  Provenance p = Exec();
  CHECK(snap::RenderTitle(p, "M x", nullptr) == "exec: make test (exit 2)");
  p.outcome = {0, 0, false, false, false, 10};
  CHECK(snap::RenderTitle(p, "M x", nullptr) == "exec: make test");
  p.argv = {"/bin/sh", "-c", "cd app &&\nmake"};
  p.outcome = {std::nullopt, 9, true, false, false, 0};
  CHECK(snap::RenderTitle(p, "", nullptr) == "exec: cd app && make (signal 9, timed out)");
  p.argv = {"grep", "-r", "it's here", "src dir", ""};
  p.outcome = {};
  p.outcome.cancelled = true;
  CHECK(snap::RenderTitle(p, "", nullptr) == R"(exec: grep -r 'it'\''s here' 'src dir' '' (cancelled))");
  p.command_cut = true;
  CHECK(snap::CommandText(p).ends_with("…"));

  Provenance c = Candidate();
  CHECK(snap::RenderTitle(c, "", nullptr) == "tournament t1a2b3c #2/3 (won): cd app && fix");
  c.tournament->won = false;
  c.tournament->test_exit_code = 1;
  CHECK(snap::RenderTitle(c, "", nullptr) == "tournament t1a2b3c #2/3 (test exit 1): cd app && fix");

  Provenance save;
  save.kind = ProvenanceKind::kSave;
  save.restore.emplace().target = Filled(0x1a);
  CHECK(snap::RenderTitle(save, "M x", nullptr) == "uncommitted changes before restore to 1a1a1a1a1a1a");
  save.restore = snap::RestoreLink{Filled(0x2b), std::nullopt, {"etc"}, 0};
  CHECK(snap::RenderTitle(save, "", nullptr) == "uncommitted changes before restoring paths of 2b2b2b2b2b2b");
  Provenance partial = save;
  partial.kind = ProvenanceKind::kPartialRestore;
  partial.restore->paths = {"etc/hosts", "src"};
  partial.restore->paths_omitted = 2;
  CHECK(snap::RenderTitle(partial, "", nullptr) == "restored etc/hosts, src (+2 more) from 2b2b2b2b2b2b");

  Provenance cap;
  cap.kind = ProvenanceKind::kCapture;
  CHECK(snap::RenderTitle(cap, "+3 src/…", nullptr) == "+3 src/…");
  CHECK(snap::TitleUsesChanges(cap));
  CHECK_FALSE(snap::TitleUsesChanges(Exec()));
  Provenance ws;
  ws.kind = ProvenanceKind::kWorkspace;
  ws.workspace = "feature";
  CHECK(snap::RenderTitle(ws, "M a", nullptr) == "workspace feature: M a");
  Provenance sup;
  sup.kind = ProvenanceKind::kSupervise;
  sup.who.client = "claude-code";
  CHECK(snap::RenderTitle(sup, "M src/main.c", nullptr) == "supervise claude-code: M src/main.c");
  Provenance pull;
  pull.kind = ProvenanceKind::kPull;
  pull.source = "debian:12";
  CHECK(snap::RenderTitle(pull, "+9000 usr/…", nullptr) == "pulled debian:12");

  // Packages lead; a title never passes kMaxTitle bytes.
  snap::PackageDeltas pk;
  pk.items.push_back({snap::Ecosystem::kApt, '+', "jq", "", "1.6-2.1", "", false});
  CHECK(snap::RenderTitle(Exec(), "", &pk) == "apt +jq 1.6-2.1; exec: make test (exit 2)");
  Provenance huge = Exec();
  huge.argv = {std::string(300, 'y')};
  CHECK(snap::RenderTitle(huge, "", &pk).size() == snap::kMaxTitle);
}

TEST_CASE("provenance: a thinned span says what it held", "[provenance]") {
  snap::Thinned t;
  Provenance cap;
  cap.kind = ProvenanceKind::kCapture;
  Provenance ok = Exec();
  ok.outcome.exit_code = 0;
  snap::ThinNode(t, 100, cap);
  snap::ThinNode(t, 200, Exec());
  snap::ThinNode(t, 300, std::nullopt);  // not recorded
  snap::ThinNode(t, 400, ok);
  CHECK(t.nodes == 4);
  CHECK(t.kinds == std::map<ProvenanceKind, uint64_t>{
                       {ProvenanceKind::kUnknown, 1}, {ProvenanceKind::kCapture, 1}, {ProvenanceKind::kExec, 2}});
  CHECK(t.failed == 1);
  CHECK(t.first_ns == 100);
  CHECK(t.last_ns == 400);
  CHECK(t.commands == std::vector<std::string>{"make test (exit 2)", "make test"});
  CHECK(snap::ThinnedText(t) ==
        "4 nodes thinned (1 capture, 2 exec, 1 unknown; 1 failed): make test (exit 2); make test");
  // A dropped node that had absorbed a span itself brings it along; the
  // newest commands are the ones kept.
  snap::Thinned later;
  for (int i = 0; i < 5; ++i) {
    Provenance e = Exec();
    e.argv = {"step" + std::to_string(i)};
    e.outcome.exit_code = 0;
    snap::ThinNode(later, 1000 + i, e);
  }
  Provenance carrier = cap;
  carrier.thinned = t;
  snap::Thinned all;
  snap::ThinNode(all, 500, carrier);
  snap::AppendThinned(all, later);
  CHECK(all.nodes == 10);
  CHECK(all.failed == 1);
  CHECK(all.first_ns == 100);
  CHECK(all.last_ns == 1004);
  CHECK(all.kinds[ProvenanceKind::kExec] == 7);
  CHECK(all.kinds[ProvenanceKind::kCapture] == 2);
  CHECK(all.commands == std::vector<std::string>{"step1", "step2", "step3", "step4"});
}

void Write(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

TEST_CASE("provenance: a node made with it keeps it in its record, titled from it", "[provenance]") {
  TempDir t;
  const std::string root = t.str() + "/r";
  auto made = snap::Repo::Create(root);
  REQUIRE(made);
  auto& repo = *made;
  Write(repo->work_dir() + "/a", "1");
  snap::SnapOptions first;
  first.provenance.emplace().kind = ProvenanceKind::kCapture;
  auto s1 = repo->Snapshot(first);
  REQUIRE(s1);
  REQUIRE(s1->node);
  Write(repo->work_dir() + "/a", "2");
  snap::SnapOptions o;
  o.provenance = Exec();
  auto s2 = repo->Snapshot(o);
  REQUIRE(s2);
  REQUIRE(s2->node);
  CHECK(s2->label == "exec: make test (exit 2)");
  // Without provenance, as before: the change summary.
  Write(repo->work_dir() + "/b", "3");
  auto s3 = repo->Snapshot({});
  REQUIRE(s3);
  REQUIRE(s3->node);
  // A message wins over provenance, and is the provenance's message too;
  // a label given with a provenance is the title, not marked rendered.
  Write(repo->work_dir() + "/b", "4");
  snap::SnapOptions m;
  m.message = "fixed the build";
  m.provenance = Exec();
  auto s4 = repo->Snapshot(m);
  REQUIRE(s4);
  Write(repo->work_dir() + "/b", "5");
  snap::SnapOptions l;
  l.label = "exec: make";
  l.provenance = Exec();
  auto s5 = repo->Snapshot(l);
  REQUIRE(s5);
  repo.reset();  // read back from disk

  auto reopened = snap::Repo::Open(root);
  REQUIRE(reopened);
  auto r1 = (*reopened)->Record(*s1->node);
  REQUIRE(r1);
  REQUIRE(r1->provenance);
  CHECK(r1->provenance->kind == ProvenanceKind::kCapture);
  CHECK(r1->title == "+ a");
  CHECK(r1->flags == snap::NodeRecord::kTitleRendered);
  auto r2 = (*reopened)->Record(*s2->node);
  REQUIRE(r2);
  REQUIRE(r2->provenance);
  CHECK(*r2->provenance == Exec());
  CHECK(r2->title == "exec: make test (exit 2)");
  auto r3 = (*reopened)->Record(*s3->node);
  REQUIRE(r3);
  CHECK_FALSE(r3->provenance);
  CHECK(r3->title == "+ b");
  CHECK(r3->flags == 0);
  auto r4 = (*reopened)->Record(*s4->node);
  REQUIRE(r4);
  CHECK(r4->title == "fixed the build");
  CHECK(r4->provenance->message == "fixed the build");
  CHECK(r4->flags == 0);
  auto r5 = (*reopened)->Record(*s5->node);
  REQUIRE(r5);
  CHECK(r5->title == "exec: make");
  CHECK(r5->flags == 0);
  REQUIRE(r5->provenance);
}

TEST_CASE("provenance: marking a tournament candidate the winner renders its title again", "[provenance]") {
  TempDir t;
  auto repo = *snap::Repo::Create(t.str() + "/r");
  Write(repo->work_dir() + "/f", "candidate");
  Provenance c;
  c.kind = ProvenanceKind::kTournament;
  c.argv = {"/bin/sh", "-c", "cd app && fix"};
  c.tournament = snap::TournamentRole{"t1a2b3c", 1, 3, 0, false};
  c.outcome.exit_code = 0;
  snap::SnapOptions o;
  o.provenance = c;
  auto s = repo->Snapshot(o);
  REQUIRE(s);
  REQUIRE(s->node);
  CHECK(s->label == "tournament t1a2b3c #2/3: cd app && fix");
  auto rec = repo->EditProvenance(*s->node, [](Provenance& p) { p.tournament->won = true; });
  REQUIRE(rec);
  CHECK(rec->title == "tournament t1a2b3c #2/3 (won): cd app && fix");
  auto stored = repo->Record(*s->node);
  REQUIRE(stored);
  CHECK(stored->title == rec->title);
  CHECK(stored->provenance->tournament->won);
  // A kind whose title shows the changes is summarized again against the parent.
  Provenance cap;
  cap.kind = ProvenanceKind::kWorkspace;
  cap.workspace = "feature";
  auto set = repo->SetProvenance(*s->node, cap);
  REQUIRE(set);
  CHECK(set->title == "workspace feature: + f");
  // A node without provenance gains one; its title keeps its words.
  Write(repo->work_dir() + "/g", "x");
  auto plain = repo->Snapshot({});
  REQUIRE(plain);
  auto edited = repo->EditProvenance(*plain->node, [](Provenance& p) { p.kind = ProvenanceKind::kSnapshot; });
  REQUIRE(edited);
  CHECK(edited->title == "+ g");
  CHECK(edited->provenance->kind == ProvenanceKind::kSnapshot);
  auto missing = repo->EditProvenance(Filled(0x42), [](Provenance&) {});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
}

TEST_CASE("provenance: a restore's saved node and a partial restore's node say what they belong to", "[provenance]") {
  TempDir t;
  auto repo = *snap::Repo::Create(t.str() + "/r");
  const std::string w = repo->work_dir();
  Write(w + "/a", "1");
  Write(w + "/b", "1");
  auto base = repo->Snapshot({});
  REQUIRE(base);
  Write(w + "/a", "2");
  auto second = repo->Snapshot({});
  REQUIRE(second);
  Write(w + "/b", "unsaved");
  snap::OpOptions op;
  op.who = {snap::Origin::kMcp, "claude", "s9"};
  auto restored = repo->Restore(base->node->Hex(), std::nullopt, snap::RestoreMode::kInPlace, op);
  REQUIRE(restored);
  REQUIRE(restored->saved);
  auto saved = repo->Record(*restored->saved);
  REQUIRE(saved);
  CHECK(saved->title == "uncommitted changes before restore to " + base->node->Hex().substr(0, 12));
  REQUIRE(saved->provenance);
  CHECK(saved->provenance->kind == ProvenanceKind::kSave);
  CHECK(saved->provenance->restore->target == *base->node);
  CHECK(saved->provenance->who == op.who);

  auto partial = repo->RestorePaths(second->node->Hex(), {"a"}, std::nullopt, op);
  REQUIRE(partial);
  auto rec = repo->Record(partial->node);
  REQUIRE(rec);
  CHECK(rec->title == "restored a from " + second->node->Hex().substr(0, 12));
  REQUIRE(rec->provenance);
  CHECK(rec->provenance->kind == ProvenanceKind::kPartialRestore);
  CHECK(rec->provenance->restore->source == *second->node);
  CHECK(rec->provenance->restore->paths == std::vector<std::string>{"a"});
  CHECK(rec->flags == snap::NodeRecord::kTitleRendered);
}

TEST_CASE("provenance: seed and import record what they read", "[provenance]") {
  TempDir t;
  const std::string src = t.str() + "/src";
  std::filesystem::create_directories(src + "/etc");
  Write(src + "/etc/os-release", "ID=debian\n");
  auto repo = *snap::Repo::Create(t.str() + "/r");
  Provenance init;
  init.kind = ProvenanceKind::kInit;
  init.source = src;
  init.who.origin = snap::Origin::kCli;
  auto seeded = repo->Seed(src, "", init);
  REQUIRE(seeded);
  auto rec = repo->Record(*seeded->node);
  REQUIRE(rec);
  CHECK(rec->title == "init from " + src);
  CHECK(rec->provenance->who.origin == snap::Origin::kCli);
  Provenance imp;
  imp.kind = ProvenanceKind::kImport;
  imp.source = "backup.tar";
  auto imported = repo->Import(src, "", imp);
  REQUIRE(imported);
  rec = repo->Record(*imported->node);
  REQUIRE(rec);
  CHECK(rec->title == "imported backup.tar");
  CHECK(rec->provenance->kind == ProvenanceKind::kImport);
  // A message is the title, as without provenance.
  auto named = repo->Import(src, "the backup", imp);
  REQUIRE(named);
  CHECK(repo->Record(*named->node)->title == "the backup");
}

}  // namespace
}  // namespace agentenv::test
