// Ignore rules (watch/ignore.h): the input up to its first NUL byte is a
// repository's <root>/ignore file, read by watch::IgnoreRules::WithFile as
// every command reads it; the rest is paths to ask about, one per line
// (a trailing '/' asks about a directory). The three ways of asking must
// agree as ignore.h says they do: Ignored is Matches on the path or an
// ancestor; ForDir(dir).Matches(name) is Matches(dir/name).
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_env.h"
#include "snap/layout.h"
#include "watch/ignore.h"

namespace {

using namespace agentenv;

std::string root;

// "a/b/c" without empty components.
bool Clean(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  return p.find("//") == std::string_view::npos;
}

void Ask(const watch::IgnoreRules& rules, std::string_view path, bool is_dir) {
  bool ignored = rules.Ignored(path, is_dir);
  bool matches = rules.Matches(path, is_dir);
  if (!Clean(path)) return;
  // Ignored: the path or one of its ancestors matches.
  bool any = false;
  for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1))
    any |= rules.Matches(path.substr(0, slash), true);
  any |= matches;
  FUZZ_CHECK(any == ignored, "Ignored(" + std::string(path) + ") disagrees with Matches on its ancestors");
  size_t slash = path.rfind('/');
  std::string_view dir = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
  std::string_view name = path.substr(slash == std::string_view::npos ? 0 : slash + 1);
  FUZZ_CHECK(rules.ForDir(dir).Matches(name, is_dir) == matches,
             "ForDir(" + std::string(dir) + ").Matches(" + std::string(name) + ") disagrees with Matches");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  root = fuzz::WorkDir() + "/repo";
  fuzz::MakeDir(root);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string_view file = in.substr(0, nul);
  std::string_view paths = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  fuzz::WriteFile(snap::layout::Ignore(root), file);
  auto rules = watch::IgnoreRules::WithFile(snap::layout::Ignore(root));
  if (!rules) return 0;
  (void)rules->LiteralPaths();
  for (std::string_view p : {"etc/passwd", "tmp", "var/tmp/x", "a/b/c.swp", "proc/1/fd"}) {
    Ask(*rules, p, false);
    Ask(*rules, p, true);
  }
  while (!paths.empty()) {
    size_t nl = paths.find('\n');
    std::string_view line = paths.substr(0, nl);
    paths = nl == std::string_view::npos ? std::string_view() : paths.substr(nl + 1);
    bool is_dir = !line.empty() && line.back() == '/';
    if (is_dir) line.remove_suffix(1);
    Ask(*rules, line, is_dir);
  }
  return 0;
}
