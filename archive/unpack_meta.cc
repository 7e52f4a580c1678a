#include "archive/unpack_meta.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "snap/fsops.h"

namespace agentenv::archive {
namespace {

constexpr const char* kAccess = "system.posix_acl_access";
constexpr const char* kDefault = "system.posix_acl_default";

// The id a name that is all digits stands for, else -1.
int64_t NumericName(const char* name) {
  if (!name || !*name || std::strlen(name) > 10) return -1;
  for (const char* c = name; *c; ++c)
    if (*c < '0' || *c > '9') return -1;
  return std::strtoll(name, nullptr, 10);
}

la_int64_t UserLookup(void*, const char* name, la_int64_t id) { return AclUserId(name, id); }
la_int64_t GroupLookup(void*, const char* name, la_int64_t id) { return AclGroupId(name, id); }

}  // namespace

int64_t AclUserId(const char* name, int64_t id) {
  if (id >= 0 || !name || !*name) return id;
  char buf[4096];
  struct passwd pw, *found = nullptr;
  if (::getpwnam_r(name, &pw, buf, sizeof buf, &found) == 0 && found) return found->pw_uid;
  return NumericName(name);
}

int64_t AclGroupId(const char* name, int64_t id) {
  if (id >= 0 || !name || !*name) return id;
  char buf[4096];
  struct group gr, *found = nullptr;
  if (::getgrnam_r(name, &gr, buf, sizeof buf, &found) == 0 && found) return found->gr_gid;
  return NumericName(name);
}

void UseNumericOwners(const ArchiveLib& A, ::archive* disk) {
  A.archive_write_disk_set_user_lookup(disk, nullptr, UserLookup, nullptr);
  A.archive_write_disk_set_group_lookup(disk, nullptr, GroupLookup, nullptr);
}

void RootlessOwners::Keep(const ArchiveLib& A, archive_entry* e, const std::string& name) {
  uint64_t uid = uint64_t(A.archive_entry_uid(e)), gid = uint64_t(A.archive_entry_gid(e));
  if (uid == uid_ && gid == gid_) return;
  mode_t type = A.archive_entry_filetype(e);
  if (A.archive_entry_hardlink(e)) return;  // the inode has its owner from the first entry
  if (type != AE_IFREG && type != AE_IFDIR) {
    if (lost_++ == 0) first_lost_ = name + ": owner " + std::to_string(uid) + ":" + std::to_string(gid);
    return;
  }
  std::string value = std::to_string(uid) + ":" + std::to_string(gid);
  A.archive_entry_xattr_add_entry(e, snap::kOwnerXattr, value.data(), value.size());
  A.archive_entry_set_uid(e, uid_);
  A.archive_entry_set_gid(e, gid_);
}

void RootlessOwners::Report(const std::function<void(const std::string&)>& warn) const {
  if (lost_ == 0) return;
  warn(first_lost_ + " not kept (needs root: only files and directories can carry " + snap::kOwnerXattr + "); " +
       std::to_string(lost_) + " symlink(s) or special file(s) belong to the unpacking user");
}

void AclXattrs::Keep(const ArchiveLib& A, archive_entry* e, const std::string& name) {
  const char* key;
  const void* value;
  size_t size;
  bool has_default = false;
  for (int n = A.archive_entry_xattr_reset(e); n > 0; --n) {
    A.archive_entry_xattr_next(e, &key, &value, &size);
    if (!key || (std::strcmp(key, kAccess) != 0 && std::strcmp(key, kDefault) != 0)) continue;
    acls_.push_back({name, key, std::string(static_cast<const char*>(value), size)});
    has_default |= std::strcmp(key, kDefault) == 0;
  }
  if (name == "." && !has_default) KeepRootDefault(A, e);
}

// The root's default ACL from libarchive's records, encoded as the
// kernel's xattr (numeric ids, as agentenv keeps owners).
void AclXattrs::KeepRootDefault(const ArchiveLib& A, archive_entry* e) {
  static const std::map<int, uint16_t> kTags = {
      {ARCHIVE_ENTRY_ACL_USER_OBJ, 0x01}, {ARCHIVE_ENTRY_ACL_USER, 0x02}, {ARCHIVE_ENTRY_ACL_GROUP_OBJ, 0x04},
      {ARCHIVE_ENTRY_ACL_GROUP, 0x08},    {ARCHIVE_ENTRY_ACL_MASK, 0x10}, {ARCHIVE_ENTRY_ACL_OTHER, 0x20}};
  if (A.archive_entry_acl_reset(e, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT) <= 0) return;
  std::vector<std::tuple<uint16_t, uint32_t, uint16_t>> aces;  // tag, id, permissions
  int type, perm, tag, id;
  const char* who;
  while (A.archive_entry_acl_next(e, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT, &type, &perm, &tag, &id, &who) == ARCHIVE_OK) {
    auto t = kTags.find(tag);
    if (t == kTags.end()) return;
    int64_t qualifier = tag == ARCHIVE_ENTRY_ACL_USER    ? AclUserId(who, id)
                        : tag == ARCHIVE_ENTRY_ACL_GROUP ? AclGroupId(who, id)
                                                         : int64_t(0xffffffff);
    if (qualifier < 0) return;  // a name this host does not know, and no id
    aces.emplace_back(t->second, uint32_t(qualifier), uint16_t(perm & 7));
  }
  std::sort(aces.begin(), aces.end());  // the kernel wants tag, then id order
  std::string v;
  auto put = [&](uint64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) v.push_back(char(x >> (8 * i)));
  };
  put(2, 4);  // POSIX_ACL_XATTR_VERSION
  for (const auto& [t, ace_id, p] : aces) put(t, 2), put(p, 2), put(ace_id, 4);
  acls_.push_back({".", kDefault, v});
}

