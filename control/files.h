// The file operations a model works through: read_file, write_file,
// list_dir, search and file_history, on the live tree or on any node.
//
// Paths are tree-relative ("/etc/x" and "etc/x" are the same place).
// Symlinks are followed as the environment itself sees them: an absolute
// target starts again at the tree's root and ".." stops there, so no path
// or link reaches outside the tree; more than 40 links is kInvalid
// ("too many levels of symbolic links"). On the live tree every step is
// opened with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS after that resolution,
// so a link swapped in meanwhile fails the call instead of leading out.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/server.h"
#include "control/types.h"

namespace agentenv::control {

class Client;  // control/client.h, which includes this through ops.h

struct ReadFileRequest {
  std::string path, ref;  // ref empty: the live tree
  uint64_t start_line = 1, lines = 400, max_bytes = 32768;
  template <class V> void Fields(V& v) {
    v("path", path); v("ref", ref); v("start_line", start_line); v("lines", lines); v("max_bytes", max_bytes);
  }
};
struct ReadFileReply {
  std::string path;  // where the path led (symlinks followed)
  std::string node;  // the node's short id; empty: the live tree
  std::string text;  // the lines asked for; empty for a binary file
  bool binary = false;
  uint64_t start_line = 0, end_line = 0;
  std::optional<uint64_t> total_lines;  // absent past the scan bound (kScanBytes)
  uint64_t size = 0;
  bool truncated = false;  // lines past end_line exist
  template <class V> void Fields(V& v) {
    v("path", path); v("node", node, kOmitEmpty); v("text", text); v("binary", binary); v("start_line", start_line);
    v("end_line", end_line); v("total_lines", total_lines, kOmitEmpty); v("size", size); v("truncated", truncated);
  }
};

struct WriteFileRequest {
  std::string path;
  std::optional<std::string> content, patch;  // exactly one
  std::string message;
  template <class V> void Fields(V& v) { v("path", path); v("content", content); v("patch", patch); v("message", message); }
};
struct WriteFileReply {
  std::string path;
  uint64_t bytes = 0;
  bool created = false;
  std::optional<NodeInfo> node;  // null when the content was already so
  template <class V> void Fields(V& v) { v("path", path); v("bytes", bytes); v("created", created); v("node", node); }
};

struct ListDirRequest {
  std::string path, ref;
  uint64_t depth = 1, limit = 200;
  template <class V> void Fields(V& v) { v("path", path); v("ref", ref); v("depth", depth); v("limit", limit); }
};
struct DirEntryInfo {
  std::string path, kind;  // kind: file, dir, symlink, hardlink, fifo, char, block, socket
  uint64_t size = 0;
  std::string target;  // a symlink's
  template <class V> void Fields(V& v) { v("path", path); v("kind", kind); v("size", size); v("target", target, kOmitEmpty); }
};
struct ListDirReply {
  std::string path;
  std::vector<DirEntryInfo> entries;
  uint64_t total = 0;  // entries seen (more than listed when truncated)
  bool truncated = false;
  template <class V> void Fields(V& v) { v("path", path); v("entries", entries); v("total", total); v("truncated", truncated); }
};

struct SearchRequest {
  std::string pattern, path, ref;
  bool names = false;
  uint64_t limit = 50;
  template <class V> void Fields(V& v) {
    v("pattern", pattern); v("path", path); v("ref", ref); v("names", names); v("limit", limit);
  }
};
struct SearchMatch {
  std::string path;
  uint64_t line = 0;  // 0 for a path match
  std::string text;   // the line, cut at 200 bytes
  template <class V> void Fields(V& v) { v("path", path); v("line", line); v("text", text, kOmitEmpty); }
};
struct SearchReply {
  std::vector<SearchMatch> matches;
  uint64_t files = 0;  // files searched
  bool truncated = false;  // more matches, or a bound of the walk was met
  template <class V> void Fields(V& v) { v("matches", matches); v("files", files); v("truncated", truncated); }
};

struct FileHistoryRequest {
  std::string path, ref = "HEAD";
  uint64_t limit = 10;
  template <class V> void Fields(V& v) { v("path", path); v("ref", ref); v("limit", limit); }
};
struct FileChange {
  std::string op;  // "+", "-", "M" against the node's parent
  NodeInfo node;   // with its provenance: what made the change
  template <class V> void Fields(V& v) { v("op", op); v("node", node); }
};
struct FileHistoryReply {
  std::string path;
  std::vector<FileChange> changes;
  uint64_t scanned = 0;  // nodes looked at
  bool more = false;     // older history was not looked at (limit or bound)
  template <class V> void Fields(V& v) { v("path", path); v("changes", changes); v("scanned", scanned); v("more", more); }
};

// Each is thread-safe; errors: kInvalid naming the argument, kNotFound
// ("<path>: not in node <short>" / "not in the live tree"), I/O with the
// path first.
Result<ReadFileReply> ReadFile(Server& s, const ReadFileRequest& r);
// Writes under the writer mutex and snapshots the path in the same hold:
// the node is labelled "write_file <path>". A patch that does not apply
// changes nothing (kInvalid naming the hunk).
Result<WriteFileReply> WriteFile(Server& s, const WriteFileRequest& r, const CallContext& call);
Result<ListDirReply> ListDir(Server& s, const ListDirRequest& r);
// Bounded: files over 1 MiB, binary files and ignored paths are skipped;
// at most 20,000 files and 64 MiB are read; lines are matched up to 1000
// bytes.
Result<SearchReply> Search(Server& s, const SearchRequest& r);
// Walks parents from r.ref (at most 5,000 nodes).
Result<FileHistoryReply> FileHistory(Server& s, const FileHistoryRequest& r);

// The content of the regular file at `path` in node `ref`, symlinks
// followed inside the tree, at most `limit` bytes (more is kInvalid).
Result<std::string> ReadNodeFile(Server& s, const std::string& ref, const std::string& path, size_t limit);
// Same, through a client (readers run in this process).
Result<std::string> ReadNodeFile(Client& c, const std::string& ref, const std::string& path, size_t limit);

}  // namespace agentenv::control
