// Nodes as OCI images: export writes a layout that tools no one here wrote
// (skopeo, umoci, a real Distribution registry) accept and unpack to the
// same tree; init --from-oci and import --oci read their layouts, applying
// whiteouts and opaque directories as they do, and refuse hostile or
// damaged images without recording anything.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "cli_testutil.h"
#include "oci_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

std::string ManifestDigest(const fs::path& layout) {
  json index = json::parse(ReadFile(layout / "index.json"));
  return index["manifests"][0]["digest"];
}

TEST_CASE("cli oci: the same node exports to the same digests in every layers mode", "[cli][oci]") {
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  for (const char* mode : {"squash", "path", "full"}) {
    INFO(mode);
    fs::path a = tmp / (std::string("a-") + mode), b = tmp / (std::string("b-") + mode);
    json ja = AgentenvJson(root, {"export", "HEAD", "--oci", a.string(), "--layers", mode});
    json jb = AgentenvJson(root, {"export", "HEAD", "--oci", b.string(), "--layers", mode});
    CHECK(ja["manifest"] == jb["manifest"]);
    CHECK(ManifestDigest(a) == ja["manifest"]);
    CHECK(ja["layers"] == (std::string(mode) == "squash" ? 1 : 3));  // path: depth 2 < 16
  }
  // Diff layers carry the deletions as whiteouts.
  json full = AgentenvJson(root, {"export", "HEAD", "--oci", (tmp / "again").string(), "--layers", "full"});
  CHECK(full["whiteouts"].get<int>() >= 3);
  // A second tag in the same layout keeps the first.
  MustAgentenv(root, {"export", "HEAD~1", "--oci", (tmp / "again").string(), "--tag", "older"});
  json index = json::parse(ReadFile(tmp / "again/index.json"));
  CHECK(index["manifests"].size() == 2);
  // Entries of another tool's index whose annotations are not what we
  // write stay as they are.
  index["manifests"].push_back({{"mediaType", "x"}, {"annotations", "not an object"}});
  index["manifests"].push_back({{"mediaType", "y"}, {"annotations", {{"org.opencontainers.image.ref.name", 7}}}});
  WriteFile(tmp / "again/index.json", index.dump());
  MustAgentenv(root, {"export", "HEAD", "--oci", (tmp / "again").string(), "--tag", "older"});
  index = json::parse(ReadFile(tmp / "again/index.json"));
  CHECK(index["manifests"].size() == 4);
  int code = 0;
  json bad = AgentenvJson(root, {"export", "HEAD", "--oci", (tmp / "x").string(), "--layers", "many"}, &code);
  CHECK(code == 2);
  CHECK(bad["error"]["message"].get<std::string>().find("--layers many") != std::string::npos);
}

TEST_CASE("cli oci: export then init --from-oci or import --oci gives the same tree, fsck clean", "[cli][oci]") {
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  Manifest want = FullManifest(Work(root));
  for (const char* mode : {"squash", "full"}) {
    INFO(mode);
    fs::path layout = tmp / (std::string("l-") + mode), other = tmp / (std::string("r-") + mode);
    MustAgentenv(root, {"export", "HEAD", "--oci", layout.string(), "--layers", mode, "--tag", "v1"});
    MustAgentenv(other, {"init", "--from-oci", layout.string() + ":v1"});
    CHECK(ManifestDiff(want, FullManifest(Work(other))) == "");
    CHECK(Agentenv(other, {"fsck"}).code == 0);
  }
  // import --oci records it as a new node of an existing repository.
  json imported = AgentenvJson(root, {"import", "--oci", (tmp / "l-full").string()});
  REQUIRE(imported["ok"] == true);
  MustAgentenv(root, {"restore", imported["node"]});
  CHECK(ManifestDiff(want, FullManifest(Work(root))) == "");
  CHECK(Agentenv(root, {"fsck"}).code == 0);
}

