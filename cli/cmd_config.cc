// agentenv config: the repository's settings (<root>/config).
#include "cli/cli.h"
#include "cli/commands.h"
#include "mounts/disk_limit.h"
#include "snap/repo.h"

namespace agentenv::cli {

int CmdConfig(int argc, char** argv) {
  Globals g;
  std::string key;
  uint64_t value = 0;
  CLI::App app{"Show the repository's settings, or set one: `config disk 2G` holds every exec and workspace "
               "command's writes to 2 GiB unless it names its own --disk (`config disk 0`: no limit)", "config"};
  AddGlobals(app, g);
  app.add_option("key", key, "Setting: disk")->check(CLI::IsMember({"disk"}));
  auto* val = app.add_option("value", value, "New value (bytes: 500M, 2G; 0 for none)")->transform(CLI::AsSizeValue(false));
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  // Opened as every command opens it, so anything that is not a whole
  // repository (no repository, a half-made one) is refused the same way.
  if (auto repo = snap::Repo::Open(g.root); !repo) return ReportError(g, repo.error());
  auto c = mounts::LoadConfig(g.root);
  if (!c) return ReportError(g, c.error());
  if (val->count()) {
    if (value && value < (1 << 20)) return ReportError(g, Fail(ErrorCode::kInvalid, "config disk: at least 1M").error());
    c->disk_bytes = value;
    if (auto saved = mounts::SaveConfig(g.root, *c); !saved) return ReportError(g, saved.error());
  }
  g.data = !val->count();
  return ReportOk(g, control::ToJson(*c),
                  "disk " + (c->disk_bytes ? HumanBytes(c->disk_bytes) + " (" + std::to_string(c->disk_bytes) + " bytes)"
                                           : std::string("none")));
}

}  // namespace agentenv::cli
