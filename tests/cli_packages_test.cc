// Package deltas end to end on the debootstrap rootfs: apt installs,
// removes and upgrades, pip installs a local wheel, npm's tree appears;
// `log`, `show` and `log --grep` name the packages with their versions.
#include <catch2/catch.hpp>
#include <unistd.h>

#include "cli_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

// `agentenv exec -- /bin/sh -c LINE`; the result's node title.
std::string ExecTitle(const fs::path& root, const std::string& line, int timeout_ms = 600000) {
  CmdResult r = RunCmd({AGENTENV_BIN, "exec", "--root", root.string(), "--", "/bin/sh", "-c", line}, "", timeout_ms);
  INFO(r.Describe());
  if (r.code != 0 && r.err.find("Temporary failure resolving") != std::string::npos) Skip("no network to the Debian mirror");
  REQUIRE(r.code == 0);
  json log = AgentenvJson(root, {"log", "-n", "1"});
  return log["nodes"][0].value("title", "");
}

json HeadPackages(const fs::path& root) {
  json show = AgentenvJson(root, {"show"});
  return show["node"].value("packages", json::array());
}

const json* FindPackage(const json& packages, const std::string& name) {
  for (const json& p : packages)
    if (p.value("name", "") == name) return &p;
  return nullptr;
}

// Two versions of a small package, built with dpkg-deb inside the env.
const char* kBuildDebs = R"(set -e
mkdir -p /root/debs && cd /root/debs
for v in 1.0 1.1; do
  mkdir -p agentenv-demo-$v/DEBIAN agentenv-demo-$v/usr/share/agentenv-demo
  printf 'Package: agentenv-demo\nVersion: %s\nArchitecture: all\nMaintainer: test <test@example.org>\nDescription: demo\n' $v \
    > agentenv-demo-$v/DEBIAN/control
  echo $v > agentenv-demo-$v/usr/share/agentenv-demo/version
  dpkg-deb --build -Zgzip agentenv-demo-$v agentenv-demo_$v.deb >/dev/null
done
rm -r agentenv-demo-1.0 agentenv-demo-1.1)";

// A wheel as `pip wheel` would make one (METADATA, WHEEL, RECORD), written
// by the env's python3.
const char* kBuildWheel = R"(cd /root && python3 - <<'EOF'
import base64, hashlib, zipfile
files = {
    'agentenv_wheel_demo/__init__.py': 'VERSION = "0.3.1"\n',
    'agentenv_wheel_demo-0.3.1.dist-info/METADATA': 'Metadata-Version: 2.1\nName: agentenv-wheel-demo\nVersion: 0.3.1\n',
    'agentenv_wheel_demo-0.3.1.dist-info/WHEEL': 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
record = ''
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()
    record += '%s,sha256=%s,%d\n' % (name, digest, len(text.encode()))
record += 'agentenv_wheel_demo-0.3.1.dist-info/RECORD,,\n'
with zipfile.ZipFile('agentenv_wheel_demo-0.3.1-py3-none-any.whl', 'w') as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr('agentenv_wheel_demo-0.3.1.dist-info/RECORD', record)
EOF)";

// What `npm install left-pad` leaves in a project (no npm in the rootfs:
// the files npm writes, written by hand): the project's package.json
// naming it, the package with its own package.json, and a nested
// dependency of it.
const char* kNpmTree = R"(set -e
mkdir -p /root/app/node_modules/left-pad /root/app/node_modules/wcwidth
cd /root/app
printf '{\n  "name": "app",\n  "version": "1.0.0",\n  "dependencies": {\n    "left-pad": "^1.3.0"\n  }\n}\n' > package.json
printf '{\n  "name": "left-pad",\n  "version": "1.3.0",\n  "main": "index.js",\n  "dependencies": {"wcwidth": "^1.0.1"}\n}\n' > node_modules/left-pad/package.json
echo 'module.exports = function leftPad() {}' > node_modules/left-pad/index.js
printf '{\n  "name": "wcwidth",\n  "version": "1.0.1"\n}\n' > node_modules/wcwidth/package.json
printf '{\n  "name": "app",\n  "lockfileVersion": 3,\n  "packages": {}\n}\n' > package-lock.json
cp package-lock.json node_modules/.package-lock.json)";

}  // namespace