TEST_CASE("cli oci: init --from-oci of an image carrying the path from the root rebuilds the same nodes", "[cli][oci]") {
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  fs::path layout = tmp / "layout";
  MustAgentenv(root, {"export", "HEAD", "--oci", layout.string(), "--layers", "full"});
  fs::path other = tmp / "other";
  MustAgentenv(other, {"init", "--from-oci", layout.string()});
  json want = AgentenvJson(root, {"log"})["nodes"];
  REQUIRE(want.size() == 3);
  CHECK(AgentenvJson(other, {"log"})["nodes"] == want);
  CHECK(HeadId(other) == HeadId(root));
  CHECK(Agentenv(other, {"fsck"}).code == 0);
  // A squashed image has no chain: one node, the tree alone.
  MustAgentenv(root, {"export", "HEAD", "--oci", (tmp / "squashed").string(), "--layers", "squash"});
  MustAgentenv(tmp / "third", {"init", "--from-oci", (tmp / "squashed").string()});
  CHECK(AgentenvJson(tmp / "third", {"log"})["nodes"].size() == 1);
  CHECK(ManifestDiff(TreeManifest(Work(root)), TreeManifest(Work(tmp / "third"))) == "");
}

TEST_CASE("cli oci: skopeo copies our layout and umoci unpacks it to the same tree, as root", "[cli][oci][interop]") {
  if (!IsRoot()) Skip("umoci unpack keeps owners and modes only as root");
  NeedProgram("/usr/bin/skopeo", "skopeo");
  NeedProgram("/usr/bin/umoci", "umoci");
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  Manifest want = TreeManifest(Work(root));
  for (const char* mode : {"squash", "path", "full"}) {
    INFO(mode);
    fs::path layout = tmp / (std::string("l-") + mode);
    MustAgentenv(root, {"export", "HEAD", "--oci", layout.string(), "--layers", mode});
    fs::path copied = tmp / (std::string("copied-") + mode);
    MustRun({"/usr/bin/skopeo", "copy", "oci:" + layout.string() + ":latest", "oci:" + copied.string() + ":c"});
    fs::path bundle = tmp / (std::string("bundle-") + mode);
    MustRun({"/usr/bin/umoci", "unpack", "--image", copied.string() + ":c", bundle.string()});
    CHECK(ManifestDiff(want, TreeManifest(bundle / "rootfs")) == "");
  }
}

// What umoci makes: an image built by unpack, change, repack (gzip layers,
// whiteouts for deletions), read by init --from-oci as umoci reads it.
TEST_CASE("cli oci: init --from-oci of an image umoci built gives the tree umoci unpacks, as root", "[cli][oci][interop]") {
  if (!IsRoot()) Skip("umoci unpack keeps owners and modes only as root");
  NeedProgram("/usr/bin/umoci", "umoci");
  TempDir tmp;
  fs::path layout = tmp / "umoci", b = tmp / "bundle";
  MustRun({"/usr/bin/umoci", "init", "--layout", layout.string()});
  MustRun({"/usr/bin/umoci", "new", "--image", layout.string() + ":t"});
  MustRun({"/usr/bin/umoci", "unpack", "--image", layout.string() + ":t", b.string()});
  fs::create_directories(b / "rootfs/srv/data");
  WriteFile(b / "rootfs/srv/data/one", "1\n");
  WriteFile(b / "rootfs/srv/data/two", "2\n");
  WriteFile(b / "rootfs/top", "top\n");
  MustRun({"/usr/bin/umoci", "repack", "--image", layout.string() + ":t", b.string()});
  fs::remove_all(b);
  MustRun({"/usr/bin/umoci", "unpack", "--image", layout.string() + ":t", b.string()});
  fs::remove(b / "rootfs/srv/data/one");
  fs::remove(b / "rootfs/top");
  WriteFile(b / "rootfs/srv/three", "3\n");
  MustRun({"/usr/bin/umoci", "repack", "--image", layout.string() + ":t", b.string()});
  fs::remove_all(b);
  MustRun({"/usr/bin/umoci", "unpack", "--image", layout.string() + ":t", b.string()});
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from-oci", layout.string() + ":t"});
  CHECK(!fs::exists(Work(root) / "top"));
  CHECK(ReadFile(Work(root) / "srv/data/two") == "2\n");
  CHECK(ManifestDiff(TreeManifest(b / "rootfs"), TreeManifest(Work(root))) == "");
}

