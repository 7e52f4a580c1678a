// watch/ignore: anchoring, '**', negation, dir-only, classes, errors.
#include <catch2/catch.hpp>
#include <string>

#include "watch/ignore.h"

using agentenv::watch::IgnoreRules;

namespace {

IgnoreRules Rules(const char* text) {
  auto r = IgnoreRules::Parse(text);
  REQUIRE(r);
  return std::move(r).value();
}

}  // namespace

TEST_CASE("ignore: a pattern is anchored at the tree root, with or without a slash") {
  IgnoreRules r = Rules("/tmp\nvar/tmp\n*.swp\n");
  CHECK(r.Ignored("tmp", true));
  CHECK(r.Ignored("tmp/x/y", false));
  CHECK_FALSE(r.Ignored("a/tmp", true));
  CHECK_FALSE(r.Ignored("tmpx", true));
  CHECK(r.Ignored("var/tmp", true));
  CHECK(r.Ignored("var/tmp/f", false));
  CHECK_FALSE(r.Ignored("x/var/tmp", true));
  CHECK_FALSE(r.Ignored("var", true));
  // No slash still means "at the root", unlike git.
  CHECK(r.Ignored("a.swp", false));
  CHECK_FALSE(r.Ignored("d/a.swp", false));
  CHECK_FALSE(r.Ignored("", true));  // the root itself, never
}

TEST_CASE("ignore: ** matches any number of components") {
  IgnoreRules r = Rules("**/*.swp\na/**/b\nc/**\n");
  CHECK(r.Ignored("a.swp", false));
  CHECK(r.Ignored("d/e/f/.x.swp", false));
  CHECK_FALSE(r.Ignored("d/e/f/x.swpx", false));
  CHECK(r.Ignored("a/b", true));
  CHECK(r.Ignored("a/x/b", true));
  CHECK(r.Ignored("a/x/y/b/z", false));
  CHECK_FALSE(r.Ignored("a/x/bb", false));
  CHECK_FALSE(r.Ignored("c", true));  // "c/**" is what is inside c
  CHECK(r.Ignored("c/x", false));
}

TEST_CASE("ignore: negation, last rule wins, ignored ancestors stay ignored") {
  IgnoreRules r = Rules("**/*.log\n!**/keep.log\n/out\n!/out/keep\n");
  CHECK(r.Ignored("a/b.log", false));
  CHECK_FALSE(r.Ignored("a/keep.log", false));
  CHECK_FALSE(r.Ignored("keep.log", false));
  CHECK(r.Ignored("out", true));
  CHECK(r.Ignored("out/keep", false));  // cannot re-include below an ignored dir
  // Matches() judges the path alone: the '!' rule wins there.
  CHECK_FALSE(r.Matches("out/keep", false));
  CHECK(r.Matches("out", true));

  IgnoreRules order = Rules("!/x\n/x\n");  // a later rule overrides
  CHECK(order.Ignored("x", false));
}

TEST_CASE("ignore: a trailing slash matches directories only") {
  IgnoreRules r = Rules("build/\n**/node_modules/\n");
  CHECK(r.Ignored("build", true));
  CHECK_FALSE(r.Ignored("build", false));
  CHECK(r.Ignored("build/x.o", false));  // via the ignored ancestor
  CHECK(r.Ignored("a/b/node_modules", true));
  CHECK(r.Ignored("a/b/node_modules/p/index.js", false));
  CHECK_FALSE(r.Ignored("a/b/node_modules", false));
}

TEST_CASE("ignore: ?, classes, escapes, raw bytes, deep paths") {
  IgnoreRules r = Rules(
      "file?.c\n[abc].txt\n[!a-y]z\n\\#lit\n\\!bang\nsp\\ \n**/\xff*\n**/x[]]\n");
  CHECK(r.Ignored("file1.c", false));
  CHECK_FALSE(r.Ignored("file12.c", false));
  CHECK(r.Ignored("b.txt", false));
  CHECK_FALSE(r.Ignored("d.txt", false));
  CHECK(r.Ignored("zz", false));
  CHECK_FALSE(r.Ignored("az", false));
  CHECK(r.Ignored("#lit", false));
  CHECK(r.Ignored("!bang", false));
  CHECK(r.Ignored("sp ", false));
  CHECK(r.Ignored("d/\xff\xfe-not-utf8", false));
  CHECK(r.Ignored("x]", false));
  CHECK_FALSE(r.Ignored("x", false));

  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "d/";
  CHECK_FALSE(r.Ignored(deep + "f", false));
  CHECK(r.Ignored(deep + "\xff", false));
}

TEST_CASE("ignore: a glob's literal prefix and suffix decide only together with the glob") {
  IgnoreRules r = Rules("**/a*a\n**/#*#\n**/*.swp\n**/pre*\n**/x*\\*\n**/y*?\n**/[ab]*.c\n");
  CHECK(r.Matches("d/aa", false));
  CHECK(r.Matches("aXa", false));
  CHECK_FALSE(r.Matches("a", false));  // starts and ends with "a", yet no match
  CHECK_FALSE(r.Matches("#", false));
  CHECK(r.Matches("#x#", false));
  CHECK(r.Matches(".swp", false));
  CHECK_FALSE(r.Matches("swp", false));
  CHECK_FALSE(r.Matches("a.swpx", false));
  CHECK(r.Matches("pre", false));
  CHECK(r.Matches("x*", false));  // an escaped star after the last '*': a literal '*'
  CHECK(r.Matches("xyz*", false));
  CHECK_FALSE(r.Matches("xyz", false));
  CHECK(r.Matches("yz", false));  // '?' after the star: no suffix to check
  CHECK_FALSE(r.Matches("y", false));
  CHECK(r.Matches("b1.c", false));
  CHECK_FALSE(r.Matches("c1.c", false));
}

