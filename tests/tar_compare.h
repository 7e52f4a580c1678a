// Trees compared entry by entry as tar tools make them: names, types,
// content, mode, numeric owners, mtimes, symlink targets, hardlink groups,
// devices, xattrs, POSIX ACLs (decoded from their xattrs) and the holes of
// sparse files; and the names an archive lists, read with libarchive as
// bsdtar reads them.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_testutil.h"

namespace agentenv::test {

struct TreeEntry {
  std::string what;   // everything compared but the mtime and the holes
  std::string mtime;  // sec.nsec
  bool dir = false;
  off_t size = 0;
  std::vector<std::pair<off_t, off_t>> data;  // a regular file's data ranges (SEEK_DATA/SEEK_HOLE)
};

// The 4 KiB blocks wholly inside a file of `size` bytes that no data range
// touches: its holes, as a filesystem keeps them.
inline std::set<off_t> HoleBlocks(const TreeEntry& e) {
  std::set<off_t> holes;
  for (off_t b = 0; b + 4096 <= e.size; b += 4096) {
    bool data = false;
    for (const auto& [from, to] : e.data) data |= from < b + 4096 && to > b;
    if (!data) holes.insert(b);
  }
  return holes;
}
using TreeEntries = std::map<std::string, TreeEntry>;

// A POSIX ACL xattr (version 2, then tag, permissions and id per entry) as
// getfacl -n text; the bytes in hex when it does not parse.
inline std::string AclText(const std::string& v) {
  auto le = [&](size_t at, int n) {
    uint32_t x = 0;
    for (int i = n - 1; i >= 0; --i) x = (x << 8) | uint8_t(v[at + size_t(i)]);
    return x;
  };
  std::string out;
  if (v.size() < 4 || (v.size() - 4) % 8 || le(0, 4) != 2) {
    for (unsigned char c : v) out += "0123456789abcdef"[c >> 4], out += "0123456789abcdef"[c & 15];
    return out;
  }
  for (size_t at = 4; at < v.size(); at += 8) {
    uint32_t tag = le(at, 2), perm = le(at + 2, 2), id = le(at + 4, 4);
    std::string t = tag == 1 ? "user:" : tag == 2 ? "user:" + std::to_string(id) : tag == 4 ? "group:"
                  : tag == 8 ? "group:" + std::to_string(id) : tag == 16 ? "mask:" : tag == 32 ? "other:" : "?";
    out += (out.empty() ? "" : ",") + t + ":" + (perm & 4 ? "r" : "-") + (perm & 2 ? "w" : "-") + (perm & 1 ? "x" : "-");
  }
  return out;
}

inline std::vector<std::pair<off_t, off_t>> DataRanges(const fs::path& p) {
  std::vector<std::pair<off_t, off_t>> out;
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return out;
  off_t end = ::lseek(fd.get(), 0, SEEK_END);
  for (off_t at = 0; at < end;) {
    off_t data = ::lseek(fd.get(), at, SEEK_DATA);
    if (data < 0) break;
    off_t hole = ::lseek(fd.get(), data, SEEK_HOLE);
    if (hole < 0) hole = end;
    out.emplace_back(data, hole);
    at = hole;
  }
  return out;
}

// Every entry below `root` (not the root itself).
inline TreeEntries DescribeTree(const fs::path& root) {
  TreeEntries out;
  std::map<std::pair<dev_t, ino_t>, std::vector<std::string>> inodes;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path& p = it->path();
    std::string rel = fs::relative(p, root).string();
    struct stat st;
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    std::ostringstream d;
    d << std::oct << (st.st_mode & 07777) << std::dec << " " << st.st_uid << ":" << st.st_gid;
    TreeEntry e;
    if (S_ISREG(st.st_mode)) {
      d << " file " << st.st_size << " " << std::hex << Fnv1a(ReadFile(p)) << std::dec;
      e.data = DataRanges(p);
      e.size = st.st_size;
      if (st.st_nlink > 1) inodes[{st.st_dev, st.st_ino}].push_back(rel);
    } else if (S_ISDIR(st.st_mode)) {
      d << " dir";
      e.dir = true;
    } else if (S_ISLNK(st.st_mode)) {
      d << " symlink " << fs::read_symlink(p).string();
    } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
      d << (S_ISCHR(st.st_mode) ? " char " : " block ") << major(st.st_rdev) << "," << minor(st.st_rdev);
    } else {
      d << " other " << (st.st_mode & S_IFMT);
    }
    char names[65536];
    ssize_t n = ::llistxattr(p.c_str(), names, sizeof names);
    std::set<std::string> xattrs;
    for (ssize_t i = 0; i < n; i += ssize_t(std::strlen(names + i)) + 1) {
      std::string key = names + i;
      std::string value(65536, '\0');
      ssize_t m = ::lgetxattr(p.c_str(), key.c_str(), value.data(), value.size());
      value.resize(m > 0 ? size_t(m) : 0);
      if (key.starts_with("system.posix_acl_")) value = AclText(value);
      xattrs.insert(key + "=" + value);
    }
    for (const auto& x : xattrs) d << " " << x;
    e.what = d.str();
    e.mtime = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    out[rel] = std::move(e);
  }
  for (const auto& [inode, names] : inodes) {
    std::string group;
    for (const auto& n : names) group += " " + n;
    for (const auto& n : names) out[n].what += " links:" + group;
  }
  return out;
}

