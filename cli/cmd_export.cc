// export and import: nodes as tarballs.
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/archive.h"

namespace agentenv::cli {

int CmdExport(int argc, char** argv) {
  Globals g;
  control::ExportRequest req;
  CLI::App app{"Write a node as a tar (pax; .gz/.zst by suffix), streamed from the store; the same node "
               "always gives the same bytes", "export"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node to export")->required();
  app.add_option("-o,--output", req.output, "Output file (.tar, .tar.gz, .tar.zst), - for stdout")->required();
  app.add_option("--diff-from", req.diff_from, "Only what changed since this node; deletions as .wh. whiteouts (an OCI layer)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  auto r = WithProgress(g, client, [&] { return control::Export(client, req); });
  if (r && req.output == "-") return kExitOk;  // stdout holds the archive
  return Print(g, r, [](const control::ExportReply& e) {
    return "exported " + e.node.substr(0, 12) + " to " + e.output + ": " + std::to_string(e.entries) + " entries, " +
           HumanBytes(e.bytes) + (e.diff ? ", " + std::to_string(e.whiteouts) + " whiteouts" : "");
  });
}

int CmdImport(int argc, char** argv) {
  Globals g;
  control::ImportArchiveRequest req;
  CLI::App app{"Record a tarball as a new node (child of HEAD); the live tree is not touched: restore it to use it", "import"};
  AddGlobals(app, g);
  app.add_option("archive", req.archive, "tar, tar.gz, tar.zst, ...")->required();
  app.add_option("-m,--message", req.message, "Message of the node (default: imported <archive>)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  auto r = WithProgress(g, client, [&] { return control::ImportArchive(client, req); });
  return Print(g, r, [&req](const control::ImportArchiveReply& r) {
    std::string text;
    for (const auto& w : r.warnings) text += "warning: " + w + "\n";
    std::string s = r.node.substr(0, 12);
    return text + "imported " + req.archive + " as " + s + " (agentenv restore " + s + " to use it)";
  });
}

}  // namespace agentenv::cli
