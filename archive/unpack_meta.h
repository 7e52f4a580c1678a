// What an unpack (archive/tarball.cc) keeps beside libarchive's disk
// writer: owners by number, the owners an unprivileged process cannot
// give, the POSIX ACLs libarchive reads but does not set, the directories
// an archive leaves implicit, and what the repository's ignore rules will
// leave out of the node.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "archive/libarchive.h"
#include "common/result.h"
#include "snap/scan.h"

namespace agentenv::archive {

// Makes `disk` (a libarchive disk writer) give files the numeric owners
// the archive names, as OCI layers and containerd do (--numeric-owner): a
// rootfs's owners are its own, not the names this host maps. A name is
// looked up in this host's passwd or group file only where the archive
// gives no id (an ACL entry "user:lp:rw-" without star's numeric field).
void UseNumericOwners(const ArchiveLib& A, ::archive* disk);
// The id of user (or group) `name` for an ACL entry whose id is `id`:
// `id` when it is one (>= 0), else the host's, else -1. Thread-safe.
int64_t AclUserId(const char* name, int64_t id);
int64_t AclGroupId(const char* name, int64_t id);

// Unpacking without privilege, the owners the archive names are kept in
// snap::kOwnerXattr (scans record them from there), and the entry is
// written as ours, so that libarchive keeps its setuid/setgid bits (it
// drops them from a file whose owner it could not set).
class RootlessOwners {
 public:
  // Rewrites entry `e` (named `name`) before it is written.
  void Keep(const ArchiveLib& A, archive_entry* e, const std::string& name);
  // One warning for the symlinks and special files whose owner was lost.
  void Report(const std::function<void(const std::string&)>& warn) const;

 private:
  uint64_t uid_ = ::geteuid(), gid_ = ::getegid();
  uint64_t lost_ = 0;
  std::string first_lost_;
};

// POSIX ACLs written as xattrs (SCHILY.xattr.system.posix_acl_*: GNU tar
// --xattrs, agentenv's export), which libarchive reads but never sets: it
// sets ACLs only from its own records (SCHILY.acl.*, ARCHIVE_EXTRACT_ACL),
// and the default ACL from those only on directories it makes, never on
// the root, which exists. Applied once every entry is written, like
// libarchive's directory ACLs, so that no default ACL shapes the entries
// made below it.
class AclXattrs {
 public:
  // Notes the ACLs of entry `e`, to be written as `name` ("." the root).
  void Keep(const ArchiveLib& A, archive_entry* e, const std::string& name);
  // Sets them, relative to the current directory, on each name that
  // `reachable` says exists with only directories above it (no symlink
  // is followed); one that is a symlink now is skipped. An ACL the
  // filesystem refuses is a warning ("<name>: <xattr> not restored:
  // <errno text>"). Errors: those of `reachable`.
  Result<void> Apply(const std::function<Result<bool>(const std::string&)>& reachable,
                     const std::function<void(const std::string&)>& warn) const;

 private:
  void KeepRootDefault(const ArchiveLib& A, archive_entry* e);

  struct Acl {
    std::string name, key, value;
  };
  std::vector<Acl> acls_;
};

// The directories an archive leaves implicit (a/b/f with no a/ or a/b/
// entry), which libarchive makes with the time of the unpack: they get
// mode 0755, the owner of the tree's root and the newest mtime of the
// entries below them, so that the same archive gives the same node.
class ImpliedDirs {
 public:
  // Before entry `name` (mtime `mtime`; a directory when `is_dir`) is
  // written, relative to the current directory: notes each directory above
  // it that does not exist yet, and unnotes `name` itself when it is one
  // (its own entry gives its metadata). Errors: lstat's.
  Result<void> Before(const std::string& name, bool is_dir, timespec mtime);
  // Whether `name` is a directory the unpack made without an entry.
  bool Has(const std::string& name) const { return implied_.count(name) > 0; }
  // Sets the metadata of each noted directory that `reachable` says exists
  // with only directories above it and is still a directory (a later entry
  // may have replaced it). Run after libarchive's writer is closed. As root
  // the owner is given with lchown; without privilege, an owner other than
  // the process's is kept in snap::kOwnerXattr. Errors: I/O.
  Result<void> Apply(const std::function<Result<bool>(const std::string&)>& reachable) const;

 private:
  std::map<std::string, timespec> implied_;  // directory -> newest mtime below it
  std::unordered_map<std::string, bool> known_;  // exists before the unpack made anything there
};

// The entries of an archive that the scan of the unpacked tree will leave
// out of the node (snap/scan.h): those below an ignored directory, and
// ignored files (an ignored directory itself is kept, empty).
class IgnoredEntries {
 public:
  explicit IgnoredEntries(snap::PathFilter ignored) : ignored_(std::move(ignored)) {}
  void See(const std::string& name, bool is_dir);
  // One warning naming how many and the first few, when any.
  void Report(const std::function<void(const std::string&)>& warn) const;

 private:
  snap::PathFilter ignored_;
  std::unordered_map<std::string, bool> dir_ignored_;  // a directory's verdict, by path
  uint64_t count_ = 0;
  std::vector<std::string> first_;
};

}  // namespace agentenv::archive