Result<void> AclXattrs::Apply(const std::function<Result<bool>(const std::string&)>& reachable,
                              const std::function<void(const std::string&)>& warn) const {
  for (const Acl& a : acls_) {
    struct stat st;
    if (a.name != ".") {
      AE_ASSIGN(bool exists, reachable(a.name));
      if (!exists || ::lstat(a.name.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    }
    if (::lsetxattr(a.name.c_str(), a.key.c_str(), a.value.data(), a.value.size(), 0) != 0)
      warn(a.name + ": " + a.key + " not restored: " + std::strerror(errno));
  }
  return {};
}

Result<void> ImpliedDirs::Before(const std::string& name, bool is_dir, timespec mtime) {
  auto newer = [](timespec a, timespec b) { return std::pair(a.tv_sec, a.tv_nsec) > std::pair(b.tv_sec, b.tv_nsec); };
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
    std::string dir = name.substr(0, slash);
    if (auto it = implied_.find(dir); it != implied_.end()) {
      if (newer(mtime, it->second)) it->second = mtime;
      continue;
    }
    auto [known, fresh] = known_.try_emplace(dir, true);
    if (!fresh) continue;
    // Its parent exists as a directory (checked on the way down), so this
    // looks at no path through a symlink the archive made.
    struct stat st;
    if (::lstat(dir.c_str(), &st) == 0) continue;
    if (errno != ENOENT) return FailErrno(dir, errno);
    known_.erase(known);
    implied_.emplace(dir, mtime);
  }
  if (is_dir) {
    implied_.erase(name);
    known_[name] = true;
  }
  return {};
}

Result<void> ImpliedDirs::Apply(const std::function<Result<bool>(const std::string&)>& reachable) const {
  if (implied_.empty()) return {};
  const bool root = ::geteuid() == 0;
  struct stat top;
  if (::stat(".", &top) != 0) return FailErrno(".", errno);
  // The owner of the tree's root: without privilege, the one it keeps in
  // kOwnerXattr when it has one.
  uint64_t uid = top.st_uid, gid = top.st_gid;
  std::string owner(64, '\0');
  if (!root) {
    ssize_t n = ::getxattr(".", snap::kOwnerXattr, owner.data(), owner.size());
    unsigned long long u, g;
    owner.resize(n > 0 ? size_t(n) : 0);
    if (std::sscanf(owner.c_str(), "%llu:%llu", &u, &g) == 2) uid = u, gid = g;
    owner = std::to_string(uid) + ":" + std::to_string(gid);
  }
  for (const auto& [dir, mtime] : implied_) {
    AE_ASSIGN(bool exists, reachable(dir));
    struct stat st;
    if (!exists || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (root && ::lchown(dir.c_str(), uid_t(uid), gid_t(gid)) != 0) return FailErrno(dir, errno);
    if (!root && (uid != st.st_uid || gid != st.st_gid) &&
        ::lsetxattr(dir.c_str(), snap::kOwnerXattr, owner.data(), owner.size(), 0) != 0)
      return FailErrno(dir, errno);
    if (::fchmodat(AT_FDCWD, dir.c_str(), 0755, 0) != 0) return FailErrno(dir, errno);
    struct timespec ts[2] = {{0, UTIME_OMIT}, mtime};
    if (::utimensat(AT_FDCWD, dir.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(dir, errno);
  }
  return {};
}

void IgnoredEntries::See(const std::string& name, bool is_dir) {
  if (!ignored_) return;
  // As the scan asks: a path only when no directory above it is ignored.
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
    std::string dir = name.substr(0, slash);
    auto [it, fresh] = dir_ignored_.try_emplace(dir, false);
    if (fresh) it->second = ignored_(dir, true);
    if (!it->second) continue;
    if (count_++ < 3) first_.push_back(name);
    return;
  }
  if (is_dir || !ignored_(name, false)) return;
  if (count_++ < 3) first_.push_back(name);
}

void IgnoredEntries::Report(const std::function<void(const std::string&)>& warn) const {
  if (count_ == 0) return;
  std::string names;
  for (const std::string& n : first_) names += (names.empty() ? "" : ", ") + n;
  if (count_ > first_.size()) names += ", ...";
  warn(std::to_string(count_) + " entr" + (count_ == 1 ? "y" : "ies") +
       " under ignored paths left out of the node (" + names +
       "): the repository does not version them (built-in ignore rules and <root>/ignore)");
}

}  // namespace agentenv::archive
