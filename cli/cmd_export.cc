// agentenv export: write a node as a tar (pax
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/archive.h"
#include "control/oci.h"

namespace agentenv::cli {
namespace {

int ExportOci(const Globals& g, const archive::OciExportRequest& req) {
  control::Client client(g.root);
  return Print(g, control::ExportOci(client, req), [](const archive::OciExportReply& e) {
    return "exported " + e.node.substr(0, 12) + " to " + e.dir + ":" + e.tag + ": " + std::to_string(e.layers) +
           " layer(s), " + std::to_string(e.entries) + " entries, " + HumanBytes(e.bytes) + "; manifest " + e.manifest;
  });
}

}  // namespace

int CmdExport(int argc, char** argv) {
  Globals g;
  control::ExportRequest req;
  archive::OciExportRequest oci;
  CLI::App app{"Write a node as a tar (pax; .gz/.zst by suffix) or an OCI image layout, streamed from the store; "
               "the same node always gives the same bytes", "export"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node to export")->required();
  auto* out = app.add_option("-o,--output", req.output, "Output file (.tar, .tar.gz, .tar.zst), - for stdout");
  app.add_option("--diff-from", req.diff_from, "Only what changed since this node; deletions as .wh. whiteouts (an OCI layer)")
      ->needs(out);
  auto* dir = app.add_option("--oci", oci.dir, "Write an OCI image layout to this directory (created, or added to)")
                  ->excludes(out);
  app.add_option("--tag", oci.tag, "Tag of the image in the layout (default latest)")->needs(dir);
  app.add_option("--layers", oci.layers,
                 "squash: one layer; path (default): the ancestor at the last depth multiple of 16, then one "
                 "layer per node; full: one layer per node from the root")
      ->needs(dir);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (!oci.dir.empty()) {
    oci.ref = req.ref;
    return ExportOci(g, oci);
  }
  if (req.output.empty())
    return ReportError(g, Error{"export: say where: -o FILE (a tarball) or --oci DIR (an OCI image layout)", 0,
                                ErrorCode::kInvalid});
  control::Client client(g.root);
  auto r = WithProgress(g, client, [&] { return control::Export(client, req); });
  // On stderr: stdout may hold the archive. --json and -q print them
  // themselves (in the object; on stderr) unless stdout is the archive.
  if (r && (req.output == "-" || !(g.json || g.quiet)))
    for (const auto& w : r->warnings) std::cerr << "warning: " << w << '\n';
  if (r && req.output == "-") return kExitOk;  // stdout holds the archive
  return Print(g, r, [](const control::ExportReply& e) {
    return "exported " + e.node.substr(0, 12) + " to " + e.output + ": " + std::to_string(e.entries) + " entries, " +
           HumanBytes(e.bytes) + (e.diff ? ", " + std::to_string(e.whiteouts) + " whiteouts" : "");
  });
}

}  // namespace agentenv::cli
