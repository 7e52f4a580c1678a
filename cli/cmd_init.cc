#include <filesystem>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/tarball.h"

namespace agentenv::cli {

int CmdInit(int argc, char** argv) {
  Globals g;
  std::string from, tarball, message = "init";
  CLI::App app{"Create a repository and its live tree from a directory or a tarball", "init"};
  AddGlobals(app, g);
  auto* f = app.add_option("--from", from, "Directory to copy as the first snapshot");
  app.add_option("--tarball", tarball, "Archive (tar, tar.gz, tar.zst, ...) to unpack as the first snapshot")
      ->excludes(f);
  app.add_option("-m,--message", message, "Message of the first node");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;

  auto repo = snap::Repo::Create(g.root);
  if (!repo) return ReportError(g, repo.error());
  auto ignored = LoadIgnoreRules(g.root);
  if (!ignored) return ReportError(g, ignored.error());
  (*repo)->set_ignored(*ignored);
  std::vector<std::string> warnings;
  Result<snap::SnapResult> res = Unexpected<Error>(Error{});
  if (!from.empty()) {
    res = (*repo)->Seed(from, message);
  } else {
    if (!tarball.empty()) {
      auto x = ExtractTarball(tarball, (*repo)->work_dir(), [&](const std::string& w) { warnings.push_back(w); });
      if (!x) {
        // Leave nothing half-made behind: the repository is new.
        repo->reset();
        std::error_code ec;
        for (const char* d : {"/store", "/meta", "/work", "/lock"}) std::filesystem::remove_all(g.root + d, ec);
        return ReportError(g, x.error());
      }
    }
    snap::SnapOptions opt;
    opt.message = message;
    opt.allow_empty = true;
    res = (*repo)->Snapshot(opt);
  }
  if (!res) return ReportError(g, res.error());
  warnings.insert(warnings.end(), res->warnings.begin(), res->warnings.end());
  auto rec = (*repo)->Record(*res->node);
  if (!rec) return ReportError(g, rec.error());
  std::string text;
  for (const auto& w : warnings) text += "warning: " + w + "\n";
  text += "initialized " + g.root + " at " + Short(*res->node) + " (" + std::to_string(res->changes.added) +
          " entries); live tree: " + (*repo)->work_dir();
  return ReportOk(g, {{"root", g.root}, {"work", (*repo)->work_dir()}, {"node", NodeJson(*rec)}, {"warnings", warnings}}, text);
}

}  // namespace agentenv::cli
