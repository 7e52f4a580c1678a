// snap/oplog: the operation log, every move of HEAD a command made, as a
// table of the metadata index (snap/meta.h: `oplog`, docs/meta-format.md).
// A snapshot records itself as a node; a restore, a rollback or a
// tournament's apply moves HEAD without making one, so without this log
// the fact that it happened would be lost. A row is written in the
// transaction that moves HEAD (Repo::Restore, RestorePaths, fsck's
// repair), so a HEAD move and its row are never seen apart.
//
// Rows are keyed by their time, unique in the log (a row that would share
// a nanosecond with another takes the next free one), and read newest
// first or by time range with a limit: the log is never loaded whole.
// Retention removes rows that name a node it drops once they are older
// than its horizon (MetaDb::Txn::DropOperationsOf).
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "snap/provenance.h"
#include "store/store.h"

namespace agentenv::snap {

// Stored numbers: never renumber, only add. An unknown number (a newer
// writer's) is kept and reads as "unknown".
enum class OpKind : uint32_t {
  kUnknown = 0,
  kRestore = 1,          // the live tree put back to a node (restore, rollback)
  kPartialRestore = 2,   // some paths put back (HEAD moves to the node made of them)
  kTournamentApply = 3,  // a tournament's winner restored
  kBisect = 4,           // a bisect step checked a node out
  kRepair = 5,           // fsck --repair pointed HEAD at the newest node
};
// "unknown", "restore", "partial_restore", "tournament_apply", "bisect", "repair".
std::string_view OpKindName(OpKind k);
std::optional<OpKind> OpKindFromName(std::string_view name);

struct Operation {
  int64_t time_ns = 0;  // when; the row's key, unique in the log
  OpKind kind = OpKind::kUnknown;
  std::optional<store::ObjectId> from;   // HEAD before (absent: there was none)
  store::ObjectId to;                    // HEAD after
  std::optional<store::ObjectId> saved;  // the node that saved unsaved changes first
  Requester who;
  std::string tournament;  // kTournamentApply: the tournament's id
  bool operator==(const Operation&) const = default;
};

// The row's value (the time is its key). Texts cut to Provenance::kMaxName.
std::vector<uint8_t> EncodeOperation(const Operation& op);
// Errors: kCorrupt naming `what` (as DecodeProvenance).
Result<Operation> DecodeOperation(int64_t time_ns, std::span<const uint8_t> bytes, std::string_view what);

// The key of time `ns`: 8 bytes that sort as the signed times do.
void OperationKey(int64_t ns, uint8_t out[8]);
int64_t OperationTime(std::span<const uint8_t> key);

}  // namespace agentenv::snap
