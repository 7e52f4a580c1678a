// Durable writes, one way for every module (docs/design.md "Durable
// writes"): a file is written under a temporary name in its target
// directory, fsynced, renamed into place, and the directory fsynced, so a
// crash leaves the old file or the new one, never a part. Thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "common/result.h"

namespace agentenv {

// Makes the entries of directory `dir` (files created, renamed or removed
// in it) durable. Errors: "<dir>: <strerror>".
Result<void> FsyncDir(const std::string& dir);

// Replaces (or creates) `dir`/`name` with `data`, mode `mode`, as above.
// The temporary file is `.<name>.tmp` in `dir`, removed on failure; a
// process killed mid-write leaves it, and the next write of the file
// truncates and reuses it, so kills never pile up temp files. Writers of
// one file must therefore not overlap (every caller holds a lock on the
// directory or owns it). Errors: "<path>: <strerror>" (ENOSPC included,
// never a short write taken for success).
Result<void> WriteFileDurably(const std::string& dir, const std::string& name, std::string_view data,
                              mode_t mode = 0644);

}  // namespace agentenv
