// store/nocow: LMDB files on btrfs without copy-on-write.
//
// LMDB rewrites its pages in place and orders its own writes (data pages,
// fdatasync, then the meta page), so btrfs's copy-on-write buys it nothing
// and costs every commit: each rewritten page is a new extent with a new
// checksum in the log tree. At 100k stored objects the metadata commit of
// a snapshot took 8-18 ms copy-on-write and 7-11 ms without
// (bench/RESULTS.md). The price: btrfs keeps no checksums of these files
// (scrub cannot see their damage; fsck checks the index against the
// packs, whose records carry their own hashes).
#pragma once

#include <string>

namespace agentenv::store {

// Marks the directory `dir`, just created and still empty, so that files
// made in it are not copied on write (FS_NOCOW_FL, which new files
// inherit). Only on btrfs; elsewhere, or where the flag cannot be set (an
// old kernel, not the owner), it does nothing: the files work either way.
// Thread-safe.
void MarkNoCow(const std::string& dir);

}  // namespace agentenv::store
