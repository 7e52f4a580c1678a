// agentenv ls: list a directory of a node (or show one entry) without restoring it
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/browse.h"

namespace agentenv::cli {

int CmdLs(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  std::string ref = "HEAD", path;
  CLI::App app{"List a directory of a node (or show one entry) without restoring it", "ls"};
  AddGlobals(app, g);
  app.add_option("ref", ref, "Node (default HEAD)");
  app.add_option("path", path, "Tree-relative path (default: the root)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, control::List(client, ref, path), [](const control::LsReply& r) {
    std::string text;
    char line[128];
    for (const auto& e : r.entries) {
      std::snprintf(line, sizeof line, "%-8s %04o %5u:%-5u %10llu  ", e.kind.c_str(), e.mode, e.uid, e.gid,
                    (unsigned long long)e.size);
      text += line + e.name + (e.kind == "dir" ? "/" : "") + (e.target.empty() ? "" : " -> " + e.target) + "\n";
    }
    return text.empty() ? std::string("(empty directory)") : text;
  });
}

}  // namespace agentenv::cli