// The names the archive lists, as bsdtar lists them, relative: without
// "./", a leading '/' or a trailing '/'.
inline std::set<std::string> ArchiveNames(const fs::path& archive) {
  std::set<std::string> names;
  struct ::archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_tar(a);
  if (archive_read_open_filename(a, archive.c_str(), 1 << 16) == ARCHIVE_OK) {
    archive_entry* e;
    while (archive_read_next_header(a, &e) >= ARCHIVE_WARN) {
      std::string n = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
      for (bool more = true; more;) {
        more = false;
        if (n.starts_with("./")) n.erase(0, 2), more = true;
        if (n.starts_with("/")) n.erase(0, 1), more = true;
      }
      while (!n.empty() && n.back() == '/') n.pop_back();
      names.insert(n);
    }
  }
  archive_read_free(a);
  return names;
}

// Whether the repository leaves `rel` out of its nodes by its built-in
// rules (watch/ignore.cc): below /proc, /sys, /dev, /run, /tmp, /var/tmp,
// /var/cache/apt, /var/lib/apt/lists, and editor swap and backup files.
inline bool IgnoredByDefault(const std::string& rel) {
  for (const char* dir : {"proc/", "sys/", "dev/", "run/", "tmp/", "var/tmp/", "var/cache/apt/", "var/lib/apt/lists/"})
    if (rel.starts_with(dir)) return true;
  std::string base = fs::path(rel).filename().string();
  for (const char* ext : {".swp", ".swo", ".swx", "~"})
    if (base.ends_with(ext)) return true;
  return base.starts_with(".#") || (base.starts_with("#") && base.ends_with("#")) || base == "4913";
}

// What differs between tree `want` (a reference tool's) and `got`, one
// line each, at most `max`: entries under ignored paths are not compared,
// nor the mtimes of `implied` directories (no entry of the archive gives
// one: tools make them at the time of extraction), nor that of a
// directory kept empty for the ignore rules. Every 4 KiB block that is a
// hole in `want` is one in `got` (`got` may have more, where a file holds
// zero blocks).
inline std::string CompareTrees(const TreeEntries& want, const TreeEntries& got, const std::set<std::string>& implied,
                                size_t max = 12) {
  std::string out;
  size_t n = 0;
  auto note = [&](const std::string& line) {
    if (n++ < max) out += line + "\n";
  };
  for (const auto& [rel, w] : want) {
    if (IgnoredByDefault(rel)) continue;
    auto it = got.find(rel);
    if (it == got.end()) {
      note("missing " + rel + " (" + w.what + ")");
      continue;
    }
    const TreeEntry& g = it->second;
    if (g.what != w.what) note("differs " + rel + ":\n    want " + w.what + "\n    got  " + g.what);
    // An ignored directory is kept, empty: its mtime is not the archive's.
    bool placeholder = IgnoredByDefault(rel + "/-");
    if (g.mtime != w.mtime && !(w.dir && (implied.count(rel) || placeholder)))
      note("mtime " + rel + ": want " + w.mtime + ", got " + g.mtime);
    std::set<off_t> got_holes = HoleBlocks(g);
    for (off_t b : HoleBlocks(w))
      if (!got_holes.count(b)) {
        note("holes " + rel + ": the 4 KiB block at " + std::to_string(b) + " is a hole in the reference, data here");
        break;
      }
  }
  for (const auto& [rel, g] : got)
    if (!want.count(rel) && !IgnoredByDefault(rel)) note("extra " + rel + " (" + g.what + ")");
  if (n > max) out += "... " + std::to_string(n - max) + " more\n";
  return out;
}

}  // namespace agentenv::test
