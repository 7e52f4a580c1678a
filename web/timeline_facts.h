// What the timeline draws from recorded provenance (snap/provenance.h) and
// the operation log (snap/oplog.h), so that a person sees the facts of a
// day, not dots: a command's exit code when it failed, a tournament's
// candidates and winner, the workspace a lane belongs to, and the HEAD
// moves (rollbacks, restores, a winner applied) as jumps from one node to
// another with the commands they undid.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "snap/meta.h"

namespace agentenv::web {

using json = nlohmann::json;

// Adds to a node's timeline JSON `j` the facts of its provenance: "kind",
// "command" (cut to a label's length), "failed" and "exit" (or "outcome"
// for a signal, timeout, cancel), "workspace", and "tournament" {id,
// index, count, won, test_exit}. Nothing for a record without provenance.
// Pure.
void AddProvenanceFacts(json& j, const snap::NodeRecord& n);

// The name of the lane a node is drawn in, from its provenance:
// "tournament <id> #<i>", "workspace <name>", "live tree", or "" (no
// provenance recorded).
std::string LaneName(const snap::NodeRecord& n);

// The HEAD moves with from_ns <= time <= to_ns, oldest first, at most
// `limit`: {time_ns, kind, from, to, from_ns, to_ns, from_lane, to_lane,
// tournament, undid: [titles of the nodes between `to` and `from` that the
// move left, newest first, at most 8], undid_more}. A node no longer in
// history is left out of its jump (the jump is still listed). Errors: I/O,
// kCorrupt.
Result<json> Jumps(const snap::MetaDb& meta, const snap::MetaDb::TimeReader& reader, int64_t from_ns, int64_t to_ns,
                   size_t limit);

}  // namespace agentenv::web
