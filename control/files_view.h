// A tree the file operations read (control/files.h): a node's stored tree
// or the live tree, behind one interface, and the symlink resolution both
// share. Internal to control/files*.cc.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "control/server.h"
#include "snap/tree.h"

namespace agentenv::control {

// One entry, as lstat(2) would tell it.
struct ViewEntry {
  std::string name, kind;  // snap::KindName's words
  uint64_t size = 0;
  std::string target;  // symlink text; hardlink: its tree-relative path
};

class FileView {
 public:
  virtual ~FileView() = default;
  // The entry at the clean tree-relative path `rel` ("" is the root),
  // symlinks not followed anywhere in it (the caller resolved them).
  // Errors: kNotFound "<rel>: not in <where>", I/O.
  virtual Result<ViewEntry> Lstat(const std::string& rel) = 0;
  // The entries of the directory at `rel`, sorted by name.
  virtual Result<std::vector<ViewEntry>> List(const std::string& rel) = 0;
  // At most `limit` bytes of the regular file at `rel` (a hardlink's
  // target's); *more: bytes beyond were left unread.
  virtual Result<std::string> Read(const std::string& rel, uint64_t limit, bool* more) = 0;
  // "node <short>" or "the live tree", for messages.
  virtual std::string Where() const = 0;
  // The node's short id, or "" for the live tree.
  virtual std::string Node() const = 0;
};

// A view of node `ref`, or of the live tree when ref is empty. Errors:
// kNotFound (the ref), I/O opening the live tree.
Result<std::unique_ptr<FileView>> OpenView(Server& s, const std::string& ref);

// The clean tree-relative path `path` leads to, every symlink on the way
// followed inside the tree (the last one too when follow_last). Errors:
// kNotFound (a component missing, or a parent no directory), kInvalid
// ("too many levels of symbolic links").
Result<std::string> ResolveIn(FileView& view, const std::string& path, bool follow_last);

// The live tree's directory fd for `rel` (a resolved path), opened
// beneath `root_fd` with no symlink anywhere. Errors: errno text.
Result<UniqueFd> OpenBeneath(int root_fd, const std::string& rel, int flags, const std::string& what);

// "a/b/c" -> "a/b" and "c"; "c" -> "" and "c".
std::string ParentOf(const std::string& rel);
std::string BaseOf(const std::string& rel);

}  // namespace agentenv::control
