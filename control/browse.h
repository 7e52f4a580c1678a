// Reading a node's files without restoring it: `agentenv ls REF [PATH]`
// and `agentenv cat REF PATH`. Readers: they never take the lock.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/client.h"
#include "control/types.h"

namespace agentenv::control {

struct ListedEntry {
  std::string name, kind;  // kind: file, dir, symlink, hardlink, fifo, char, block, socket
  uint32_t mode = 0, uid = 0, gid = 0;
  uint64_t size = 0;
  std::string target;  // symlink or hardlink target
  template <class V> void Fields(V& v) {
    v("name", name); v("kind", kind); v("mode", mode); v("uid", uid); v("gid", gid); v("size", size);
    v("target", target, kOmitEmpty);
  }
};
struct LsReply {
  std::string node, path;
  std::vector<ListedEntry> entries;  // a directory's entries, or the one entry PATH names
  template <class V> void Fields(V& v) { v("node", node); v("path", path); v("entries", entries); }
};

// Errors: kNotFound (the ref, or "<path>: not in node <short>"), I/O.
Result<LsReply> List(Client& client, const std::string& ref, const std::string& path);
// Same, on a server of this process (a daemon's). Thread-safe.
Result<LsReply> List(Server& server, const std::string& ref, const std::string& path);

// Streams the content of the regular file at `path` in node `ref` to
// `sink` (a hardlink's target's content). Errors: kNotFound, kInvalid
// ("<path>: a directory, not a file"), I/O, kCorrupt.
Result<void> Cat(Client& client, const std::string& ref, const std::string& path,
                 const std::function<Result<void>(std::span<const uint8_t>)>& sink);
// Same, on a server of this process (a daemon's). Thread-safe.
Result<void> Cat(Server& server, const std::string& ref, const std::string& path,
                 const std::function<Result<void>(std::span<const uint8_t>)>& sink);

}  // namespace agentenv::control
