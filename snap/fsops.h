// snap/fsops: small filesystem primitives shared by scan and restore. All
// take a directory fd plus one name, never a path, and never follow a
// symlink in the last component, so nothing can lead outside the tree.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "snap/tree.h"

namespace agentenv::snap {

// Joins tree-relative paths: Join("", "a") == "a", Join("a", "b") == "a/b".
std::string Join(const std::string& dir, const std::string& name);

// The components of a tree-relative path: "a//b/" -> {"a", "b"}; "" and
// "/" -> none. "." and ".." are returned as they are (callers refuse "..").
std::vector<std::string> SplitPath(const std::string& path);
// A path a user gave for a place in the tree, normalized lexically:
// "./etc" and "/etc/" are "etc", "etc/.." is "" (the root). Errors:
// kInvalid "<path>: leads outside the tree" for one that climbs above it.
Result<std::string> TreePath(const std::string& path);

// Opens directory `name` in `dirfd` without following symlinks. Errors:
// rel (the tree-relative path, for the message) plus errno text.
Result<UniqueFd> OpenDirAt(int dirfd, const std::string& name, const std::string& rel);

// Extended attributes of `name` in `dirfd` (not followed), sorted by name.
// Filesystems without xattr support give an empty list.
Result<Xattrs> ReadXattrs(int dirfd, const std::string& name, const std::string& rel);

// Rootless, the owner a file should have, when the process could not give
// it that owner: "<uid>:<gid>" in this xattr on the file itself (like
// containers' user.containers.override_stat, owner only: the mode lives on
// the file, whose owner may set setuid/setgid bits). Scans take the owner
// from it and do not record the xattr; a privileged restore removes it.
// Only regular files and directories can carry user.* xattrs.
// Restores write a file as `.agentenv-tmp-<pid>-<n>` beside its target and
// rename it into place. Such names are never recorded (scans skip them) and
// a writer after a killed restore removes them (Repo: `restoring`).
std::string RestoreTempName(uint64_t n);
bool IsRestoreTempName(std::string_view name);

inline constexpr const char* kOwnerXattr = "user.agentenv.owner";
// Moves a kOwnerXattr in m->xattrs into m->uid/m->gid. A malformed value
// stays as an ordinary xattr.
void TakeOwnerXattr(Meta* m);
// Adds (or replaces) kOwnerXattr naming uid:gid to `x`, keeping it sorted.
void PutOwnerXattr(Xattrs* x, uint32_t uid, uint32_t gid);

// Sets owner (when `chown`), xattrs, mode and mtime of `name` in `dirfd`,
// in that order (chown clears setuid bits; mode must come after it).
// Symlinks get owner, xattrs and mtime only. Errors: rel + errno text.
Result<void> ApplyMeta(int dirfd, const std::string& name, const Meta& m, bool is_symlink,
                       bool chown, const std::string& rel);

// Removes `path` and everything below it without following symlinks,
// granting its owner access to directories whose mode denies it (a
// materialized tree or an overlay's work directory may hold 0000 dirs).
// A missing path is not an error. Errors: the first failure, path first.
Result<void> RemoveTree(const std::string& path);

// Nanoseconds since the epoch; a time int64_t cannot hold (before 1677 or
// after 2262, which a file system or an archive may carry) is the nearest
// one it can.
int64_t ToNs(const struct timespec& ts);
int64_t NowNs();

}  // namespace agentenv::snap