// Layers written byte by byte: whiteouts, an opaque directory, a file
// replaced by a directory and the other way round.
TEST_CASE("cli oci: whiteouts and opaque directories apply as umoci applies them", "[cli][oci][interop]") {
  TempDir tmp;
  WriteTar(tmp / "l1.tar", {{"a/", '5'}, {"a/x", '0', "", "x"}, {"a/y", '0', "", "y"}, {"b/", '5'},
                            {"b/z", '0', "", "z"}, {"b/sub/", '5'}, {"b/sub/w", '0', "", "w"}, {"c", '0', "", "c"},
                            {"d/", '5'}, {"d/e", '0', "", "e"}});
  WriteTar(tmp / "l2.tar", {{"a/.wh.x", '0'}, {"b/", '5'}, {"b/new", '0', "", "new"}, {"b/.wh..wh..opq", '0'},
                            {"c/", '5'}, {"c/f", '0', "", "f"}, {"d", '0', "", "now a file"}});
  fs::path layout = tmp / "layout";
  MakeLayout(layout, {tmp / "l1.tar", tmp / "l2.tar"});
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from-oci", layout.string() + ":t"});
  fs::path w = Work(root);
  CHECK(!fs::exists(w / "a/x"));
  CHECK(ReadFile(w / "a/y") == "y");
  CHECK(!fs::exists(w / "b/z"));
  CHECK(!fs::exists(w / "b/sub"));
  CHECK(ReadFile(w / "b/new") == "new");
  CHECK(ReadFile(w / "c/f") == "f");
  CHECK(ReadFile(w / "d") == "now a file");
  CHECK(!fs::exists(w / "a/.wh.x"));
  CHECK(!fs::exists(w / "b/.wh..wh..opq"));
  if (!IsRoot()) Skip("the comparison with umoci unpack needs root");
  NeedProgram("/usr/bin/umoci", "umoci");
  fs::path b = tmp / "bundle";
  MustRun({"/usr/bin/umoci", "unpack", "--image", layout.string() + ":t", b.string()});
  CHECK(ManifestDiff(TreeManifest(b / "rootfs"), TreeManifest(w)) == "");
}

TEST_CASE("cli oci: init --from-oci and import --oci work unprivileged, refusing hostile layers", "[cli][oci]") {
  if (!IsRoot()) Skip("needs root to switch to uid 65534");
  TempDir tmp;
  REQUIRE(::chmod(tmp.path().c_str(), 0755) == 0);
  fs::path root = MakeHistory(tmp);
  fs::path layout = tmp / "layout";
  MustAgentenv(root, {"export", "HEAD", "--oci", layout.string(), "--layers", "full"});
  fs::path mine = tmp / "mine";
  fs::create_directories(mine);
  REQUIRE(::chown(mine.c_str(), 65534, 65534) == 0);
  auto nobody = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", AGENTENV_BIN});
    args.insert(args.end(), {"--root", (mine / "repo").string()});
    return RunCmd(args);
  };
  CmdResult r = nobody({"init", "--from-oci", layout.string()});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  // Rootless, the layers' owners (root here) are kept in user.agentenv.owner
  // on every file and directory: the rest must be the same.
  Manifest got = TreeManifest(Work(mine / "repo"));
  CHECK(got["etc/hostname"].find(" user.agentenv.owner=0:0") != std::string::npos);
  for (auto& [path, text] : got)
    if (size_t at = text.find(" user.agentenv.owner=0:0"); at != std::string::npos) text.erase(at, 24);
  CHECK(ManifestDiff(TreeManifest(Work(root)), got) == "");
  CHECK(nobody({"fsck"}).code == 0);
  // A whiteout below a symlink to a directory uid 65534 may write.
  fs::create_directories(tmp / "victim");
  WriteFile(tmp / "victim/keep", "keep\n");
  REQUIRE(::chown((tmp / "victim").c_str(), 65534, 65534) == 0);
  REQUIRE(::chown((tmp / "victim/keep").c_str(), 65534, 65534) == 0);
  WriteTar(tmp / "link.tar", {{"s", '2', (tmp / "victim").string()}});
  WriteTar(tmp / "through.tar", {{"s/.wh.keep", '0'}});
  MakeLayout(tmp / "through", {tmp / "link.tar", tmp / "through.tar"});
  std::string log_before = nobody({"log"}).out;
  r = nobody({"import", "--oci", (tmp / "through").string() + ":t"});
  CHECK(r.code == 2);
  CHECK(ReadFile(tmp / "victim/keep") == "keep\n");
  CHECK(nobody({"log"}).out == log_before);
}

