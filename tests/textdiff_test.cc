// control/textdiff: unified diffs that GNU patch applies exactly.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "common/textdiff.h"
#include "tests/testutil.h"

namespace agentenv {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Spit(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

// Applies `diff` to a file holding `a` with GNU patch; the result.
std::string Patched(const test::TempDir& tmp, const std::string& a, const std::string& diff) {
  std::string file = (tmp / "f").string(), p = (tmp / "p.diff").string();
  Spit(file, a);
  Spit(p, diff);
  std::string cmd = "patch --quiet --force " + file + " " + p + " >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return Slurp(file);
}

}  // namespace

TEST_CASE("textdiff: equal texts give no diff, a change gives a unified hunk", "[textdiff]") {
  CHECK(UnifiedDiff("a\nb\n", "a\nb\n", "a/x", "b/x").value() == "");
  CHECK(UnifiedDiff("a\nb\nc\n", "a\nB\nc\n", "a/x", "b/x").value() ==
        "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
  CHECK(UnifiedDiff("", "new\n", "/dev/null", "b/n").value() == "--- /dev/null\n+++ b/n\n@@ -0,0 +1,1 @@\n+new\n");
  CHECK(UnifiedDiff("x", "y", "a/x", "b/x").value() ==
        "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n");
  CHECK_FALSE(LooksLikeText(std::string("a\0b", 3)));
  CHECK(LooksLikeText("plain\n"));
}

TEST_CASE("textdiff: GNU patch applies every diff of random edits exactly", "[textdiff]") {
  test::TempDir tmp;
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> lines;
    int n = int(rng() % 60);
    for (int i = 0; i < n; ++i) lines.push_back("line " + std::to_string(rng() % 12) + "\n");
    std::string a;
    for (const auto& l : lines) a += l;
    int edits = int(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      size_t at = lines.empty() ? 0 : rng() % (lines.size() + 1);
      switch (rng() % 3) {
        case 0: lines.insert(lines.begin() + long(at), "new " + std::to_string(rng() % 5) + "\n"); break;
        case 1: if (at < lines.size()) lines.erase(lines.begin() + long(at)); break;
        default: if (at < lines.size()) lines[at] = "changed\n"; break;
      }
    }
    std::string b;
    for (const auto& l : lines) b += l;
    if (rng() % 4 == 0) b += "no newline at the end";
    INFO("round " << round << "\na:\n" << a << "\nb:\n" << b);
    auto diff = UnifiedDiff(a, b, "a/f", "b/f");
    REQUIRE(diff);
    if (a == b) {
      CHECK(diff->empty());
      continue;
    }
    CHECK(Patched(tmp, a, *diff) == b);
  }
}

TEST_CASE("textdiff: more changed lines than the bound give no diff rather than unbounded work", "[textdiff]") {
  std::string a, b;
  for (int i = 0; i < 500; ++i) a += "a" + std::to_string(i) + "\n", b += "b" + std::to_string(i) + "\n";
  CHECK_FALSE(UnifiedDiff(a, b, "a/x", "b/x", 100));
  CHECK(UnifiedDiff(a, b, "a/x", "b/x", 1000));
}

}  // namespace agentenv
