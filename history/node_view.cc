// The views of nodes every reply shares (history/node_view.h).
#include "history/node_view.h"

#include <cstdio>
#include <ctime>

namespace agentenv::history {

std::string Short(const store::ObjectId& id) { return id.Hex().substr(0, 12); }

std::string FormatTime(int64_t ns) {
  time_t t = time_t(ns / 1000000000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string HumanBytes(uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::vector<PackageInfo> MakePackageInfos(const snap::PackageDeltas& d) {
  std::vector<PackageInfo> out;
  for (const snap::PackageDelta& x : d.items)
    out.push_back({std::string(snap::EcosystemName(x.ecosystem)), std::string(1, x.op), x.name, x.old_version,
                   x.new_version, x.where, x.dependency});
  return out;
}

std::string OmittedPackages(const snap::PackageDeltas& d) {
  std::string out;
  for (const auto& [eco, n] : d.omitted)
    out += (out.empty() ? "" : ", ") + std::string(snap::EcosystemName(eco)) + " " + std::to_string(n);
  return out;
}

NodeInfo MakeNodeInfo(const snap::NodeRecord& r) {
  NodeInfo n;
  n.id = r.id.Hex();
  n.short_id = Short(r.id);
  n.seq = r.seq;
  n.time = FormatTime(r.time_ns);
  n.time_ns = r.time_ns;
  n.title = r.title;
  n.changes = r.changes;
  if (r.parent) n.parent = r.parent->Hex();
  n.damaged = r.damaged();
  n.damage = r.damage;
  if (r.packages) {
    n.packages = MakePackageInfos(*r.packages);
    n.packages_omitted = OmittedPackages(*r.packages);
  }
  return n;
}

ChangeInfo MakeChangeInfo(const snap::Change& c) { return {std::string(1, c.op), c.path, c.is_dir}; }

}  // namespace agentenv::history
