// fsck: integrity check and repair of a store. Reads every pack
// sequentially, re-hashes the content of indexed records (in parallel),
// and checks the index against the packs in both directions, including
// the per-pack dead accounting of dropped objects. Problems are reported
// one by one through a callback; the function fails only when it cannot
// check at all (e.g. the index is unreadable).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/inspect.h"
#include "store/store.h"

namespace agentenv::fsck {

struct FsckOptions {
  // Decompress and re-hash indexed records. Off: structure only (index
  // against record headers and accounting; payloads are not even read).
  bool verify_content = true;
  // With verify_content: the share of chunks (0-100) whose content is
  // verified, chosen by id so that the same ids are picked every run.
  // Manifests, trees and nodes are always verified.
  double subset_percent = 100;
  // Hashing threads; 0 means one per core.
  unsigned threads = 0;
  // Index entries held at once while matching them with the records
  // (packs go in groups of about this many objects, one index walk each);
  // 0: 256k (16 MB). Small values are for tests.
  uint64_t group_entries = 0;
};

enum class Severity {
  kError,    // data is lost or wrong: the CLI exits non-zero
  kWarning,  // harmless leftovers (e.g. a pack file a killed writer left)
};

struct FsckFinding {
  Severity severity = Severity::kError;
  // Stable machine-readable kind: "bad-record", "hash-mismatch",
  // "decode-error", "missing-record", "index-mismatch", "pack-missing",
  // "pack-short", "pack-accounting" (record counts or dead counts off),
  // "unknown-pack-file", "bad-manifest", "missing-chunk". Records of
  // dropped objects are not findings; they are counted in dead_records.
  std::string kind;
  std::optional<store::ObjectId> id;  // the object concerned, when known
  std::optional<uint32_t> pack;       // where, when known
  std::optional<uint64_t> offset;     // of the record header in the pack
  std::string message;                // one line for humans, with all of the above
};

struct FsckProgress {
  uint64_t bytes_done = 0;   // pack bytes scanned so far
  uint64_t bytes_total = 0;  // committed pack bytes in all
  uint64_t records = 0;      // records scanned so far
};

struct FsckReport {
  uint64_t packs = 0;
  uint64_t records = 0;        // pack records scanned
  uint64_t objects = 0;        // index entries checked
  uint64_t bytes_checked = 0;  // pack bytes scanned
  uint64_t objects_verified = 0;  // records whose content was re-hashed
  uint64_t bytes_verified = 0;    // their uncompressed bytes
  uint64_t dead_records = 0;      // records of dropped objects awaiting compaction
  uint64_t errors = 0;
  uint64_t warnings = 0;
  bool ok() const { return errors == 0; }
};

struct FsckCallbacks {
  std::function<void(const FsckProgress&)> progress;  // may be empty; called every few MB
  std::function<void(const FsckFinding&)> finding;    // may be empty
};

// Checks `s`. Safe to run while another process writes or compacts (it
// checks the index as of its start; objects committed later are not
// checked, objects moved by a compaction are re-read at their new place).
// Errors: I/O that prevents checking.
Result<FsckReport> CheckStore(const store::Store& s, const FsckOptions& opts,
                              const FsckCallbacks& cb);

struct RepairReport {
  FsckReport before;               // the full check that found the damage
  uint32_t packs_rewritten = 0;
  std::vector<store::LostObject> lost;  // objects dropped from the index
};

// Repairs `s` so that a full check passes: runs a full check, then, under
// the writer lock, rewrites every pack with a finding, keeping each
// indexed object that has a verified record and dropping (and reporting)
// the ones that have none; finally drops manifests whose chunks were lost
// (their files cannot be read back). Dead records and healthy packs are
// left alone. cb receives the findings of the first check. Errors: I/O.
Result<RepairReport> RepairStore(store::Store& s, const FsckCallbacks& cb);

}  // namespace agentenv::fsck
