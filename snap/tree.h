// snap/tree: the format of directory (kTree) objects.
//
// A tree object lists one directory's entries sorted by name (bytewise), so
// equal directories hash equal and two trees diff by skipping equal ids.
// Each entry carries the full metadata of what it names; a subdirectory's
// entry holds that directory's own metadata plus the id of its tree.
// Hardlinks: the first path of a group in sorted walk order is a normal
// file entry; every other path is a kHardlink entry naming that first path.
// The byte format is documented in docs/design.md ("Tree objects").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace agentenv::snap {

enum class Kind : uint8_t {
  kFile = 1,
  kDir = 2,
  kSymlink = 3,
  kHardlink = 4,  // another path of an earlier file entry: `target`
  kFifo = 5,
  kChar = 6,
  kBlock = 7,
  kSocket = 8,
};
std::string_view KindName(Kind k);

using Xattrs = std::vector<std::pair<std::string, std::string>>;  // sorted by name

// Inode metadata as restored. Unused (zero) for kHardlink entries.
struct Meta {
  uint32_t mode = 0;  // permission bits incl. setuid/setgid/sticky (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t mtime_ns = 0;
  Xattrs xattrs;
  bool operator==(const Meta&) const = default;
};

struct Entry {
  std::string name;  // one path component: any bytes but '/' and NUL
  Kind kind = Kind::kFile;
  Meta meta;
  uint64_t size = 0;    // kFile: logical bytes
  store::ObjectId id;   // kFile: content (chunk or manifest); kDir: tree
  store::ObjectType content = store::ObjectType::kChunk;  // kFile only
  std::string target;   // kSymlink: link text; kHardlink: tree-relative path
  uint64_t rdev = 0;    // kChar, kBlock
  bool operator==(const Entry&) const = default;

  store::FileRef file() const { return {id, content, size}; }
};

using Tree = std::vector<Entry>;  // sorted by name, names unique

// Serializes a sorted tree. Deterministic: equal trees give equal bytes.
std::vector<uint8_t> EncodeTree(const Tree& t);
// Errors: kCorrupt naming `what` (usually the object id) on malformed bytes.
Result<Tree> DecodeTree(std::span<const uint8_t> bytes, std::string_view what);

// Reads and decodes tree `id` from the store. Errors: not found, corrupt.
Result<Tree> LoadTree(const store::Store& s, const store::ObjectId& id);

// The id of the empty tree (a directory with no entries).
const store::ObjectId& EmptyTreeId();

}  // namespace agentenv::snap