TEST_CASE("cli oci: podman runs an image agentenv pushed", "[cli][oci][interop][registry]") {
  if (::access("/usr/bin/podman", X_OK) != 0) Skip("podman is not installed here");
  if (!HaveRegistry()) Skip(std::string(kRegistryBin) + " or curl is not installed (apt-get install docker-registry curl)");
  if (::access("/bin/busybox", X_OK) != 0) Skip("/bin/busybox (busybox-static) is not installed");
  TempDir tmp;
  fs::path src = tmp / "src", root = tmp / "repo";
  fs::create_directories(src / "bin");
  fs::create_directories(src / "etc");
  fs::copy_file("/bin/busybox", src / "bin/busybox");
  fs::create_symlink("busybox", src / "bin/sh");
  fs::create_symlink("busybox", src / "bin/cat");
  WriteFile(src / "etc/greeting", "hello from a node\n");
  MustAgentenv(root, {"init", "--from", src.string()});
  Registry reg(tmp / "registry");
  std::string image = reg.address() + "/agentenv/run:v1";
  MustAgentenv(root, {"push", "HEAD", image, "--insecure"});
  CmdResult r = RunCmd({"/usr/bin/podman", "run", "--rm", "--tls-verify=false", image, "/bin/cat", "/etc/greeting"}, "",
                       300000);
  INFO(r.Describe());
  RunCmd({"/usr/bin/podman", "rmi", "-f", image});  // podman's own storage keeps no trace of the test
  // The image was pulled (that part is ours); running a container needs
  // cgroups and rlimits a sandboxed machine may not grant.
  if (r.code != 0 && (r.err.find("cannot") != std::string::npos || r.err.find("OCI ") != std::string::npos))
    Skip("podman pulled the image but cannot run containers on this machine: " + r.err.substr(r.err.rfind("Error:")));
  CHECK(r.code == 0);
  CHECK(r.out == "hello from a node\n");
}

// Every image below is refused with exit 2 by init (no repository left)
// and by import (no node recorded).
void ExpectRefused(const TempDir& tmp, const fs::path& layout, const std::string& why) {
  INFO(why);
  fs::path fresh = tmp / ("fresh-" + layout.filename().string());
  CmdResult r = Agentenv(fresh, {"init", "--from-oci", layout.string() + ":t"});
  INFO(r.Describe());
  CHECK(r.code == 2);
  CHECK(r.err.find(why) != std::string::npos);
  CHECK(!fs::exists(fresh / "store"));
  fs::path repo = tmp / "repo";
  if (!fs::exists(repo / "store")) {
    fs::create_directories(tmp / "empty");
    MustAgentenv(repo, {"init", "--from", (tmp / "empty").string()});
  }
  std::string head = HeadId(repo);
  std::string log_before = Agentenv(repo, {"log"}).out;
  CmdResult imp = Agentenv(repo, {"import", "--oci", layout.string() + ":t"});
  INFO(imp.Describe());
  CHECK(imp.code == 2);
  CHECK(Agentenv(repo, {"log"}).out == log_before);
  CHECK(HeadId(repo) == head);
}

