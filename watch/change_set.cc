#include "watch/change_set.h"

#include <iterator>
#include <utility>

namespace agentenv::watch {

void ChangeSet::Add(std::string path, Scope scope) {
  auto [it, inserted] = paths.try_emplace(std::move(path), scope);
  if (!inserted && scope == Scope::kSubtree) it->second = Scope::kSubtree;
}

void ChangeSet::Merge(ChangeSet&& other) {
  rescan_all = rescan_all || other.rescan_all;
  if (paths.empty()) {
    paths = std::move(other.paths);
    return;
  }
  for (auto& [path, scope] : other.paths) Add(path, scope);
}

bool ChangeSet::Covers(std::string_view path) const {
  if (rescan_all) return true;
  // Check path and each ancestor ("a/b/c", "a/b", "a", "").
  std::string_view p = path;
  while (true) {
    auto it = paths.find(std::string(p));
    if (it != paths.end() && (p.size() == path.size() || it->second == Scope::kSubtree)) return true;
    if (p.empty()) return false;
    size_t slash = p.rfind('/');
    p = slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
  }
}

void ChangeSet::Compact() {
  if (rescan_all) {
    paths.clear();
    return;
  }
  for (auto it = paths.begin(); it != paths.end();) {
    bool covered = false;
    std::string_view p = it->first;
    while (!covered && !p.empty()) {
      size_t slash = p.rfind('/');
      p = slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
      auto anc = paths.find(std::string(p));
      covered = anc != paths.end() && anc->second == Scope::kSubtree;
    }
    it = covered ? paths.erase(it) : std::next(it);
  }
}

}  // namespace agentenv::watch
