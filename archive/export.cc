#include "archive/export.h"

#include <locale.h>

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <unordered_set>
#include <vector>

#include "archive/libarchive.h"
#include "archive/tar_stream.h"
#include "snap/diff.h"
#include "snap/fsops.h"
#include "store/fastcdc.h"
#include "store/manifest.h"

namespace agentenv::archive {
namespace {

using ArchiveEntry = std::unique_ptr<archive_entry, decltype(&archive_entry_free)>;

// Adds the POSIX ACL xattr `key` = `value` (the kernel's form: version 2,
// then tag, permissions and id per entry) to `ae` as libarchive's ACL
// entries, which its pax writer writes as SCHILY.acl.access or .default
// text (numeric ids: user:1000:rwx:1000), the records GNU tar (--acls)
// and bsdtar set. false, with nothing added, for any other xattr or a
// value that does not parse. As bsdtar writes them, an access ACL's owner,
// group and other entries are the header's mode: with a mask, its group
// bits are the group entry's, and setting the ACL makes them the mask's
// again, as they were.
bool AddAcl(const ArchiveLib& A, archive_entry* ae, const std::string& key, const std::string& value) {
  int type = key == "system.posix_acl_access"    ? ARCHIVE_ENTRY_ACL_TYPE_ACCESS
             : key == "system.posix_acl_default" ? ARCHIVE_ENTRY_ACL_TYPE_DEFAULT
                                                 : 0;
  if (!type || value.size() < 4 || (value.size() - 4) % 8 != 0) return false;
  auto le = [&](size_t at, int bytes) {
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(value[at + size_t(i)]);
    return v;
  };
  if (le(0, 4) != 2) return false;
  struct Ace {
    int tag, perm, id;
  };
  std::vector<Ace> aces;
  for (size_t at = 4; at < value.size(); at += 8) {
    uint32_t tag = le(at, 2), perm = le(at + 2, 2), id = le(at + 4, 4);
    int t = tag == 0x01   ? ARCHIVE_ENTRY_ACL_USER_OBJ
            : tag == 0x02 ? ARCHIVE_ENTRY_ACL_USER
            : tag == 0x04 ? ARCHIVE_ENTRY_ACL_GROUP_OBJ
            : tag == 0x08 ? ARCHIVE_ENTRY_ACL_GROUP
            : tag == 0x10 ? ARCHIVE_ENTRY_ACL_MASK
            : tag == 0x20 ? ARCHIVE_ENTRY_ACL_OTHER
                          : 0;
    if (!t || perm > 7) return false;
    bool named = t == ARCHIVE_ENTRY_ACL_USER || t == ARCHIVE_ENTRY_ACL_GROUP;
    if (named && id > uint32_t(INT32_MAX)) return false;
    aces.push_back({t, int(perm), named ? int(id) : -1});
  }
  for (const Ace& a : aces)
    if (A.archive_entry_acl_add_entry(ae, type, a.perm, a.tag, a.id, nullptr) != ARCHIVE_OK) return false;
  return true;
}

class TarWriter {
 public:
  // `tarball`: a file for tar tools, not an image layer: files with zero
  // chunks become sparse entries (MarkHoles), POSIX ACLs SCHILY.acl text.
  TarWriter(const ArchiveLib& lib, const store::Store& s, const TarOutput& output, const std::string& out,
            Progress* progress, bool tarball)
      : A(lib), s_(s), output_(output), a_(output.get()), out_(out), progress_(progress), tarball_(tarball) {}

  Result<void> Put(const snap::Entry& e, const std::string& path);
  Result<void> Whiteout(const std::string& path);
  // Every entry of tree `id` under `dir`, in walk order.
  Result<void> PutTree(const store::ObjectId& id, const std::string& dir);

  ExportStats stats;

 private:
  // A failed write: the sink's or the file's error when that is the cause.
  Result<void> Fail(const std::string& path) {
    if (output_.error()) return Unexpected<Error>(*output_.error());
    return agentenv::Fail(out_ + ": " + path + ": " + A.archive_error_string(a_));
  }
  // A large file with all-zero chunks (holes, when it was read sparse:
  // FastCDC cuts a long zero run into identical zero chunks, so the
  // manifest shows them without reading any content) gets a sparse map
  // of its 4 KiB blocks that are not all zeros (its other chunks are read
  // for it): the pax writer then writes a GNU 1.0 sparse entry (GNU tar
  // and bsdtar make the holes again) and skips the zeros.
  Result<void> MarkHoles(archive_entry* ae, const snap::Entry& e);
  bool IsZeroChunk(const store::ManifestEntry& c);
  // The file's bytes, after its header (those of a sparse entry from
  // sparse_chunks_).
  Result<void> WriteContent(const snap::Entry& e, const std::string& path);