TEST_CASE("cli oci: export --oci into a full filesystem says ENOSPC, names it and the remedy, and leaves no image",
          "[cli][oci]") {
  if (!IsRoot()) Skip("needs root to mount a size-limited tmpfs");
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  std::vector<uint8_t> big = RandomBytes(4 << 20, 11);  // does not compress, and no layer is compressed anyway
  WriteFile(Work(root) / "big", std::string(big.begin(), big.end()));
  MustAgentenv(root, {"snap", "-m", "big"});
  std::string log_before = Agentenv(root, {"log"}).out;
  SmallTmpfs small(tmp / "mnt", "16m");
  REQUIRE(small.mounted());
  fs::path out = tmp / "mnt" / "image";
  FillUp(tmp / "mnt", 1 << 20);
  CmdResult r = Agentenv(root, {"export", "HEAD", "--oci", out.string()});
  INFO(r.Describe());
  CHECK(r.code == 1);
  CHECK(r.err.find(": No space left on device") != std::string::npos);
  CHECK(r.err.find("Success") == std::string::npos);
  CHECK(r.err.find("the filesystem holding " + out.string() + " is full: free space there, then run the command again") !=
        std::string::npos);
  // No image: no index names one, no partial blob is left; history is as it was.
  CHECK_FALSE(fs::exists(out / "index.json"));
  for (const auto& e : fs::recursive_directory_iterator(out)) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  CHECK(Agentenv(root, {"log"}).out == log_before);
  // With the space back the export completes, and its image is the node.
  fs::remove(tmp / "mnt" / "fill");
  MustAgentenv(root, {"export", "HEAD", "--oci", out.string()});
  MustAgentenv(tmp / "back", {"init", "--from-oci", out.string()});
  CHECK(ManifestDiff(FullManifest(Work(root)), FullManifest(Work(tmp / "back"))) == "");
}

