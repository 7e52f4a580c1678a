// The dependency rule of docs/design.md, read from the sources: each
// module includes only headers of the modules below it. CMake cannot
// check this (every target exports the source root), so a reversed
// include, e.g. snap/ including control/, would build; here it fails.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace agentenv::test {
namespace {

namespace fs = std::filesystem;

// Module -> the modules it may include (itself always). tests/, bench/
// and fuzz/ may include anything and are not read.
const std::map<std::string, std::set<std::string>>& Allowed() {
  static const std::set<std::string> below_control = {"common",    "store", "fsck",   "snap",    "watch",
                                                       "runner",    "registry", "archive", "history", "workspace",
                                                       "mounts",    "capture", "run",     "trials"};
  static const std::map<std::string, std::set<std::string>> rule = [] {
    std::map<std::string, std::set<std::string>> r = {
        {"common", {}},
        {"store", {"common"}},
        {"fsck", {"common", "store"}},
        {"snap", {"common", "store"}},
        {"watch", {"common"}},
        {"runner", {"common"}},
        {"registry", {"common"}},
        {"archive", {"common", "store", "snap"}},
        {"history", {"common", "store", "snap"}},
        {"workspace", {"common", "store", "snap", "runner"}},
        {"mounts", {"common", "store", "snap", "runner"}},
        {"capture", {"common", "store", "snap", "watch", "history"}},
        {"run", {"common", "store", "snap", "runner", "workspace", "mounts"}},
        {"trials", {"common", "store", "snap", "runner", "workspace", "mounts", "run", "history"}},
    };
    r["control"] = below_control;
    r["serve"] = below_control;
    r["serve"].insert("control");
    r["web"] = r["serve"];
    r["web"].insert("serve");
    r["cli"] = r["web"];
    r["cli"].insert("web");
    return r;
  }();
  return rule;
}

struct Violation {
  std::string file, line;
};

// The module an include names, if any: `"snap/repo.h"`, `<snap/repo.h>`
// (the source root is on the include path too) and `"../snap/repo.h"`
// (resolved from the including file's folder) all name snap.
std::string IncludedModule(const fs::path& root, const fs::path& file, const std::string& line) {
  static const std::regex include_re(R"re(^\s*#\s*include\s*["<]([^">]+)[">])re");
  std::smatch m;
  if (!std::regex_search(line, m, include_re)) return "";
  std::string target = m[1];
  if (target.rfind("../", 0) == 0 || target.rfind("./", 0) == 0) {
    fs::path resolved = (file.parent_path() / target).lexically_normal();
    target = resolved.lexically_relative(root).generic_string();
  }
  size_t slash = target.find('/');
  return slash == std::string::npos ? "" : target.substr(0, slash);
}

// Every include of a module in `dir` that the rule does not allow.
std::vector<Violation> Check(const fs::path& root) {
  std::vector<Violation> out;
  for (const auto& [module, may] : Allowed()) {
    if (!fs::exists(root / module)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / module)) {
      const std::string ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      std::ifstream in(e.path());
      std::string line;
      while (std::getline(in, line)) {
        const std::string to = IncludedModule(root, e.path(), line);
        if (!to.empty() && to != module && Allowed().count(to) && !may.count(to))
          out.push_back({fs::relative(e.path(), root).string(), line});
      }
    }
  }
  return out;
}

TEST_CASE("include rule: every module includes only the modules below it", "[fast]") {
  const fs::path root = AGENTENV_SOURCE_DIR;
  REQUIRE(fs::exists(root / "snap"));
  for (const Violation& v : Check(root)) FAIL_CHECK(v.file << ": " << v.line << " (see docs/design.md, modules)");
  // Every top-level module folder is in the rule, so a new one cannot
  // escape it.
  for (const auto& e : fs::directory_iterator(root)) {
    if (!e.is_directory() || !fs::exists(e.path() / "CMakeLists.txt")) continue;
    const std::string name = e.path().filename();
    if (name == "tests" || name == "bench" || name == "fuzz") continue;
    INFO(name + "/ has a CMakeLists.txt but no place in the include rule");
    CHECK(Allowed().count(name));
  }
}

TEST_CASE("include rule: a reversed include is found", "[fast]") {
  // A scratch tree with snap/ including control/ (the rule's reversal).
  const fs::path dir = fs::temp_directory_path() / ("agentenv-include-rule-" + std::to_string(::getpid()));
  fs::create_directories(dir / "snap");
  fs::create_directories(dir / "control");
  std::ofstream(dir / "snap/a.cc") << "#include \"snap/a.h\"\n#include \"control/server.h\"\n";
  // The same reversal in the other spellings of an include.
  std::ofstream(dir / "snap/b.cc") << "#include <control/server.h>\n";
  std::ofstream(dir / "snap/c.cc") << "#include \"../control/server.h\"\n#include \"../snap/a.h\"\n";
  std::ofstream(dir / "control/b.cc") << "#include \"snap/a.h\"\n#include <vector>\n#include <nlohmann/json.hpp>\n";
  auto found = Check(dir);
  fs::remove_all(dir);
  std::set<std::string> files;
  for (const Violation& v : found) files.insert(v.file);
  CHECK(found.size() == 3);
  CHECK(files == std::set<std::string>{"snap/a.cc", "snap/b.cc", "snap/c.cc"});
}

}  // namespace
}  // namespace agentenv::test
