#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/archive.h"

namespace agentenv::cli {

int CmdInit(int argc, char** argv) {
  Globals g;
  control::InitRequest req;
  CLI::App app{"Create a repository and its live tree from a directory or a tarball", "init"};
  AddGlobals(app, g);
  auto* f = app.add_option("--from", req.from, "Directory to copy as the first snapshot");
  app.add_option("--tarball", req.tarball, "Archive (tar, tar.gz, tar.zst, ...) to unpack as the first snapshot")
      ->excludes(f);
  app.add_option("-m,--message", req.message, "Message of the first node");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto r = WithProgress(g, [&](Progress* p) { return control::Init(g.root, req, p); });
  return Print(g, r, [](const control::InitReply& r) {
    std::string text;
    for (const auto& w : r.warnings) text += "warning: " + w + "\n";
    return text + "initialized " + r.root + " at " + r.node.short_id + " (" + std::to_string(r.entries) +
           " entries); live tree: " + r.work;
  });
}

}  // namespace agentenv::cli
