// Writing a node as a tarball (`agentenv export`), streamed straight from
// the store: nothing is materialized on disk.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/progress.h"
#include "common/result.h"
#include "archive/tar_stream.h"
#include "snap/node.h"
#include "store/store.h"

namespace agentenv::archive {

struct ExportStats {
  uint64_t entries = 0, bytes = 0, whiteouts = 0;
  std::vector<std::string> warnings;  // what was left out: sockets (tar has none)
};

// Writes node `n` (or, with `base`, only what changed since tree `base`,
// deletions as OCI ".wh." whiteouts) to `out` as a pax tar, compressed by
// the file name's suffix (.gz, .zst, else none). The same node always
// gives the same bytes: walk order is sorted, owners are numeric, no
// atime/ctime, no gzip timestamp. Sockets are left out, one warning each.
// Errors: I/O, missing objects.
// `progress` (may be null) counts entries and bytes written.
Result<ExportStats> ExportTar(const store::Store& s, const snap::Node& n,
                              const std::optional<store::ObjectId>& base, const std::string& out,
                              Progress* progress = nullptr);

// The same uncompressed pax tar as ExportTar, handed to `sink` in order
// (an OCI layer hashed while it is written); `name` names it in errors.
Result<ExportStats> ExportTarTo(const store::Store& s, const snap::Node& n,
                                const std::optional<store::ObjectId>& base, const TarSink& sink,
                                const std::string& name);

}  // namespace agentenv::archive