TEST_CASE("cli oci: hostile and damaged images are refused, nothing recorded", "[cli][oci]") {
  TempDir tmp;
  fs::create_directories(tmp / "victim");
  WriteFile(tmp / "victim/keep", "keep\n");
  WriteTar(tmp / "ok.tar", {{"f", '0', "", "fine"}});

  WriteTar(tmp / "dotdot.tar", {{"../escape", '0', "", "x"}});
  MakeLayout(tmp / "dotdot", {tmp / "ok.tar", tmp / "dotdot.tar"});
  ExpectRefused(tmp, tmp / "dotdot", "contains '..'");

  // A whiteout below a symlink a lower layer made must not remove outside.
  WriteTar(tmp / "link.tar", {{"s", '2', (tmp / "victim").string()}});
  WriteTar(tmp / "through.tar", {{"s/.wh.keep", '0'}});
  MakeLayout(tmp / "through", {tmp / "link.tar", tmp / "through.tar"});
  ExpectRefused(tmp, tmp / "through", "not a directory");
  CHECK(ReadFile(tmp / "victim/keep") == "keep\n");
  // Nor may an opaque marker below it empty the directory it points to.
  WriteTar(tmp / "opaque-through.tar", {{"s/.wh..wh..opq", '0'}});
  MakeLayout(tmp / "opaque-through", {tmp / "link.tar", tmp / "opaque-through.tar"});
  ExpectRefused(tmp, tmp / "opaque-through", "not a directory");
  CHECK(ReadFile(tmp / "victim/keep") == "keep\n");

  WriteTar(tmp / "wh-dotdot.tar", {{"a/", '5'}, {"a/.wh...", '0'}});
  MakeLayout(tmp / "wh-dotdot", {tmp / "ok.tar", tmp / "wh-dotdot.tar"});
  ExpectRefused(tmp, tmp / "wh-dotdot", "refusing");

  // A layer whose bytes do not match its digest.
  std::vector<json> layers = MakeLayout(tmp / "mismatch", {tmp / "ok.tar"});
  fs::path blob = tmp / "mismatch/blobs/sha256" / layers[0]["digest"].get<std::string>().substr(7);
  std::string bytes = ReadFile(blob);
  bytes[600] ^= 1;
  WriteFile(blob, bytes);
  ExpectRefused(tmp, tmp / "mismatch", "refusing the image");

  // A manifest naming a blob that is not there.
  layers = MakeLayout(tmp / "missing", {tmp / "ok.tar"});
  fs::remove(tmp / "missing/blobs/sha256" / layers[0]["digest"].get<std::string>().substr(7));
  ExpectRefused(tmp, tmp / "missing", "blob missing");

  // A digest that would name a path outside blobs/.
  MakeLayout(tmp / "pathdigest", {tmp / "ok.tar"});
  json index = json::parse(ReadFile(tmp / "pathdigest/index.json"));
  index["manifests"][0]["digest"] = "sha256:../../../etc/passwd";
  WriteFile(tmp / "pathdigest/index.json", index.dump());
  ExpectRefused(tmp, tmp / "pathdigest", "not sha256:<64 hex digits>");

  // Not a layout, and a tag it does not have.
  CmdResult r = Agentenv(tmp / "n1", {"init", "--from-oci", (tmp / "victim").string()});
  CHECK(r.code == 3);
  CHECK(r.err.find("oci-layout: missing") != std::string::npos);
  r = Agentenv(tmp / "n2", {"init", "--from-oci", (tmp / "dotdot").string() + ":nope"});
  CHECK(r.code == 3);
  CHECK(r.err.find("no image tagged 'nope' (tags: t)") != std::string::npos);
}

TEST_CASE("cli oci: whiteouts that are directories or have entries below them are refused, nothing recorded",
          "[cli][oci]") {
  TempDir tmp;
  WriteTar(tmp / "lower.tar", {{"etc/", '5'}, {"etc/passwd", '0', "", "root\n"}, {"etc/conf.d/", '5'},
                               {"etc/conf.d/a", '0', "", "a\n"}});
  // ".wh.etc/" would remove etc, and its entry would put a directory of
  // that name in the tree: the layer cannot mean both.
  WriteTar(tmp / "whdir.tar", {{".wh.etc/", '5'}, {".wh.etc/file", '0', "", "f\n"}});
  MakeLayout(tmp / "whdir", {tmp / "lower.tar", tmp / "whdir.tar"});
  ExpectRefused(tmp, tmp / "whdir", "entry '.wh.etc' is a directory named as a whiteout");
  // The same without the directory's own entry.
  WriteTar(tmp / "below.tar", {{".wh.etc/file", '0', "", "f\n"}});
  MakeLayout(tmp / "below", {tmp / "lower.tar", tmp / "below.tar"});
  ExpectRefused(tmp, tmp / "below", "entry '.wh.etc/file' lies below whiteout '.wh.etc'");
  // An opaque marker is a file too.
  WriteTar(tmp / "opqdir.tar", {{"etc/.wh..wh..opq/", '5'}});
  MakeLayout(tmp / "opqdir", {tmp / "lower.tar", tmp / "opqdir.tar"});
  ExpectRefused(tmp, tmp / "opqdir", "entry 'etc/.wh..wh..opq' is a directory named as a whiteout");
}