  const ArchiveLib& A;
  const store::Store& s_;
  const TarOutput& output_;
  ::archive* a_;
  std::string out_;
  Progress* progress_;
  bool tarball_;
  std::map<uint64_t, store::ObjectId> zero_ids_;  // chunk size -> id of that many zeros
  std::vector<store::ManifestEntry> sparse_chunks_;  // of the sparse entry being written
};

// Names go to libarchive as the bytes they are, under a UTF-8 locale (see
// Utf8Locale): libarchive's pax writer then writes a UTF-8 name as is and
// marks hdrcharset=BINARY only on an entry whose name it cannot convert,
// so GNU tar warns only about names that really are not UTF-8.
class Utf8Locale {
 public:
  Utf8Locale() : loc_(::newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr)) {
    if (loc_) old_ = ::uselocale(loc_);
  }
  ~Utf8Locale() {
    if (!loc_) return;
    ::uselocale(old_);
    ::freelocale(loc_);
  }
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;

 private:
  locale_t loc_;
  locale_t old_ = LC_GLOBAL_LOCALE;
};

Result<void> TarWriter::Put(const snap::Entry& e, const std::string& path) {
  ArchiveEntry ae(A.archive_entry_new(), A.archive_entry_free);
  std::string name = e.kind == snap::Kind::kDir ? path + "/" : path;
  A.archive_entry_set_pathname(ae.get(), name.c_str());
  A.archive_entry_set_uid(ae.get(), e.meta.uid);
  A.archive_entry_set_gid(ae.get(), e.meta.gid);
  // Whole seconds rounded down: before 1970 the nanoseconds stay positive.
  int64_t sec = e.meta.mtime_ns / 1000000000, nsec = e.meta.mtime_ns % 1000000000;
  if (nsec < 0) sec -= 1, nsec += 1000000000;
  A.archive_entry_set_mtime(ae.get(), time_t(sec), long(nsec));
  mode_t type = 0;
  switch (e.kind) {
    case snap::Kind::kFile:
      type = AE_IFREG;
      A.archive_entry_set_size(ae.get(), int64_t(e.size));
      if (tarball_) AE_TRY(MarkHoles(ae.get(), e));
      break;
    case snap::Kind::kDir: type = AE_IFDIR; break;
    case snap::Kind::kSymlink:
      type = AE_IFLNK;
      A.archive_entry_set_symlink(ae.get(), e.target.c_str());
      break;
    case snap::Kind::kHardlink:
      type = AE_IFREG;
      A.archive_entry_set_hardlink(ae.get(), e.target.c_str());
      A.archive_entry_set_size(ae.get(), 0);
      break;
    case snap::Kind::kFifo: type = AE_IFIFO; break;
    case snap::Kind::kChar: type = AE_IFCHR; A.archive_entry_set_rdev(ae.get(), dev_t(e.rdev)); break;
    case snap::Kind::kBlock: type = AE_IFBLK; A.archive_entry_set_rdev(ae.get(), dev_t(e.rdev)); break;
    case snap::Kind::kSocket:
      stats.warnings.push_back(path + ": a socket, which tar cannot hold; left out");
      return {};
  }
  A.archive_entry_set_filetype(ae.get(), type);
  A.archive_entry_set_perm(ae.get(), e.meta.mode & 07777);
  for (const auto& [k, v] : e.meta.xattrs) {
    // POSIX ACLs as the tools read them (SCHILY.acl.*), in a tarball; an
    // image layer keeps the xattrs, which container runtimes set.
    if (tarball_ && AddAcl(A, ae.get(), k, v)) continue;
    A.archive_entry_xattr_add_entry(ae.get(), k.c_str(), v.data(), v.size());
  }
  // ARCHIVE_WARN: a name that is not UTF-8, written with hdrcharset=BINARY.
  if (A.archive_write_header(a_, ae.get()) < ARCHIVE_WARN) return Fail(path);
  ++stats.entries;
  if (e.kind != snap::Kind::kFile) return {};
  AE_TRY(WriteContent(e, path));
  Advance(progress_, 1, 0);
  return {};
}

// The data regions (offset, length) of a file of `size` bytes read as 4
// KiB blocks at 4 KiB file offsets, each all zeros or not.
class BlockMap {
 public:
  explicit BlockMap(uint64_t size) : size_(size) {}
  // Bytes [off, off + n) of the file, in order; `data` null: all zeros.
  void Add(uint64_t off, const uint8_t* data, uint64_t n) {
    while (n > 0) {
      uint64_t in_block = std::min(n, kBlock - off % kBlock);
      if (data && zero_block_) zero_block_ = std::all_of(data, data + in_block, [](uint8_t b) { return b == 0; });
      off += in_block, n -= in_block;
      if (data) data += in_block;
      if (off % kBlock == 0 || off == size_) End(off);
    }
  }
  // A file that ends in a hole gets an empty region at its end: the
  // entry's map then says its size.
  std::vector<std::pair<uint64_t, uint64_t>> Regions() {
    if (regions_.empty() || regions_.back().first + regions_.back().second < size_) regions_.emplace_back(size_, 0);
    return std::move(regions_);
  }

