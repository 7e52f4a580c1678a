// agentenv diff: show changed paths
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {
namespace {

// "+3 ~1 -0  etc/" per top-level directory (files at the root: "."), then
// the totals: what changed where, at a glance.
std::string DiffStat(const control::DiffReply& r) {
  std::map<std::string, std::array<uint64_t, 3>> by_dir;
  std::array<uint64_t, 3> all{};
  for (const auto& c : r.changes) {
    size_t slash = c.path.find('/');
    std::string top = slash == std::string::npos ? (c.dir ? c.path + "/" : ".") : c.path.substr(0, slash + 1);
    size_t k = c.op == "+" ? 0 : c.op == "M" ? 1 : 2;
    ++by_dir[top][k];
    ++all[k];
  }
  std::string text;
  char line[64];
  for (const auto& [dir, n] : by_dir) {
    std::snprintf(line, sizeof line, "+%-6llu ~%-6llu -%-6llu ", (unsigned long long)n[0], (unsigned long long)n[1],
                  (unsigned long long)n[2]);
    text += line + dir + "\n";
  }
  return text + std::to_string(r.total) + " paths changed: " + std::to_string(all[0]) + " added, " +
         std::to_string(all[1]) + " modified, " + std::to_string(all[2]) + " deleted";
}

}  // namespace

int CmdDiff(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  std::vector<std::string> refs;
  control::DiffRequest req;
  req.limit = 1000;
  CLI::App app{"Show changed paths: diff A B (two nodes), diff A (node vs live tree), diff (HEAD vs live tree); "
               "-- PATH... limits it to those paths", "diff"};
  AddGlobals(app, g);
  app.add_option("refs", refs, "Zero, one or two nodes")->expected(0, 2);
  app.add_option("-n,--limit", req.limit, "Show at most this many paths (default 1000)");
  app.add_option("--workspace,-w", req.workspace, "Diff this workspace instead of the live tree (HEAD: its last node)");
  bool stat = false;
  app.add_flag("--stat", stat, "Counts per top-level directory instead of paths");
  app.add_flag("-p,--patch", req.patch, "Also show the content diff of each changed text file");
  // Paths come after "--" (refs before it are never taken for paths).
  int end = 1;
  while (end < argc && std::string_view(argv[end]) != "--") ++end;
  for (int i = end + 1; i < argc; ++i) req.paths.push_back(argv[i]);
  if (int rc = Parse(app, end, argv, g); rc >= 0) return rc;
  if (stat) req.limit = UINT64_MAX;  // counting needs every path
  if (!refs.empty()) req.from = refs[0];
  if (refs.size() == 2) req.to = refs[1];
  control::Client client(g.root);
  return Print(g, client.Call(req), [stat](const control::DiffReply& r) {
    if (r.total == 0) return std::string("no differences");
    if (stat) return DiffStat(r);
    std::string text;
    for (const auto& c : r.changes) text += ChangeLine(c) + "\n";
    if (r.truncated) text += "... " + std::to_string(r.total - r.changes.size()) + " more (use -n)\n";
    for (const auto& p : r.patches) {
      if (!p.note.empty()) text += "\n" + p.path + ": " + p.note + ", no content diff\n";
      else text += "\n" + p.diff;
    }
    return text;
  });
}

}  // namespace agentenv::cli