TEST_CASE("cli oci: a config whose diff_ids do not match the layers is a damaged image, nothing recorded",
          "[cli][oci]") {
  TempDir tmp;
  WriteTar(tmp / "a.tar", {{"a", '0', "", "a\n"}});
  WriteTar(tmp / "b.tar", {{"b", '0', "", "b\n"}});
  std::string a = Sha256Of(tmp / "a.tar"), b = Sha256Of(tmp / "b.tar");
  MakeLayout(tmp / "swapped", {tmp / "a.tar", tmp / "b.tar"}, "t", json::array({b, a}));
  ExpectRefused(tmp, tmp / "swapped", "the config's diff_id of layer 1 is " + b);
  MakeLayout(tmp / "fewer", {tmp / "a.tar", tmp / "b.tar"}, "t", json::array({a}));
  ExpectRefused(tmp, tmp / "fewer", "rootfs.diff_ids has 1 entries for 2 layers");
  // A compressed layer's diff_id is the digest of the tar inside.
  fs::path gz = tmp / "a.tar.gz";
  MustRun({"/bin/sh", "-c", "gzip -n -c " + (tmp / "a.tar").string() + " > " + gz.string()});
  MakeLayout(tmp / "gz", {gz}, "t", json::array({a}));
  fs::path fresh = tmp / "from-gz";
  MustAgentenv(fresh, {"init", "--from-oci", (tmp / "gz").string() + ":t"});
  CHECK(ReadFile(Work(fresh) / "a") == "a\n");
  MakeLayout(tmp / "gz-bad", {gz}, "t", json::array({b}));
  ExpectRefused(tmp, tmp / "gz-bad", "refusing the image");
}

TEST_CASE("cli oci: indexes nested deeper than an image index are refused as bad input, nothing recorded",
          "[cli][oci]") {
  TempDir tmp;
  WriteTar(tmp / "ok.tar", {{"f", '0', "", "fine"}});
  fs::path layout = tmp / "deep";
  MakeLayout(layout, {tmp / "ok.tar"});
  json index = json::parse(ReadFile(layout / "index.json"));
  json desc = index["manifests"][0];
  desc.erase("annotations");
  // 200 indexes, each naming the one below it; index.json names the top.
  for (int i = 0; i < 200; ++i) {
    fs::path f = tmp / "index.tmp";
    WriteFile(f, json{{"schemaVersion", 2}, {"manifests", {desc}}}.dump());
    desc = AddBlob(layout, f, "application/vnd.oci.image.index.v1+json");
  }
  desc["annotations"] = {{"org.opencontainers.image.ref.name", "t"}};
  WriteFile(layout / "index.json", json{{"schemaVersion", 2}, {"manifests", {desc}}}.dump());
  ExpectRefused(tmp, layout, "an image index nested in an image index");
}

TEST_CASE("cli oci: skopeo pushes our layout to a real registry and back, init --from-oci of it gives the same tree",
          "[cli][oci][interop][registry]") {
  if (!HaveRegistry()) Skip(std::string(kRegistryBin) + " or curl is not installed (apt-get install docker-registry curl)");
  NeedProgram("/usr/bin/skopeo", "skopeo");
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  Manifest want = TreeManifest(Work(root));
  Registry reg(tmp / "registry");
  fs::path layout = tmp / "layout";
  MustAgentenv(root, {"export", "HEAD", "--oci", layout.string(), "--layers", "full"});
  std::string ref = "docker://" + reg.address() + "/agentenv/test:v1";
  MustRun({"/usr/bin/skopeo", "copy", "--dest-tls-verify=false", "oci:" + layout.string() + ":latest", ref});
  fs::path pulled = tmp / "pulled";
  MustRun({"/usr/bin/skopeo", "copy", "--src-tls-verify=false", ref, "oci:" + pulled.string() + ":v1"});
  fs::path other = tmp / "other";
  MustAgentenv(other, {"init", "--from-oci", pulled.string() + ":v1"});
  CHECK(ManifestDiff(want, TreeManifest(Work(other))) == "");
  CHECK(Agentenv(other, {"fsck"}).code == 0);
}

}  // namespace
}  // namespace agentenv::test
