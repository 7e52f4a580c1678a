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
  if (r.provenance) n.provenance = MakeProvenanceInfo(*r.provenance);
  return n;
}

ProvenanceInfo MakeProvenanceInfo(const snap::Provenance& p) {
  ProvenanceInfo i;
  i.kind = std::string(snap::KindName(p.kind));
  i.command = snap::CommandText(p);
  i.argv = p.argv;
  i.cwd = p.cwd;
  i.exit_code = p.outcome.exit_code;
  i.signal = int(p.outcome.signal);
  i.timed_out = p.outcome.timed_out;
  i.cancelled = p.outcome.cancelled;
  i.killed = p.outcome.killed;
  i.failed = p.outcome.failed();
  i.duration_ms = p.outcome.duration_ms;
  i.workspace = p.workspace;
  if (p.base) i.base = p.base->Hex();
  if (p.tournament) {
    const snap::TournamentRole& t = *p.tournament;
    i.tournament = TournamentInfo{t.id, t.index, t.count, t.test_exit_code, t.won};
  }
  if (p.restore) {
    const snap::RestoreLink& l = *p.restore;
    i.restore = RestoreInfo{l.source ? l.source->Hex() : "", l.target ? l.target->Hex() : "", l.paths, l.paths_omitted};
  }
  i.who = {std::string(snap::OriginName(p.who.origin)), p.who.client, p.who.session};
  i.message = p.message;
  i.source = p.source;
  if (p.thinned) {
    const snap::Thinned& t = *p.thinned;
    ThinnedInfo ti;
    ti.nodes = t.nodes;
    ti.failed = t.failed;
    for (const auto& [k, count] : t.kinds) ti.kinds[std::string(snap::KindName(k))] = count;
    ti.first = FormatTime(t.first_ns);
    ti.last = FormatTime(t.last_ns);
    ti.commands = t.commands;
    i.thinned = std::move(ti);
  }
  return i;
}

ChangeInfo MakeChangeInfo(const snap::Change& c) { return {std::string(1, c.op), c.path, c.is_dir}; }

OperationInfo MakeOperationInfo(const snap::Operation& op) {
  OperationInfo i;
  i.time = FormatTime(op.time_ns);
  i.time_ns = op.time_ns;
  i.kind = std::string(snap::OpKindName(op.kind));
  if (op.from) i.from = op.from->Hex();
  i.to = op.to.Hex();
  if (op.saved) i.saved = op.saved->Hex();
  i.who = {std::string(snap::OriginName(op.who.origin)), op.who.client, op.who.session};
  i.tournament = op.tournament;
  return i;
}

}  // namespace agentenv::history
