#include "archive/unpack_meta.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

#include "snap/fsops.h"

namespace agentenv::archive {
namespace {

constexpr const char* kAccess = "system.posix_acl_access";
constexpr const char* kDefault = "system.posix_acl_default";

}  // namespace

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
    bool named = tag == ARCHIVE_ENTRY_ACL_USER || tag == ARCHIVE_ENTRY_ACL_GROUP;
    aces.emplace_back(t->second, named ? uint32_t(id) : 0xffffffffu, uint16_t(perm & 7));
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

}  // namespace agentenv::archive