 private:
  static constexpr uint64_t kBlock = 4096;
  void End(uint64_t end) {
    uint64_t start = (end - 1) / kBlock * kBlock;
    if (!zero_block_) {
      if (!regions_.empty() && regions_.back().first + regions_.back().second == start)
        regions_.back().second = end - regions_.back().first;
      else
        regions_.emplace_back(start, end - start);
    }
    zero_block_ = true;
  }

  uint64_t size_;
  bool zero_block_ = true;  // the block being read is zeros so far
  std::vector<std::pair<uint64_t, uint64_t>> regions_;
};

bool TarWriter::IsZeroChunk(const store::ManifestEntry& c) {
  auto [it, fresh] = zero_ids_.try_emplace(c.size);
  if (fresh) it->second = store::ObjectId::Of(std::vector<uint8_t>(c.size, 0));
  return c.id == it->second;
}

Result<void> TarWriter::MarkHoles(archive_entry* ae, const snap::Entry& e) {
  sparse_chunks_.clear();
  if (e.content != store::ObjectType::kManifest) return {};
  AE_ASSIGN(std::vector<uint8_t> raw, s_.Get(e.id));
  AE_ASSIGN(std::vector<store::ManifestEntry> chunks, store::DecodeManifest(raw));
  bool holes = false;
  for (const store::ManifestEntry& c : chunks) {
    holes |= IsZeroChunk(c);
  }
  if (!holes) return {};
  // Holes at the granularity a filesystem reports them (SEEK_HOLE: 4 KiB
  // blocks, as a restore leaves them, store::WriteFileTo): the chunks
  // around a hole hold zeros up to the data, which are not data to write.
  BlockMap map(e.size);
  uint64_t off = 0;
  for (const store::ManifestEntry& c : chunks) {
    if (IsZeroChunk(c)) {
      map.Add(off, nullptr, c.size);
    } else {
      AE_ASSIGN(std::vector<uint8_t> bytes, s_.Get(c.id));
      if (bytes.size() != c.size)
        return agentenv::Fail(ErrorCode::kCorrupt, "object " + c.id.Hex() + ": " + std::to_string(bytes.size()) +
                                                       " bytes, its manifest says " + std::to_string(c.size));
      map.Add(off, bytes.data(), c.size);
    }
    off += c.size;
  }
  for (const auto& [o, n] : map.Regions()) A.archive_entry_sparse_add_entry(ae, int64_t(o), int64_t(n));
  sparse_chunks_ = std::move(chunks);
  return {};
}

Result<void> TarWriter::WriteContent(const snap::Entry& e, const std::string& path) {
  auto put = [&](std::span<const uint8_t> b) -> Result<void> {
    if (A.archive_write_data(a_, b.data(), b.size()) != ssize_t(b.size())) return Fail(path);
    stats.bytes += b.size();
    Advance(progress_, 0, b.size());
    return {};
  };
  if (sparse_chunks_.empty()) return s_.ReadFile(e.file(), put);
  // A sparse entry: the writer skips what its map leaves out, so the
  // zero chunks (the holes) are handed over without reading them.
  static const std::vector<uint8_t> zeros(store::ChunkerParams{}.max_size, 0);
  for (const store::ManifestEntry& c : sparse_chunks_) {
    if (IsZeroChunk(c) && c.size <= zeros.size()) {
      AE_TRY(put({zeros.data(), size_t(c.size)}));
      continue;
    }
    AE_ASSIGN(std::vector<uint8_t> bytes, s_.Get(c.id));
    if (bytes.size() != c.size)
      return agentenv::Fail(ErrorCode::kCorrupt, "object " + c.id.Hex() + ": " + std::to_string(bytes.size()) +
                                                     " bytes, its manifest says " + std::to_string(c.size));
    AE_TRY(put(bytes));
  }
  return {};
}

Result<void> TarWriter::Whiteout(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string wh = slash == std::string::npos ? ".wh." + path : path.substr(0, slash + 1) + ".wh." + path.substr(slash + 1);
  snap::Entry e;
  e.kind = snap::Kind::kFile;
  e.meta.mode = 0644;
  ArchiveEntry ae(A.archive_entry_new(), A.archive_entry_free);
  A.archive_entry_set_pathname(ae.get(), wh.c_str());
  A.archive_entry_set_filetype(ae.get(), AE_IFREG);
  A.archive_entry_set_perm(ae.get(), 0644);
  A.archive_entry_set_size(ae.get(), 0);
  if (A.archive_write_header(a_, ae.get()) < ARCHIVE_WARN) return Fail(wh);
  ++stats.whiteouts;
  return {};
}

Result<void> TarWriter::PutTree(const store::ObjectId& id, const std::string& dir) {
  AE_ASSIGN(snap::Tree t, snap::LoadTree(s_, id));
  for (const snap::Entry& e : t) {
    std::string path = snap::Join(dir, e.name);
    AE_TRY(Put(e, path));
    if (e.kind == snap::Kind::kDir) AE_TRY(PutTree(e.id, path));
  }
  return {};
}

// The entry at `path` (slash-separated, relative) of tree `tree`.
Result<snap::Entry> FindEntry(const store::Store& s, store::ObjectId tree, const std::string& path) {
  size_t start = 0;
  for (;;) {
    size_t slash = path.find('/', start);
    std::string name = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    AE_ASSIGN(snap::Tree t, snap::LoadTree(s, tree));
    auto it = std::find_if(t.begin(), t.end(), [&](const snap::Entry& e) { return e.name == name; });
    if (it == t.end()) return Fail(ErrorCode::kCorrupt, path + ": a hardlink of the node is not in its tree");
    if (slash == std::string::npos) return *it;
    tree = it->id;
    start = slash + 1;
  }
}

// Writes the node to `out` (a file name, "-"), or to `sink` when given.
// Sparse entries and ACL text only in tar files: image layers stay plain
// for every registry client, and keep ACLs as the xattrs runtimes set.
Result<ExportStats> Write(const store::Store& s, const snap::Node& n, const std::optional<store::ObjectId>& base,
                          const std::string& out, const TarSink* sink, Progress* progress) {
  if (base) BeginPhase(progress, "exporting");
  else BeginPhase(progress, "exporting", n.files, n.logical_bytes);
  AE_ASSIGN(const ArchiveLib* lib, LoadArchiveLib());
  const ArchiveLib& A = *lib;
  Utf8Locale utf8;  // this thread, until the archive is written
  AE_ASSIGN(std::unique_ptr<TarOutput> output, TarOutput::Open(A, out, sink));
  TarWriter w(A, s, *output, out, progress, sink == nullptr);
  if (!base) {
    snap::Entry root;
    root.kind = snap::Kind::kDir;
    root.meta = n.root;
    AE_TRY(w.Put(root, "."));
    AE_TRY(w.PutTree(n.tree, ""));
  } else {
    // Below a deleted directory everything is gone with it: one whiteout.
    std::string deleted_dir;
    std::unordered_set<std::string> written;
    AE_TRY(snap::DiffTrees(s, *base, n.tree, [&](const snap::Difference& d) -> Result<void> {
      const std::string& p = d.change.path;
      if (!deleted_dir.empty() && p.size() > deleted_dir.size() && p.compare(0, deleted_dir.size(), deleted_dir) == 0 &&
          p[deleted_dir.size()] == '/')
        return {};
      if (d.change.op == '-') {
        if (d.change.is_dir) deleted_dir = p;
        return w.Whiteout(p);
      }
      written.insert(p);
      return w.Put(*d.new_entry, p);
    }));
    // A file written anew breaks its hardlinks in the layers below: its
    // other names are written again, as links to the new file.
    // Relinking changes the mtime of the directories holding those names:
    // they are written again too (after their contents), so that the
    // importer sets it back.
    std::set<std::string> parents;
    for (const auto& [path, first] : n.links) {
      if (!written.count(first) || written.count(path)) continue;
      AE_ASSIGN(snap::Entry e, FindEntry(s, n.tree, path));
      AE_TRY(w.Put(e, path));
      if (size_t slash = path.rfind('/'); slash != std::string::npos && !written.count(path.substr(0, slash)))
        parents.insert(path.substr(0, slash));
    }
    for (const std::string& dir : parents) {
      AE_ASSIGN(snap::Entry e, FindEntry(s, n.tree, dir));
      AE_TRY(w.Put(e, dir));
    }
  }
  AE_TRY(output->Close());
  return w.stats;
}

}  // namespace

Result<ExportStats> ExportTar(const store::Store& s, const snap::Node& n,
                              const std::optional<store::ObjectId>& base, const std::string& out,
                              Progress* progress) {
  return Write(s, n, base, out, nullptr, progress);
}

Result<ExportStats> ExportTarTo(const store::Store& s, const snap::Node& n,
                                const std::optional<store::ObjectId>& base, const TarSink& sink,
                                const std::string& name) {
  return Write(s, n, base, name, &sink, nullptr);
}

}  // namespace agentenv::archive
