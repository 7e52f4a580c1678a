// What an unpack (archive/tarball.cc) keeps beside libarchive's disk
// writer: the owners an unprivileged process cannot give, and the POSIX
// ACLs libarchive reads but does not set.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "archive/libarchive.h"

namespace agentenv::archive {

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

}  // namespace agentenv::archive
