// The timeline's facts from provenance and the operation log
// (web/timeline_facts.h).
#include "web/timeline_facts.h"

#include "history/node_view.h"
#include "snap/oplog.h"

namespace agentenv::web {
namespace {

// A label on the timeline is one line; the node view has the whole command.
constexpr size_t kCommandLabel = 60;
// The commands a jump lists as undone, and how far back it looks for them.
constexpr size_t kUndidListed = 8, kUndidWalk = 64;

}  // namespace

void AddProvenanceFacts(json& j, const snap::NodeRecord& n) {
  if (!n.provenance) return;
  const snap::Provenance& p = *n.provenance;
  j["kind"] = std::string(snap::KindName(p.kind));
  if (std::string cmd = snap::CommandText(p); !cmd.empty()) j["command"] = snap::CutUtf8(cmd, kCommandLabel);
  if (p.outcome.failed()) {
    j["failed"] = true;
    if (p.outcome.exit_code) j["exit"] = *p.outcome.exit_code;
  }
  if (std::string how = snap::OutcomeText(p.outcome); !how.empty()) j["outcome"] = how;
  if (!p.workspace.empty()) j["workspace"] = p.workspace;
  if (p.tournament) {
    const snap::TournamentRole& t = *p.tournament;
    json tj = {{"id", t.id}, {"index", t.index}, {"count", t.count}, {"won", t.won}};
    if (t.test_exit_code) tj["test_exit"] = *t.test_exit_code;
    j["tournament"] = std::move(tj);
  }
}

std::string LaneName(const snap::NodeRecord& n) {
  if (!n.provenance) return "";
  const snap::Provenance& p = *n.provenance;
  if (p.tournament) return "tournament " + p.tournament->id + " #" + std::to_string(p.tournament->index + 1);
  if (!p.workspace.empty()) return "workspace " + p.workspace;
  return "live tree";
}

Result<json> Jumps(const snap::MetaDb& meta, const snap::MetaDb::TimeReader& reader, int64_t from_ns, int64_t to_ns,
                   size_t limit) {
  AE_ASSIGN(auto ops, meta.Operations(from_ns, to_ns == INT64_MAX ? to_ns : to_ns + 1, limit));
  json out = json::array();
  for (const snap::Operation& op : ops) {
    json j = {{"time_ns", op.time_ns}, {"kind", std::string(snap::OpKindName(op.kind))}, {"to", op.to.Hex()}};
    if (!op.tournament.empty()) j["tournament"] = op.tournament;
    AE_ASSIGN(auto to, reader.GetNode(op.to));
    if (to) {
      AE_ASSIGN(auto row, reader.Row(*to));
      j["to_ns"] = to->time_ns;
      j["to_lane"] = row ? row->lane : 0;
      j["to_title"] = to->title;
    }
    if (op.from) {
      j["from"] = op.from->Hex();
      AE_ASSIGN(auto from, reader.GetNode(*op.from));
      if (from) {
        AE_ASSIGN(auto row, reader.Row(*from));
        j["from_ns"] = from->time_ns;
        j["from_lane"] = row ? row->lane : 0;
        // What the move left behind: `from` and its ancestors down to
        // `to` (a rollback's undone commands), when `to` is among them.
        json undid = json::array();
        std::optional<snap::NodeRecord> at = from;
        bool reached = false;
        for (size_t walked = 0; at && walked < kUndidWalk; ++walked) {
          if (at->id == op.to) {
            reached = true;
            break;
          }
          undid.push_back(at->title);
          if (!at->parent) break;
          AE_ASSIGN(at, reader.GetNode(*at->parent));
        }
        if (reached && !undid.empty()) {
          if (undid.size() > kUndidListed) j["undid_more"] = undid.size() - kUndidListed;
          undid.erase(undid.begin() + std::min(undid.size(), kUndidListed), undid.end());
          j["undid"] = std::move(undid);
        }
      }
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace agentenv::web
