// fsck as a control operation: the store check (or repair), the history
// check and the live tree's state, in one reply. Findings are also handed
// to a callback as they are found (a long check shows them at once).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/client.h"
#include "control/types.h"

namespace agentenv::control {

struct FsckRequest {
  bool structure_only = false;  // index and record headers only, no re-hash
  double subset = 100;          // percent of chunks re-hashed
  bool repair = false;
  // Also check each ready lower (lowers/<tree>) against its tree; with
  // `repair`, one that differs is removed (built again on next use).
  bool lowers = false;
};

struct FsckFinding {
  std::string kind, severity, message;  // severity: "error" or "warning"
  std::string id, pack;                 // when known
  std::optional<uint64_t> offset;
  template <class V> void Fields(V& v) {
    v("kind", kind); v("severity", severity); v("message", message); v("id", id, kOmitEmpty);
    v("pack", pack, kOmitEmpty); v("offset", offset, kOmitEmpty);
  }
};

struct FsckReply {
  uint64_t objects = 0, verified = 0, bytes_verified = 0, packs = 0, errors = 0, warnings = 0, damaged = 0;
  std::vector<FsckFinding> findings;
  json live;  // {"dirty","changed"} or {"dirty":null,"error"}
  std::string live_text;
  bool repaired = false;
  std::vector<std::string> lost, fixed;
  std::vector<NodeInfo> marked, healed;
  uint64_t stat_cleared = 0, counts_fixed = 0;
  uint64_t lowers_checked = 0, lowers_removed = 0;
  bool ok() const { return errors == 0; }
  template <class V> void Fields(V& v) {
    v("objects", objects); v("verified", verified); v("bytes_verified", bytes_verified); v("packs", packs);
    v("errors", errors); v("warnings", warnings); v("damaged", damaged); v("findings", findings); v("live", live);
    v("lowers_checked", lowers_checked); v("lowers_removed", lowers_removed);
    if (repaired) {
      v("lost", lost); v("marked", marked); v("healed", healed); v("fixed", fixed); v("stat_cleared", stat_cleared);
      v("counts_fixed", counts_fixed);
    }
  }
};

struct FsckProgress {
  uint64_t bytes_done = 0, bytes_total = 0, records = 0;
};

struct FsckCallbacks {
  std::function<void(const FsckFinding&)> finding;  // each finding as it is found
  std::function<void(const FsckProgress&)> progress;
  std::function<void(const std::string&)> repaired;  // one line per repair action
};

// Runs here (a reader; a repair takes the repository lock itself).
// Callbacks may run on two threads, never at once. Errors: I/O; damage is
// in the reply (errors > 0), not an error.
Result<FsckReply> Fsck(Client& client, const FsckRequest& r, const FsckCallbacks& cb);

}  // namespace agentenv::control