TEST_CASE("ignore: bad patterns fail with their line number") {
  auto r = IgnoreRules::Parse("# fine\n/ok\n[abc\n");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == agentenv::ErrorCode::kInvalid);
  CHECK(r.error().message.find("line 3") != std::string::npos);
  CHECK_FALSE(IgnoreRules::Parse("a\n!\n"));
  CHECK_FALSE(IgnoreRules::Parse("a\\"));
  auto empty = IgnoreRules::Parse("\n# only comments\n   \n");
  REQUIRE(empty);
  CHECK(empty->size() == 0);
}

TEST_CASE("ignore: defaults skip system noise and editor files, keep real content") {
  IgnoreRules r = IgnoreRules::Defaults();
  for (const char* p : {"proc/1/status", "sys/kernel", "dev/null", "tmp/x", "var/tmp/y",
                        "var/cache/apt/pkgcache.bin", "var/lib/apt/lists/deb.debian.org_x",
                        "home/u/.notes.txt.swp", "etc/.hosts.swo", "src/main.c~",
                        "src/.#main.c", "src/#main.c#", "src/4913"})
    CHECK(r.Ignored(p, false));
  for (const char* p : {"etc/passwd", "usr/lib/x", "var/lib/apt/extended_states",
                        "var/cache/man/index.db", "home/u/tmp/x", "src/main.c"})
    CHECK_FALSE(r.Ignored(p, false));

  IgnoreRules more = Rules("!/tmp\n");  // user rules added after the defaults win
  r.Add(more);
  CHECK_FALSE(r.Ignored("tmp/x", false));
  REQUIRE(r.AddPattern("/work/cache/"));
  CHECK(r.Ignored("work/cache", true));
}

TEST_CASE("ignore: the depth and last-name shortcuts give the general match's verdict") {
  // "a//b" splits into the same components as "a/b" but takes the general
  // way (split, then every rule's segments): the verdicts must agree.
  IgnoreRules r = Rules(
      "/tmp\nvar/lib/*/lists\n**/*.swp\n!**/keep.swp\n**/build/\n**/b\n**/x/**/y\n"
      "/a/**\n!a/b/c\n**/[0-9]*.log\n");
  const char* names[] = {"a", "b", "c", "tmp", "x", "y", "var", "lib", "apt", "lists", "build",
                         "f.swp", "keep.swp", "1.log", "x.log"};
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1103515245 + 12345, (seed >> 8) % 15; };
  int checked = 0, ignored = 0;
  for (int i = 0; i < 5000; ++i) {
    size_t depth = 1 + next() % 5;
    std::string clean, general;
    for (size_t d = 0; d < depth; ++d) {
      std::string name = names[next()];
      clean += (d ? "/" : "") + name;
      general += (d ? "//" : "") + name;
    }
    for (bool is_dir : {false, true}) {
      bool v = r.Matches(clean, is_dir);
      INFO(clean << (is_dir ? " (dir)" : ""));
      CHECK(v == r.Matches(general, is_dir));
      ++checked;
      ignored += v;
    }
  }
  CHECK(checked == 10000);
  CHECK(ignored > 500);  // the rules do match: the comparison is not all "no"
  CHECK(ignored < 9500);
}

TEST_CASE("ignore: a directory's view gives the path's verdict for each of its entries") {
  IgnoreRules r = IgnoreRules::Defaults();
  r.Add(Rules("var/lib/*/lists\n!**/keep.swp\n**/build/\n**/x/**/y\n/a/**\n!a/b/c\n**/[0-9]*.log\n"
              "/var/cache/apt\n!/var/cache/apt/keep\nusr/*/doc/x?\n"));
  const char* names[] = {"a", "b", "c", "tmp", "x", "y", "var", "lib", "apt", "lists", "build", "f.swp",
                         "keep.swp", "1.log", "x.log", "cache", "keep", "usr", "share", "doc", "x1", "proc",
                         "#n#", "n~", "4913"};
  constexpr uint32_t kNames = sizeof names / sizeof names[0];
  uint32_t seed = 777;
  auto next = [&] { return seed = seed * 1103515245 + 12345, (seed >> 8) % kNames; };
  int checked = 0, ignored = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string dir;
    for (size_t d = 0, depth = next() % 5; d < depth; ++d) dir += (d ? "/" : "") + std::string(names[next()]);
    IgnoreRules::DirView view = r.ForDir(dir);
    for (int j = 0; j < 4; ++j) {
      std::string name = names[next()];
      std::string path = dir.empty() ? name : dir + "/" + name;
      for (bool is_dir : {false, true}) {
        bool v = r.Matches(path, is_dir);
        INFO(path << (is_dir ? " (dir)" : ""));
        CHECK(view.Matches(name, is_dir) == v);
        ++checked;
        ignored += v;
      }
    }
  }
  CHECK(checked == 24000);
  CHECK(ignored > 1000);
  CHECK(ignored < 23000);
}
