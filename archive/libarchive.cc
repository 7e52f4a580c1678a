#include "archive/libarchive.h"

#include <dlfcn.h>

#include <string>

namespace agentenv::archive {
namespace {

// The soname of libarchive 3.x, whose ABI archive.h describes.
constexpr const char* kLibrary = "libarchive.so.13";

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!*out && missing->empty()) *missing = name;
  return *out != nullptr;
}

Result<ArchiveLib> Load() {
  // Never unloaded: the functions are used until the process exits.
  void* lib = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  auto fail = [](const std::string& why) {
    return Fail(ErrorCode::kUnsupported, std::string(kLibrary) + ": " + why +
                                             "; export, import and init --tarball need libarchive");
  };
  if (!lib) {
    const char* err = ::dlerror();
    return fail(err ? err : "cannot be loaded");
  }
  ArchiveLib a{};
  std::string missing;
#define AE_RESOLVE(fn) Resolve(lib, #fn, &a.fn, &missing)
  bool ok = AE_RESOLVE(archive_errno) && AE_RESOLVE(archive_set_error) && AE_RESOLVE(archive_error_string) && AE_RESOLVE(archive_entry_new) &&
            AE_RESOLVE(archive_entry_free) && AE_RESOLVE(archive_entry_filetype) &&
            AE_RESOLVE(archive_entry_hardlink) && AE_RESOLVE(archive_entry_pathname) &&
            AE_RESOLVE(archive_entry_size) && AE_RESOLVE(archive_entry_uid) && AE_RESOLVE(archive_entry_sparse_add_entry) &&
            AE_RESOLVE(archive_entry_sparse_reset) && AE_RESOLVE(archive_entry_sparse_next) &&
            AE_RESOLVE(archive_entry_gid) && AE_RESOLVE(archive_entry_mtime) &&
            AE_RESOLVE(archive_entry_mtime_nsec) && AE_RESOLVE(archive_entry_set_filetype) &&
            AE_RESOLVE(archive_entry_set_gid) && AE_RESOLVE(archive_entry_set_hardlink) &&
            AE_RESOLVE(archive_entry_set_mtime) && AE_RESOLVE(archive_entry_set_pathname) &&
            AE_RESOLVE(archive_entry_set_perm) && AE_RESOLVE(archive_entry_set_rdev) &&
            AE_RESOLVE(archive_entry_set_size) && AE_RESOLVE(archive_entry_set_symlink) &&
            AE_RESOLVE(archive_entry_set_uid) && AE_RESOLVE(archive_entry_xattr_add_entry) &&
            AE_RESOLVE(archive_entry_xattr_reset) && AE_RESOLVE(archive_entry_xattr_next) &&
            AE_RESOLVE(archive_entry_acl_reset) && AE_RESOLVE(archive_entry_acl_next) && AE_RESOLVE(archive_entry_acl_add_entry) &&
            AE_RESOLVE(archive_read_new) && AE_RESOLVE(archive_read_free) &&
            AE_RESOLVE(archive_read_support_filter_gzip) && AE_RESOLVE(archive_read_support_filter_xz) &&
            AE_RESOLVE(archive_read_support_filter_zstd) && AE_RESOLVE(archive_read_support_format_tar) &&
            AE_RESOLVE(archive_read_support_format_raw) && AE_RESOLVE(archive_read_open_memory) &&
            AE_RESOLVE(archive_read_open) && AE_RESOLVE(archive_write_set_format_raw) &&
            AE_RESOLVE(archive_write_set_bytes_in_last_block) &&
            AE_RESOLVE(archive_read_open_filename) && AE_RESOLVE(archive_read_open_fd) && AE_RESOLVE(archive_read_next_header) &&
            AE_RESOLVE(archive_read_data_block) && AE_RESOLVE(archive_write_new) &&
            AE_RESOLVE(archive_write_free) && AE_RESOLVE(archive_write_set_format_pax) &&
            AE_RESOLVE(archive_write_set_format_option) && AE_RESOLVE(archive_write_set_options) &&
            AE_RESOLVE(archive_write_add_filter_gzip) && AE_RESOLVE(archive_write_add_filter_zstd) &&
            AE_RESOLVE(archive_write_open_filename) && AE_RESOLVE(archive_write_open) && AE_RESOLVE(archive_write_header) &&
            AE_RESOLVE(archive_write_data) && AE_RESOLVE(archive_write_data_block) &&
            AE_RESOLVE(archive_write_finish_entry) && AE_RESOLVE(archive_write_close) &&
            AE_RESOLVE(archive_write_disk_new) && AE_RESOLVE(archive_write_disk_set_options) &&
            AE_RESOLVE(archive_write_disk_set_user_lookup) && AE_RESOLVE(archive_write_disk_set_group_lookup);
#undef AE_RESOLVE
  if (!ok) return fail("has no " + missing + " (too old)");
  return a;
}

}  // namespace

Result<const ArchiveLib*> LoadArchiveLib() {
  static const Result<ArchiveLib> lib = Load();
  if (!lib) return Unexpected<Error>(lib.error());
  return &*lib;
}

}  // namespace agentenv::archive