TEST_CASE("cli packages: apt, pip and npm on the debootstrap rootfs are named with versions in log and show",
          "[cli][packages][rootfs][apt][slow]") {
  if (::geteuid() != 0) Skip("as root: apt inside the rootfs needs root");
  const char* env = std::getenv("AGENTENV_TEST_ROOTFS");
  fs::path rootfs = env && *env ? env : "/var/tmp/agentenv-bench/rootfs";
  if (!fs::exists(rootfs / ".agentenv-bench-complete")) Skip(rootfs.string() + ": absent (bench/make_rootfs.sh builds it)");
  TempDir tmp;
  fs::path root = tmp.path() / "repo";
  CmdResult init = Agentenv(root, {"init", "--from", rootfs.string()}, 600000);
  INFO(init.Describe());
  REQUIRE(init.code == 0);

  // apt install: the asked-for package with its version first, its
  // dependencies after.
  std::string title = ExecTitle(root, "apt-get update -qq && apt-get install -y -qq jq >/dev/null");
  CHECK(title.starts_with("apt +jq 1.6"));
  CHECK(title.find("libjq1") != std::string::npos);
  CHECK(title.find("exec: apt-get update") != std::string::npos);
  json packages = HeadPackages(root);
  const json* jq = FindPackage(packages, "jq");
  REQUIRE(jq);
  CHECK((*jq)["ecosystem"] == "apt");
  CHECK((*jq)["op"] == "+");
  CHECK((*jq)["new_version"].get<std::string>().starts_with("1.6"));
  CHECK_FALSE(jq->value("dependency", false));
  const json* libjq = FindPackage(packages, "libjq1");
  REQUIRE(libjq);
  CHECK(libjq->value("dependency", false));
  json listed = AgentenvJson(root, {"log", "-n", "1"});
  CHECK(FindPackage(listed["nodes"][0].value("packages", json::array()), "jq"));

  // A removal, then an upgrade of a local package.
  title = ExecTitle(root, "apt-get remove -y -qq jq >/dev/null");
  CHECK(title.starts_with("apt -jq 1.6"));
  title = ExecTitle(root, kBuildDebs);
  CHECK(title.starts_with("exec: "));  // no package changed
  title = ExecTitle(root, "dpkg -i /root/debs/agentenv-demo_1.0.deb >/dev/null");
  CHECK(title.starts_with("apt +agentenv-demo 1.0"));
  title = ExecTitle(root, "dpkg -i /root/debs/agentenv-demo_1.1.deb >/dev/null");
  CHECK(title.starts_with("apt ~agentenv-demo 1.0 -> 1.1"));
  packages = HeadPackages(root);
  REQUIRE(packages.size() == 1);
  CHECK(packages[0]["op"] == "~");
  CHECK(packages[0]["old_version"] == "1.0");
  CHECK(packages[0]["new_version"] == "1.1");

  // pip installs a local wheel (pip itself comes from apt).
  title = ExecTitle(root, "apt-get install -y -qq --no-install-recommends python3-pip >/dev/null");
  CHECK(title.starts_with("apt +python3-pip"));
  ExecTitle(root, kBuildWheel);
  title = ExecTitle(root, "pip install -q --no-index --break-system-packages /root/agentenv_wheel_demo-0.3.1-py3-none-any.whl");
  CHECK(title.starts_with("pip +agentenv-wheel-demo 0.3.1"));
  packages = HeadPackages(root);
  REQUIRE(packages.size() == 1);
  CHECK(packages[0]["ecosystem"] == "pip");
  CHECK(packages[0]["where"].get<std::string>().ends_with("dist-packages"));

  // npm's tree: the package asked for, its dependency counted.
  title = ExecTitle(root, kNpmTree);
  CHECK(title.starts_with("npm +left-pad 1.3.0"));
  packages = HeadPackages(root);
  const json* wcwidth = FindPackage(packages, "wcwidth");
  REQUIRE(wcwidth);
  CHECK(wcwidth->value("dependency", false));
  CHECK((*wcwidth)["where"] == "root/app/node_modules");

  // Where did jq change? Its install and its removal, newest first.
  json found = AgentenvJson(root, {"log", "--grep", "JQ", "-n", "10"});
  REQUIRE(found["nodes"].size() == 2);
  CHECK(found["nodes"][0].value("title", "").starts_with("apt -jq"));
  CHECK(found["nodes"][1].value("title", "").starts_with("apt +jq"));
  // The wheel's file name spells it agentenv_wheel_demo: only the package
  // delta names it agentenv-wheel-demo.
  found = AgentenvJson(root, {"log", "--grep", "agentenv-wheel-demo"});
  REQUIRE(found["nodes"].size() == 1);
  CHECK(found["nodes"][0].value("title", "").starts_with("pip +agentenv-wheel-demo 0.3.1"));
  CmdResult text = Agentenv(root, {"show"});
  CHECK(text.out.find("package  npm +left-pad 1.3.0") != std::string::npos);
}

}  // namespace agentenv::test
