// Opening a repository with its ignore rules (control/open_repo.h).
#include "control/open_repo.h"

#include "snap/layout.h"
#include "watch/ignore.h"

namespace agentenv::control {

Result<snap::PathFilter> LoadIgnoreRules(const std::string& root) {
  AE_ASSIGN(watch::IgnoreRules rules, watch::IgnoreRules::WithFile(snap::layout::Ignore(root)));
  auto shared = std::make_shared<watch::IgnoreRules>(std::move(rules));
  // The scan asks about a path only when its parent is not ignored: the
  // verdict on the path alone is enough (Ignored would re-check each
  // ancestor of each of the ~100k entries of a rootfs).
  return snap::PathFilter([shared](std::string_view rel, bool is_dir) { return shared->Matches(rel, is_dir); });
}

Result<std::unique_ptr<snap::Repo>> OpenRepo(const std::string& root) {
  AE_ASSIGN(auto repo, snap::Repo::Open(root));
  AE_ASSIGN(watch::IgnoreRules rules, watch::IgnoreRules::WithFile(snap::layout::Ignore(root)));
  auto shared = std::make_shared<watch::IgnoreRules>(std::move(rules));
  // As LoadIgnoreRules; the literal paths let a restore by swap find the
  // ignored directories without a walk.
  repo->set_ignored([shared](std::string_view rel, bool is_dir) { return shared->Matches(rel, is_dir); },
                    shared->LiteralPaths(), [shared](std::string_view dir) -> snap::EntryFilter {
                      // The view points into the rules, which this filter keeps
                      // alive; a scan uses it only while it lists `dir`.
                      return [view = shared->ForDir(dir)](std::string_view name, bool is_dir) {
                        return view.Matches(name, is_dir);
                      };
                    });
  return repo;
}

}  // namespace agentenv::control
