// libarchive, loaded on first use. Only export, import and init --tarball
// need it; linking it made every command load it and its dependencies
// (libxml2, ICU, nettle, ...) at start-up, ~2.5 ms of each CLI call.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "common/result.h"

namespace agentenv::archive {

// The libarchive functions agentenv calls, named as in archive.h.
struct ArchiveLib {
  decltype(&::archive_errno) archive_errno;
  decltype(&::archive_set_error) archive_set_error;
  decltype(&::archive_error_string) archive_error_string;
  decltype(&::archive_entry_new) archive_entry_new;
  decltype(&::archive_entry_free) archive_entry_free;
  decltype(&::archive_entry_filetype) archive_entry_filetype;
  decltype(&::archive_entry_hardlink) archive_entry_hardlink;
  decltype(&::archive_entry_pathname) archive_entry_pathname;
  decltype(&::archive_entry_size) archive_entry_size;
  decltype(&::archive_entry_sparse_add_entry) archive_entry_sparse_add_entry;
  decltype(&::archive_entry_sparse_reset) archive_entry_sparse_reset;
  decltype(&::archive_entry_sparse_next) archive_entry_sparse_next;
  decltype(&::archive_entry_uid) archive_entry_uid;
  decltype(&::archive_entry_gid) archive_entry_gid;
  decltype(&::archive_entry_mtime) archive_entry_mtime;
  decltype(&::archive_entry_mtime_nsec) archive_entry_mtime_nsec;
  decltype(&::archive_entry_set_filetype) archive_entry_set_filetype;
  decltype(&::archive_entry_set_gid) archive_entry_set_gid;
  decltype(&::archive_entry_set_hardlink) archive_entry_set_hardlink;
  decltype(&::archive_entry_set_mtime) archive_entry_set_mtime;
  decltype(&::archive_entry_set_pathname) archive_entry_set_pathname;
  decltype(&::archive_entry_set_perm) archive_entry_set_perm;
  decltype(&::archive_entry_set_rdev) archive_entry_set_rdev;
  decltype(&::archive_entry_set_size) archive_entry_set_size;
  decltype(&::archive_entry_set_symlink) archive_entry_set_symlink;
  decltype(&::archive_entry_set_uid) archive_entry_set_uid;
  decltype(&::archive_entry_xattr_add_entry) archive_entry_xattr_add_entry;
  decltype(&::archive_entry_xattr_reset) archive_entry_xattr_reset;
  decltype(&::archive_entry_acl_reset) archive_entry_acl_reset;
  decltype(&::archive_entry_acl_next) archive_entry_acl_next;
  decltype(&::archive_entry_acl_add_entry) archive_entry_acl_add_entry;
  decltype(&::archive_entry_xattr_next) archive_entry_xattr_next;
  decltype(&::archive_read_new) archive_read_new;
  decltype(&::archive_read_free) archive_read_free;
  decltype(&::archive_read_support_filter_gzip) archive_read_support_filter_gzip;
  decltype(&::archive_read_support_filter_xz) archive_read_support_filter_xz;
  decltype(&::archive_read_support_filter_zstd) archive_read_support_filter_zstd;
  decltype(&::archive_read_support_format_tar) archive_read_support_format_tar;
  decltype(&::archive_read_support_format_raw) archive_read_support_format_raw;
  decltype(&::archive_read_open_filename) archive_read_open_filename;
  decltype(&::archive_read_open_fd) archive_read_open_fd;
  decltype(&::archive_read_open_memory) archive_read_open_memory;
  decltype(&::archive_read_open) archive_read_open;
  decltype(&::archive_read_next_header) archive_read_next_header;
  decltype(&::archive_read_data_block) archive_read_data_block;
  decltype(&::archive_write_new) archive_write_new;
  decltype(&::archive_write_free) archive_write_free;
  decltype(&::archive_write_set_format_pax) archive_write_set_format_pax;
  decltype(&::archive_write_set_format_raw) archive_write_set_format_raw;
  decltype(&::archive_write_set_format_option) archive_write_set_format_option;
  decltype(&::archive_write_set_options) archive_write_set_options;
  decltype(&::archive_write_add_filter_gzip) archive_write_add_filter_gzip;
  decltype(&::archive_write_add_filter_zstd) archive_write_add_filter_zstd;
  decltype(&::archive_write_open_filename) archive_write_open_filename;
  decltype(&::archive_write_open) archive_write_open;
  decltype(&::archive_write_set_bytes_in_last_block) archive_write_set_bytes_in_last_block;
  decltype(&::archive_write_header) archive_write_header;
  decltype(&::archive_write_data) archive_write_data;
  decltype(&::archive_write_data_block) archive_write_data_block;
  decltype(&::archive_write_finish_entry) archive_write_finish_entry;
  decltype(&::archive_write_close) archive_write_close;
  decltype(&::archive_write_disk_new) archive_write_disk_new;
  decltype(&::archive_write_disk_set_options) archive_write_disk_set_options;
  decltype(&::archive_write_disk_set_user_lookup) archive_write_disk_set_user_lookup;
  decltype(&::archive_write_disk_set_group_lookup) archive_write_disk_set_group_lookup;
};

// Loads libarchive (once per process; thread-safe) and resolves every
// function above. Errors: kUnsupported "<library>: <why>; export, import
// and init --tarball need libarchive" when it is missing or too old.
Result<const ArchiveLib*> LoadArchiveLib();

}  // namespace agentenv::archive
