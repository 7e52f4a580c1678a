// Summaries before actions and in comparisons (web/summary.h).
#include "web/summary.h"

#include <algorithm>
#include <map>

#include "history/node_view.h"
#include "snap/packages.h"
#include "snap/tree.h"
#include "web/timeline_facts.h"

namespace agentenv::web {

json DirectoryCounts(const json& changes, size_t max_dirs) {
  struct Count {
    uint64_t added = 0, modified = 0, deleted = 0;
    uint64_t total() const { return added + modified + deleted; }
  };
  std::map<std::string, Count> dirs;
  uint64_t counted = 0;
  for (const auto& c : changes) {
    const std::string path = c.value("path", "");
    // Two levels ("usr/lib") for a path deeper than that, else its
    // directory ("etc"), "/" for a top-level entry.
    const size_t first = path.find('/');
    const size_t second = first == std::string::npos ? first : path.find('/', first + 1);
    const std::string dir = first == std::string::npos ? "/" : path.substr(0, second == std::string::npos ? first : second);
    Count& n = dirs[dir];
    const std::string op = c.value("op", "");
    (op == "+" ? n.added : op == "-" ? n.deleted : n.modified)++;
    ++counted;
  }
  std::vector<std::pair<std::string, Count>> sorted(dirs.begin(), dirs.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second.total() > y.second.total(); });
  json out = json::array();
  Count other;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Count& n = sorted[i].second;
    if (i >= max_dirs) {
      other.added += n.added, other.modified += n.modified, other.deleted += n.deleted;
      continue;
    }
    out.push_back({{"dir", sorted[i].first}, {"added", n.added}, {"modified", n.modified}, {"deleted", n.deleted}, {"total", n.total()}});
  }
  if (other.total())
    out.push_back({{"dir", "other " + std::to_string(sorted.size() - max_dirs) + " directories"}, {"added", other.added},
                   {"modified", other.modified}, {"deleted", other.deleted}, {"total", other.total()}});
  return {{"dirs", std::move(out)}, {"counted", counted}};
}

Result<json> PackagesBetween(control::Server& server, const std::string& from, const std::string& to) {
  snap::Repo& repo = server.repo();
  AE_ASSIGN(store::ObjectId a, repo.Resolve(from));
  AE_ASSIGN(store::ObjectId b, repo.Resolve(to));
  AE_ASSIGN(snap::NodeRecord ra, repo.Record(a));
  AE_ASSIGN(snap::NodeRecord rb, repo.Record(b));
  const store::Store& s = repo.store();
  AE_ASSIGN(snap::PackageDeltas d,
            snap::PackageDeltasBetween([&s](const store::ObjectId& t) { return snap::LoadTree(s, t); },
                                       [&s](const store::ObjectId& o) { return s.Get(o); }, ra.tree, rb.tree));
  json list = json::array();
  for (const history::PackageInfo& p : history::MakePackageInfos(d)) {
    json j = {{"ecosystem", p.ecosystem}, {"op", p.op}, {"name", p.name}};
    if (!p.old_version.empty()) j["old_version"] = p.old_version;
    if (!p.new_version.empty()) j["new_version"] = p.new_version;
    if (p.dependency) j["dependency"] = true;
    list.push_back(std::move(j));
  }
  json out = {{"packages", std::move(list)}};
  if (std::string omitted = history::OmittedPackages(d); !omitted.empty()) out["packages_omitted"] = omitted;
  return out;
}

Result<json> NodesBetween(control::Server& server, const std::string& a, const std::string& b, size_t limit) {
  snap::Repo& repo = server.repo();
  AE_ASSIGN(store::ObjectId ia, repo.Resolve(a));
  AE_ASSIGN(store::ObjectId ib, repo.Resolve(b));
  AE_ASSIGN(snap::NodeRecord ra, repo.Record(ia));
  AE_ASSIGN(snap::NodeRecord rb, repo.Record(ib));
  const snap::NodeRecord& older = ra.time_ns <= rb.time_ns ? ra : rb;
  const snap::NodeRecord& newer = ra.time_ns <= rb.time_ns ? rb : ra;
  json nodes = json::array();
  // Walk the newer's parents back to the older's time: the nodes between
  // them on the newer's line (all of them when the older is its ancestor).
  std::optional<snap::NodeRecord> at = newer;
  bool related = false;
  uint64_t more = 0;
  while (at && at->time_ns >= older.time_ns) {
    if (at->id == older.id) {
      related = true;
      break;
    }
    if (nodes.size() < limit) {
      json j = {{"id", at->id.Hex()}, {"short", history::Short(at->id)}, {"time_ns", at->time_ns},
                {"title", at->title}, {"changes", at->changes}};
      AddProvenanceFacts(j, *at);
      if (at->packages) j["packages"] = history::MakePackageInfos(*at->packages).size();
      nodes.push_back(std::move(j));
    } else if (++more >= 10000) {
      break;  // bounded: past this, "10000 more" reads as "many"
    }
    if (!at->parent) break;
    AE_ASSIGN(auto parent, repo.meta().GetNode(*at->parent));
    at = std::move(parent);
  }
  return json{{"nodes", std::move(nodes)}, {"more", more}, {"related", related}};
}

}  // namespace agentenv::web
