// Writes the seed inputs of the binary formats with the encoders that
// write them in a repository (make_seeds.py writes the archives, layouts
// and text inputs): `fuzz_seeds DIR` fills DIR/tree, DIR/node,
// DIR/manifest, DIR/meta_rows, DIR/provenance, DIR/pack and DIR/init_message. Deterministic: the same bytes
// on every run, so the committed corpus can be remade and compared.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/init_message.h"
#include "runner/setup.h"
#include "snap/meta_internal.h"
#include "snap/node.h"
#include "snap/oplog.h"
#include "snap/provenance.h"
#include "snap/tree.h"
#include "store/codec.h"
#include "store/inspect.h"
#include "store/manifest.h"

namespace {

using namespace agentenv;

std::string out_dir;

void Put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(out_dir + "/" + target);
  std::ofstream f(out_dir + "/" + target + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

store::ObjectId Id(std::string_view of) { return store::ObjectId::Of(Bytes(of)); }

snap::Tree SampleTree() {
  snap::Tree t;
  snap::Entry dir{"bin", snap::Kind::kDir, {0755, 0, 0, 1795176000000000001, {}}};
  dir.id = Id("tree bin");
  t.push_back(dir);
  snap::Entry blk{"disk", snap::Kind::kBlock, {0660, 0, 6, -1500000000, {}}};
  blk.rdev = (8u << 8) | 1;
  t.push_back(blk);
  snap::Entry file{"file", snap::Kind::kFile, {0644, 1000, 1000, 1795176000123456789,
                                               {{"security.capability", std::string("\x01\x00\x00\x02", 4)},
                                                {"user.kind", "name"}}}};
  file.size = 5;
  file.id = Id("hello");
  t.push_back(file);
  t.push_back({"hard", snap::Kind::kHardlink, {}, 0, {}, store::ObjectType::kChunk, "file"});
  snap::Entry big{"large", snap::Kind::kFile, {04755, 0, 0, 0, {}}};
  big.size = 10 << 20;
  big.id = Id("manifest");
  big.content = store::ObjectType::kManifest;
  t.push_back(big);
  t.push_back({"link", snap::Kind::kSymlink, {0777, 0, 0, 7, {}}, 0, {}, store::ObjectType::kChunk, "../etc/hostname"});
  t.push_back({"pipe", snap::Kind::kFifo, {0600, 0, 0, 0, {}}});
  t.push_back({"sock", snap::Kind::kSocket, {0755, 0, 0, 0, {}}});
  snap::Entry tty{"tty", snap::Kind::kChar, {0620, 0, 5, 0, {}}};
  tty.rdev = (4u << 8) | 1;
  t.push_back(tty);
  return t;
}

void Trees() {
  Put("tree", "empty", snap::EncodeTree({}));
  Put("tree", "kinds", snap::EncodeTree(SampleTree()));
  snap::Tree one = {{"a", snap::Kind::kFile, {0600, 0, 0, 1, {}}, 0, Id(""), store::ObjectType::kChunk}};
  Put("tree", "one-empty-file", snap::EncodeTree(one));
}

void Nodes() {
  snap::Node root;
  root.tree = Id("root tree");
  root.root = {0755, 0, 0, 1795176000000000000, {{"user.x", "y"}}};
  root.time_ns = 1795176000000000000;
  root.message = "init";
  root.label = "+3 etc/…";
  root.changes = snap::Summarize(std::vector<snap::Change>{{'+', "etc", true}, {'+', "etc/app.conf", false}});
  root.files = 1;
  root.logical_bytes = 10;
  Put("node", "root", snap::EncodeNode(root));
  snap::Node child = root;
  child.parent = Id("root node");
  child.message = "";
  child.label = "exec: apt-get install -y jq";
  child.changes = snap::Summarize(std::vector<snap::Change>{{'M', "etc/app.conf", false}, {'-', "tmp/x", false}});
  child.links = {{"usr/bin/b", "usr/bin/a"}};
  Put("node", "child", snap::EncodeNode(child));
}

void Manifests() {
  std::vector<store::ManifestEntry> chunks = {{Id("c1"), 65536}, {Id("c2"), 1000}, {Id("c3"), 1}};
  Put("manifest", "three", store::EncodeManifest(chunks));
  Put("manifest", "empty", store::EncodeManifest({}));
}

snap::Provenance SampleProvenance() {
  snap::Provenance p;
  p.kind = snap::ProvenanceKind::kTournament;
  p.argv = {"/bin/sh", "-c", "cd app && make test"};
  p.cwd = "/srv/app";
  p.outcome.exit_code = 2;
  p.outcome.duration_ms = 1234;
  p.workspace = "t1a2b3c-2";
  p.base = Id("base");
  p.tournament = snap::TournamentRole{"t1a2b3c", 1, 3, 1, false};
  p.who = {snap::Origin::kMcp, "claude-code", "session-1"};
  p.message = "try the fix";
  snap::Thinned& t = p.thinned.emplace();
  t.nodes = 12;
  t.kinds = {{snap::ProvenanceKind::kCapture, 8}, {snap::ProvenanceKind::kExec, 4}};
  t.failed = 1;
  t.first_ns = 1795176000000000000;
  t.last_ns = 1795176060000000000;
  t.commands = {"make (exit 2)", "ls"};
  return p;
}

void Provenances() {
  auto row = [](uint8_t kind, std::vector<uint8_t> b) {
    b.insert(b.begin(), kind);
    return b;
  };
  Put("provenance", "tournament", row(0, snap::EncodeProvenance(SampleProvenance())));
  snap::Provenance partial;
  partial.kind = snap::ProvenanceKind::kPartialRestore;
  partial.restore.emplace().source = Id("source");
  partial.restore->paths = {"etc/hosts", "srv/app"};
  partial.restore->paths_omitted = 3;
  partial.who.origin = snap::Origin::kWeb;
  partial.unknown_fields = {{40, {7, 8}}};
  Put("provenance", "partial-restore", row(0, snap::EncodeProvenance(partial)));
  snap::Operation op;
  op.kind = snap::OpKind::kTournamentApply;
  op.from = Id("from");
  op.to = Id("to");
  op.saved = Id("saved");
  op.who = {snap::Origin::kSocket, "ctl", ""};
  op.tournament = "t1a2b3c";
  Put("provenance", "operation", row(1, snap::EncodeOperation(op)));
}

void MetaRows() {
  using namespace snap::meta_internal;
  auto row = [](uint8_t kind, std::vector<uint8_t> b) {
    b.insert(b.begin(), kind);
    return b;
  };
  snap::NodeRecord r;
  r.seq = 7;
  r.time_ns = 1795176000000000000;
  r.parent = Id("parent");
  r.tree = Id("tree");
  r.changes = 3;
  r.title = "installed jq";
  Put("meta_rows", "node", row(0, EncodeRecord(r)));
  r.parent.reset();
  r.flags = snap::NodeRecord::kDamaged | snap::NodeRecord::kPinned;
  r.damage = "file usr/bin/x: object 1234 is missing (and 3 more)";
  Put("meta_rows", "node-damaged", row(0, EncodeRecord(r)));
  r.flags = snap::NodeRecord::kTitleRendered;
  r.damage.clear();
  r.provenance = SampleProvenance();
  r.unknown_sections = {{9, {1, 2, 3}}};
  Put("meta_rows", "node-provenance", row(0, EncodeRecord(r)));
  snap::StatEntry s;
  s.dev = 2049, s.ino = 1234567, s.size = 4096, s.mtime_ns = 1795176000000000000, s.ctime_ns = -1;
  s.mode = 0100644, s.uid = 1000, s.gid = 1000;
  s.xattrs = {{"user.agentenv.owner", "0:0"}};
  s.ref = {Id("content"), store::ObjectType::kManifest, 4096};
  Put("meta_rows", "stat", row(1, EncodeStat(s)));
  snap::EntryStat e;
  e.dev = 2049, e.ino = 99, e.mode = 0120777, e.target = "../lib/libc.so.6";
  Put("meta_rows", "entry-symlink", row(2, EncodeEntry(e)));
  e.mode = 040755, e.target.clear(), e.tree = Id("dir tree"), e.tree_removals = 12;
  Put("meta_rows", "entry-dir", row(2, EncodeEntry(e)));
  uint64_t count = 3 | kPendingBit;
  std::vector<uint8_t> c(8);
  std::memcpy(c.data(), &count, 8);
  Put("meta_rows", "count-pending", row(3, c));
}

void Record(std::vector<uint8_t>& pack, store::ObjectType type, const std::vector<uint8_t>& content, int level) {
  store::Encoded enc = store::Encode(content, level);
  const std::vector<uint8_t>& payload = enc.codec == store::Codec::kRaw ? content : enc.bytes;
  store::RecordHeader h{type, enc.codec, content.size(), payload.size(), store::ObjectId::Of(content)};
  auto head = store::EncodeRecordHeader(h);
  pack.insert(pack.end(), head.begin(), head.end());
  pack.insert(pack.end(), payload.begin(), payload.end());
  pack.resize((pack.size() + 7) / 8 * 8);  // the next header's alignment
}

void Packs() {
  std::vector<uint8_t> pack;
  Record(pack, store::ObjectType::kChunk, Bytes("hello\n"), 3);
  Record(pack, store::ObjectType::kChunk, std::vector<uint8_t>(3000, 'z'), 3);  // zstd
  Record(pack, store::ObjectType::kTree, snap::EncodeTree(SampleTree()), 3);
  Put("pack", "three-records", pack);
  std::vector<uint8_t> damaged = pack;
  damaged[70] ^= 0x40;  // inside the first payload: a record that does not verify
  damaged.insert(damaged.begin() + 64 + 8, 16, 0);  // a shifted record: damage, then resync
  Put("pack", "damaged", damaged);
}

// An env's init (an overlay workspace's plan, network denied, a bind) and
// a spawned command's helper, as Env::Start and Env::Spawn write them.
void InitMessages() {
  using namespace runner::internal;
  runner::EnvSpec spec;
  spec.root = "/var/lib/agentenv/work/current";
  spec.overlay = runner::Overlay{"/var/lib/agentenv/lowers/ab12", "/var/lib/agentenv/workspaces/a/upper",
                                 "/var/lib/agentenv/workspaces/a/work"};
  spec.network = runner::Network::kDeny;
  spec.binds.push_back({"/run/agentenv.sock", "/run/agentenv.sock"});
  InitMessage env;
  env.argv = {"/bin/sh", "-c", "make test"};
  env.env = {"PATH=/usr/bin:/bin", "HOME=/root"};
  env.in = 5, env.out = 6, env.err = 7, env.report = 9, env.status = 11;
  env.plan = Plan(spec);
  env.kept = {11, 12};
  env.tied = true;
  Put("init_message", "env", Bytes(EncodeInitMessage(env)));
  InitMessage join;
  join.mode = InitMessage::Mode::kJoin;
  join.argv = {"sleep", "5"};
  join.report = 8;
  join.ns = {{0x10000000, 20}, {0x20000, 21}, {0x20000000, 22}};
  join.procs = {23, 24};
  join.cwd = "/root";
  Put("init_message", "join", Bytes(EncodeInitMessage(join)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR (e.g. fuzz/corpus)\n");
    return 2;
  }
  out_dir = argv[1];
  Trees();
  Nodes();
  Manifests();
  MetaRows();
  Provenances();
  Packs();
  InitMessages();
  return 0;
}
