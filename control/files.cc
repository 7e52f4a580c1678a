// read_file, list_dir, search and file_history (control/files.h);
// write_file is in files_write.cc.
#include "control/files.h"

#include <algorithm>
#include <regex>

#include "common/text.h"
#include "control/client.h"
#include "control/files_view.h"
#include "snap/fsops.h"
#include "snap/layout.h"
#include "snap/tree.h"
#include "watch/ignore.h"

namespace agentenv::control {
namespace {

constexpr uint64_t kScanBytes = uint64_t{8} << 20;  // read_file reads at most this much to count lines
constexpr uint64_t kMaxDepth = 8;
constexpr uint64_t kMaxDirEntries = 5000;
constexpr uint64_t kSearchFileBytes = uint64_t{1} << 20;
constexpr uint64_t kSearchFiles = 20000;
constexpr uint64_t kSearchBytes = uint64_t{64} << 20;
constexpr size_t kMatchLine = 1000;  // std::regex recurses per character: long lines are cut
constexpr size_t kShownLine = 200;
constexpr uint64_t kHistoryNodes = 5000;

// Binary: a NUL byte, or bytes that are no UTF-8, in the first 8 KiB.
bool LooksBinary(std::string_view bytes) {
  std::string_view head = bytes.substr(0, 8192);
  if (head.find('\0') != std::string_view::npos) return true;
  bool tail_ok = false;
  size_t ok = Utf8Prefix(head, &tail_ok);
  return ok < head.size() && !(tail_ok && head.size() == 8192);
}

std::string CutLine(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  bool tail_ok = false;
  return std::string(s.substr(0, Utf8Prefix(s.substr(0, n), &tail_ok))) + "…";
}

}  // namespace

Result<ReadFileReply> ReadFile(Server& s, const ReadFileRequest& r) {
  if (r.path.empty()) return Fail(ErrorCode::kInvalid, "read_file: give a path");
  if (r.start_line == 0) return Fail(ErrorCode::kInvalid, "read_file: start_line counts from 1");
  AE_ASSIGN(auto view, OpenView(s, r.ref));
  AE_ASSIGN(std::string rel, ResolveIn(*view, r.path, true));
  AE_ASSIGN(ViewEntry e, view->Lstat(rel));
  if (e.kind == "dir") return Fail(ErrorCode::kInvalid, r.path + ": a directory, not a file (list_dir it)");
  bool more = false;
  AE_ASSIGN(std::string bytes, view->Read(rel, kScanBytes, &more));
  ReadFileReply rep;
  rep.path = rel;
  rep.node = view->Node();
  rep.size = e.kind == "file" ? e.size : bytes.size();
  if (LooksBinary(bytes)) {
    rep.binary = true;
    rep.truncated = !bytes.empty();
    return rep;
  }
  uint64_t line = 1;
  size_t at = 0;
  while (line < r.start_line && at < bytes.size()) {
    size_t nl = bytes.find('\n', at);
    if (nl == std::string::npos) {
      at = bytes.size();
      break;
    }
    at = nl + 1;
    ++line;
  }
  rep.start_line = r.start_line;
  size_t end = at;
  uint64_t taken = 0;
  while (end < bytes.size() && taken < r.lines) {
    size_t nl = bytes.find('\n', end);
    size_t next = nl == std::string::npos ? bytes.size() : nl + 1;
    if (next - at > r.max_bytes) {
      if (taken == 0) {  // one line longer than max_bytes: its start
        bool tail_ok = false;
        end = at + Utf8Prefix(std::string_view(bytes).substr(at, r.max_bytes), &tail_ok);
        taken = 1;
      }
      break;
    }
    end = next;
    ++taken;
  }
  rep.text = bytes.substr(at, end - at);
  rep.end_line = taken ? r.start_line + taken - 1 : 0;
  rep.truncated = end < bytes.size() || more;
  if (!more) {
    uint64_t total = uint64_t(std::count(bytes.begin(), bytes.end(), '\n'));
    if (!bytes.empty() && bytes.back() != '\n') ++total;
    rep.total_lines = total;
  }
  return rep;
}

Result<ListDirReply> ListDir(Server& s, const ListDirRequest& r) {
  if (r.depth == 0 || r.depth > kMaxDepth) return Fail(ErrorCode::kInvalid, "list_dir: depth must be 1 to 8");
  AE_ASSIGN(auto view, OpenView(s, r.ref));
  AE_ASSIGN(std::string rel, ResolveIn(*view, r.path, true));
  AE_ASSIGN(ViewEntry top, view->Lstat(rel));
  ListDirReply rep;
  rep.path = rel;
  if (top.kind != "dir") {
    rep.entries.push_back({rel, top.kind, top.size, top.target});
    rep.total = 1;
    return rep;
  }
  const uint64_t limit = std::min(r.limit, kMaxDirEntries);
  // Depth first, in name order; directories are listed before what they hold.
  std::function<Result<void>(const std::string&, uint64_t)> walk = [&](const std::string& dir, uint64_t depth) -> Result<void> {
    AE_ASSIGN(auto entries, view->List(dir));
    for (const ViewEntry& e : entries) {
      std::string path = snap::Join(dir, e.name);
      ++rep.total;
      if (rep.entries.size() < limit) rep.entries.push_back({path, e.kind, e.size, e.target});
      else rep.truncated = true;
      if (rep.total > kMaxDirEntries) {
        rep.truncated = true;
        return {};
      }
      if (e.kind == "dir" && depth > 1) AE_TRY(walk(path, depth - 1));
    }
    return {};
  };
  AE_TRY(walk(rel, r.depth));
  return rep;
}

Result<SearchReply> Search(Server& s, const SearchRequest& r) {
  if (r.pattern.empty() || r.pattern.size() > 500) return Fail(ErrorCode::kInvalid, "search: pattern must be 1 to 500 bytes");
  std::regex re;
  try {
    re = std::regex(r.pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    return Fail(ErrorCode::kInvalid, "search: pattern '" + r.pattern + "': " + e.what());
  }
  AE_ASSIGN(auto view, OpenView(s, r.ref));
  AE_ASSIGN(std::string top, ResolveIn(*view, r.path, true));
  watch::IgnoreRules ignore;
  if (r.ref.empty()) {  // stored trees hold no ignored paths
    AE_ASSIGN(ignore, watch::IgnoreRules::WithFile(snap::layout::Ignore(s.repo().root())));
  }
  SearchReply rep;
  uint64_t read = 0;
  bool stop = false;
  auto matches = [&](std::string_view text) {
    try {
      return std::regex_search(text.begin(), text.end(), re);
    } catch (const std::regex_error&) {  // too complex for this input: no match
      return false;
    }
  };
  auto add = [&](SearchMatch m) {
    if (rep.matches.size() >= r.limit) {
      rep.truncated = stop = true;
      return;
    }
    rep.matches.push_back(std::move(m));
  };
  std::function<Result<void>(const std::string&)> walk = [&](const std::string& dir) -> Result<void> {
    AE_ASSIGN(auto entries, view->List(dir));
    for (const ViewEntry& e : entries) {
      if (stop) return {};
      std::string path = snap::Join(dir, e.name);
      if (ignore.Ignored(path, e.kind == "dir")) continue;
      if (r.names) {
        if (matches(path)) add({path, 0, ""});
      } else if (e.kind == "file" && e.size <= kSearchFileBytes) {
        if (++rep.files > kSearchFiles || read + e.size > kSearchBytes) {
          rep.truncated = stop = true;
          return {};
        }
        bool more = false;
        auto bytes = view->Read(path, kSearchFileBytes, &more);
        if (!bytes) continue;  // gone or unreadable meanwhile
        read += bytes->size();
        if (LooksBinary(*bytes)) continue;
        std::string_view text = *bytes;
        uint64_t line = 0;
        for (size_t at = 0; at < text.size() && !stop;) {
          size_t nl = text.find('\n', at);
          size_t end = nl == std::string_view::npos ? text.size() : nl;
          ++line;
          std::string_view l = text.substr(at, std::min(end - at, kMatchLine));
          if (matches(l)) add({path, line, CutLine(l, kShownLine)});
          at = end + 1;
        }
      }
      if (e.kind == "dir") AE_TRY(walk(path));
    }
    return {};
  };
  AE_ASSIGN(ViewEntry t, view->Lstat(top));
  if (t.kind != "dir") return Fail(ErrorCode::kInvalid, "search: " + r.path + " is no directory");
  AE_TRY(walk(top));
  return rep;
}

namespace {

// The entry at `rel` (links not followed) in tree `root`, or none.
Result<std::optional<snap::Entry>> EntryIn(const store::Store& st, store::ObjectId root, const std::vector<std::string>& parts,
                                           std::map<store::ObjectId, snap::Tree>& cache) {
  store::ObjectId dir = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = cache.find(dir);
    if (it == cache.end()) {
      if (cache.size() > 4096) cache.clear();
      AE_ASSIGN(snap::Tree t, snap::LoadTree(st, dir));
      it = cache.emplace(dir, std::move(t)).first;
    }
    const snap::Tree& t = it->second;
    auto e = std::lower_bound(t.begin(), t.end(), parts[i], [](const snap::Entry& x, const std::string& n) { return x.name < n; });
    if (e == t.end() || e->name != parts[i]) return std::optional<snap::Entry>();
    if (i + 1 == parts.size()) return std::optional<snap::Entry>(*e);
    if (e->kind != snap::Kind::kDir) return std::optional<snap::Entry>();
    dir = e->id;
  }
  return std::optional<snap::Entry>();
}

bool SameContent(const snap::Entry& a, const snap::Entry& b) {
  return a.kind == b.kind && a.id == b.id && a.target == b.target && a.size == b.size && a.meta.mode == b.meta.mode;
}

}  // namespace

Result<FileHistoryReply> FileHistory(Server& s, const FileHistoryRequest& r) {
  AE_ASSIGN(std::string rel, snap::TreePath(r.path));
  if (rel.empty()) return Fail(ErrorCode::kInvalid, "file_history: give a path inside the tree");
  const std::vector<std::string> parts = snap::SplitPath(rel);
  snap::Repo& repo = s.repo();
  AE_ASSIGN(store::ObjectId at, repo.Resolve(r.ref));
  FileHistoryReply rep;
  rep.path = rel;
  std::map<store::ObjectId, snap::Tree> cache;
  AE_ASSIGN(snap::NodeRecord rec, repo.Record(at));
  AE_ASSIGN(auto here, EntryIn(repo.store(), rec.tree, parts, cache));
  while (true) {
    ++rep.scanned;
    std::optional<snap::Entry> before;
    std::optional<snap::NodeRecord> parent;
    if (rec.parent) {
      AE_ASSIGN(snap::NodeRecord p, repo.Record(*rec.parent));
      AE_ASSIGN(before, EntryIn(repo.store(), p.tree, parts, cache));
      parent = std::move(p);
    }
    const char* op = here && !before ? "+" : !here && before ? "-" : here && !SameContent(*here, *before) ? "M" : nullptr;
    if (op) {
      if (rep.changes.size() == r.limit) {
        rep.more = true;
        break;
      }
      rep.changes.push_back({op, MakeNodeInfo(rec)});
      LeaveOutPackages(rep.changes.back().node);
    }
    if (!parent) break;
    if (rep.scanned >= kHistoryNodes) {
      rep.more = true;
      break;
    }
    rec = std::move(*parent);
    here = std::move(before);
  }
  return rep;
}

Result<std::string> ReadNodeFile(Server& s, const std::string& ref, const std::string& path, size_t limit) {
  AE_ASSIGN(auto view, OpenView(s, ref));
  AE_ASSIGN(std::string rel, ResolveIn(*view, path, true));
  bool more = false;
  AE_ASSIGN(std::string bytes, view->Read(rel, limit, &more));
  if (more)
    return Fail(ErrorCode::kInvalid, path + ": larger than " + std::to_string(limit >> 20) +
                                         " MiB (the resource limit); read it in pages with read_file");
  return bytes;
}

Result<std::string> ReadNodeFile(Client& c, const std::string& ref, const std::string& path, size_t limit) {
  AE_ASSIGN(Server* s, c.Local());
  return ReadNodeFile(*s, ref, path, limit);
}

}  // namespace agentenv::control
