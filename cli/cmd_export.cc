// export and import: nodes as tarballs.
#include <stdlib.h>

#include <filesystem>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/export.h"
#include "cli/routed.h"
#include "cli/tarball.h"

namespace agentenv::cli {

int CmdExport(int argc, char** argv) {
  Globals g;
  std::string ref, out, diff_from;
  CLI::App app{"Write a node as a tar (pax; .gz/.zst by suffix), streamed from the store; the same node "
               "always gives the same bytes", "export"};
  AddGlobals(app, g);
  app.add_option("ref", ref, "Node to export")->required();
  app.add_option("-o,--output", out, "Output file (.tar, .tar.gz, .tar.zst), - for stdout")->required();
  app.add_option("--diff-from", diff_from, "Only what changed since this node; deletions as .wh. whiteouts (an OCI layer)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto id = (*repo)->Resolve(ref);
  if (!id) return ReportError(g, id.error());
  auto node = snap::LoadNode((*repo)->store(), *id);
  if (!node) return ReportError(g, node.error());
  std::optional<store::ObjectId> base;
  if (!diff_from.empty()) {
    auto b = (*repo)->Resolve(diff_from);
    if (!b) return ReportError(g, b.error());
    auto rec = (*repo)->Record(*b);
    if (!rec) return ReportError(g, rec.error());
    base = rec->tree;
  }
  auto st = ExportTar((*repo)->store(), *node, base, out);
  if (!st) return ReportError(g, st.error());
  if (out == "-") return kExitOk;
  return ReportOk(g, {{"node", id->Hex()}, {"output", out}, {"entries", st->entries}, {"bytes", st->bytes}, {"whiteouts", st->whiteouts}},
                  "exported " + Short(*id) + " to " + out + ": " + std::to_string(st->entries) + " entries, " +
                      HumanBytes(st->bytes) + (base ? ", " + std::to_string(st->whiteouts) + " whiteouts" : ""));
}

int CmdImport(int argc, char** argv) {
  Globals g;
  std::string archive, message;
  CLI::App app{"Record a tarball as a new node (child of HEAD); the live tree is not touched: restore it to use it", "import"};
  AddGlobals(app, g);
  app.add_option("archive", archive, "tar, tar.gz, tar.zst, ...")->required();
  app.add_option("-m,--message", message, "Message of the node (default: imported <archive>)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  // Unpack beside the live tree (same filesystem), then record it.
  std::string tmpl = (*repo)->root() + "/work/import-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return ReportError(g, Error{tmpl + ": " + std::strerror(errno), errno, ErrorCode::kIo});
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{tmpl};
  std::vector<std::string> warnings;
  auto x = ExtractTarball(archive, tmpl, [&](const std::string& w) { warnings.push_back(w); },
                          UnprivilegedDevices::kRefuse);
  if (!x) return ReportError(g, x.error());
  std::error_code ec;
  std::string dir = std::filesystem::absolute(tmpl, ec).string();  // the daemon has another cwd
  auto res = CallLocked(g, "import", {{"dir", dir}, {"message", message.empty() ? "imported " + archive : message}},
                        repo->get());
  if (!res) return ReportError(g, res.error());
  std::string node = res->json.value("node", "");
  std::string text;
  for (const auto& w : warnings) text += "warning: " + w + "\n";
  text += "imported " + archive + " as " + node.substr(0, 12) + " (agentenv restore " + node.substr(0, 12) + " to use it)";
  return ReportOk(g, {{"node", node}, {"warnings", warnings}}, text);
}

// Only the recording: the client unpacks, the lock holder records.
Result<Reply> ImportLocked(snap::Repo& repo, const nlohmann::json& args) {
  AE_ASSIGN(snap::SnapResult res, repo.Import(args.at("dir").get<std::string>(), args.at("message").get<std::string>()));
  if (!res.node) return Fail(args.at("dir").get<std::string>() + ": import made no node");
  return Reply{{{"node", res.node->Hex()}}, ""};
}

}  // namespace agentenv::cli
