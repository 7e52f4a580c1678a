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
  static const std::map<std::string, std::set<std::string>> rule = {
      {"common", {}},
      {"store", {"common"}},
      {"fsck", {"common", "store"}},
      {"snap", {"common", "store"}},
      {"watch", {"common"}},
      {"runner", {"common"}},
      {"registry", {"common"}},
      {"archive", {"common", "store", "snap"}},
      {"control", {"common", "store", "fsck", "snap", "watch", "runner", "registry", "archive"}},
      {"serve", {"common", "store", "snap", "watch", "runner", "registry", "archive", "control"}},
      {"web", {"common", "store", "snap", "control", "serve"}},
      {"cli", {"common", "store", "snap", "watch", "runner", "registry", "archive", "control", "serve", "web"}},
  };
  return rule;
}

struct Violation {
  std::string file, line;
};

// Every `#include "<module>/..."` in `dir` that the rule does not allow.
std::vector<Violation> Check(const fs::path& root) {
  static const std::regex include_re(R"re(^\s*#\s*include\s*"([a-z_]+)/[^"]+")re");
  std::vector<Violation> out;
  for (const auto& [module, may] : Allowed()) {
    if (!fs::exists(root / module)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / module)) {
      const std::string ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      std::ifstream in(e.path());
      std::string line;
      std::smatch m;
      while (std::getline(in, line)) {
        if (!std::regex_search(line, m, include_re)) continue;
        const std::string to = m[1];
        if (to != module && Allowed().count(to) && !may.count(to))
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
  std::ofstream(dir / "control/b.cc") << "#include \"snap/a.h\"\n";
  auto found = Check(dir);
  fs::remove_all(dir);
  REQUIRE(found.size() == 1);
  CHECK(found[0].file == "snap/a.cc");
}

}  // namespace
}  // namespace agentenv::test
