// What the page shows before an action and in a comparison: the changes
// of a diff counted per top directory (the first two path components:
// "usr/lib", "root/proj"), the package deltas between two nodes, and the
// nodes between two nodes with their provenance. A person reads these
// before the paths: 3,000 npm cache files are one line, not 3,000.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "control/server.h"

namespace agentenv::web {

using json = nlohmann::json;

// {dirs: [{dir, added, modified, deleted, total}] most changed first (at
// most `max_dirs`, the rest summed in "other"), counted: the changes
// summed}, from a diff reply's "changes". Pure.
json DirectoryCounts(const json& changes, size_t max_dirs = 16);

// The package deltas from node `from` to node `to` (refs), as a node's
// "packages" list reads (history::PackageInfo), plus "packages_omitted".
// Errors: kNotFound for a ref, I/O, kCorrupt.
Result<json> PackagesBetween(control::Server& server, const std::string& from, const std::string& to);

// The nodes on HEAD's line from the older of `a` and `b` to the newer (the
// newer's ancestors down to the older, when it is one), newest first, at
// most `limit`: {nodes: [timeline node JSON with provenance facts],
// more, related: whether one is an ancestor of the other}. Errors: as
// PackagesBetween.
Result<json> NodesBetween(control::Server& server, const std::string& a, const std::string& b, size_t limit);

}  // namespace agentenv::web
