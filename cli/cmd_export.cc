// export and import: nodes as tarballs.
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

int CmdImport(int argc, char** argv) {
  Globals g;
  control::ImportArchiveRequest req;
  CLI::App app{"Record a tarball or an OCI image as a new node (child of HEAD); the live tree is not touched: "
               "restore it to use it", "import"};
  AddGlobals(app, g);
  auto* archive = app.add_option("archive", req.archive, "tar, tar.gz, tar.zst, ...");
  app.add_option("--oci", req.oci, "An OCI image layout, DIR or DIR:TAG (its layers applied with whiteouts)")
      ->excludes(archive);
  app.add_option("-m,--message", req.message, "Message of the node (default: imported <archive>)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (req.archive.empty() && req.oci.empty())
    return ReportError(g, Error{"import: name a tarball, or an OCI image layout with --oci DIR[:TAG]", 0,
                                ErrorCode::kInvalid});
  control::Client client(g.root);
  auto r = WithProgress(g, client, [&] { return control::ImportArchive(client, req); });
  // Warnings on stderr, as export's: what was left out is not output.
  if (r && !g.json && !g.quiet)
    for (const auto& w : r->warnings) std::cerr << "warning: " << w << '\n';
  return Print(g, r, [&req](const control::ImportArchiveReply& r) {
    std::string s = r.node.substr(0, 12);
    return "imported " + (req.oci.empty() ? req.archive : req.oci) + " as " + s + " (agentenv restore " + s + " to use it)";
  });
}

}  // namespace agentenv::cli
