#include "serve/mcp_summary.h"

#include "history/node_view.h"

#include <functional>
#include <map>

namespace agentenv::serve {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxListed = 30;         // lines of a list before "... N more"
constexpr size_t kMaxOutput = 16 * 1024;  // bytes of output or file text in a summary

std::string S(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
uint64_t U(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<uint64_t>() : 0;
}
bool B(const json& j, const char* key) { return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); }
std::string N(uint64_t n) { return std::to_string(n); }


std::string Cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t end = n;
  while (end > 0 && (uint8_t(s[end]) & 0xC0) == 0x80) --end;  // a whole character
  return s.substr(0, end) + "\n[... " + N(s.size() - end) + " more bytes in structuredContent]";
}

// "abc123def456 5m ago  title (3 changes)", plus HEAD and tags in a listing.
std::string NodeLine(const json& n, int64_t now) {
  if (!n.is_object()) return "(none)";
  std::string line = S(n, "short") + " " + Ago(n.value("time_ns", int64_t(0)), now) + "  " + S(n, "title");
  line += " (" + N(U(n, "changes")) + " changes)";
  if (B(n, "head")) line += " HEAD";
  if (!S(n, "tags").empty()) line += " [" + S(n, "tags") + "]";
  if (B(n, "damaged")) line += " DAMAGED";
  return line;
}

std::string Lines(const json& items, const std::function<std::string(const json&)>& line) {
  std::string out;
  size_t i = 0;
  if (!items.is_array()) return out;
  for (const json& it : items) {
    if (i++ == kMaxListed) {
      out += "... " + N(items.size() - kMaxListed) + " more in structuredContent\n";
      break;
    }
    out += line(it) + "\n";
  }
  return out;
}

std::string ChangeLine(const json& c) { return S(c, "op") + " " + S(c, "path") + (B(c, "dir") ? "/" : ""); }

std::string Exit(const json& r) {
  if (r.contains("exit_code") && r["exit_code"].is_number()) return "exit " + N(r["exit_code"].get<uint64_t>());
  if (B(r, "timed_out")) return "timed out";
  if (U(r, "signal")) return "killed by signal " + N(U(r, "signal"));
  return "no exit code";
}

using Fn = std::function<std::string(const json&, int64_t)>;

const std::map<std::string, Fn>& Forms() {
  static const std::map<std::string, Fn> forms = {
      {"snapshot", [](const json& r, int64_t now) {
         if (!B(r, "created")) return std::string("Nothing changed: no node made (allow_empty=true makes one anyway).");
         return "Saved node " + NodeLine(r["node"], now) + ": +" + N(U(r, "added")) + " ~" + N(U(r, "modified")) + " -" +
                N(U(r, "deleted")) + ". rollback ref=" + S(r["node"], "short") + " returns here.";
       }},
      {"rollback", [](const json& r, int64_t now) {
         std::string t = "Now at " + NodeLine(r["node"], now) + ": " + N(U(r, "files_written")) + " files written, " +
                         N(U(r, "removed")) + " removed, " + N(U(r, "created")) + " created.";
         if (r.contains("saved") && r["saved"].is_string())
           t += " Unsaved changes were saved as " + r["saved"].get<std::string>().substr(0, 12) + " (rollback ref=" +
                r["saved"].get<std::string>().substr(0, 12) + " undoes this).";
         return t + " Processes were not restarted.";
       }},
      {"log", [](const json& r, int64_t now) {
         std::string t = Lines(r["nodes"], [&](const json& n) { return NodeLine(n, now); });
         if (t.empty()) t = "No nodes match.\n";
         if (B(r, "more")) t += "Older nodes exist: log limit=" + N(r["nodes"].size() * 3) + ", or digest.\n";
         return t + "Next: show ref=<id>, diff from=<id>, read_file ref=<id>, rollback ref=<id>.";
       }},
      {"branches", [](const json& r, int64_t now) {
         return Lines(r["branches"], [&](const json& n) { return NodeLine(n, now); });
       }},
      {"head", [](const json& r, int64_t now) { return "HEAD is " + NodeLine(r["node"], now); }},
      {"show", [](const json& r, int64_t now) {
         const json& n = r["node"];
         json flat = n;
         if (flat.contains("changes") && flat["changes"].is_object())
           flat["changes"] = U(n["changes"], "added") + U(n["changes"], "modified") + U(n["changes"], "deleted");
         std::string t = NodeLine(flat, now) + "\n";
         if (!S(n, "message").empty()) t += "message: " + S(n, "message") + "\n";
         if (n.contains("provenance") && n["provenance"].is_object()) {
           const json& p = n["provenance"];
           t += "made by: " + S(p, "kind");
           if (!S(p, "command").empty()) t += " `" + S(p, "command") + "`";
           if (p.contains("who") && p["who"].is_object()) t += " via " + S(p["who"], "origin");
           t += "\n";
         }
         if (n.contains("parent") && n["parent"].is_string()) t += "parent: " + n["parent"].get<std::string>().substr(0, 12) + "\n";
         if (U(n, "files")) t += "files: " + N(U(n, "files")) + ", " + history::HumanBytes(U(n, "logical_bytes")) + "\n";
         if (!S(n, "packages_omitted").empty()) t += "packages: " + S(n, "packages_omitted") + "\n";
         if (n.contains("packages") && n["packages"].is_array())
           t += Lines(n["packages"], [](const json& p) {
             return S(p, "op") + " " + S(p, "ecosystem") + " " + S(p, "name") + " " + S(p, "new_version");
           });
         if (n.contains("changes") && n["changes"].is_object())
           t += "changed (sample):\n" + Lines(n["changes"]["sample"], ChangeLine);
         return t;
       }},
      {"diff", [](const json& r, int64_t) {
         std::string t = N(U(r, "total")) + " paths differ" + (B(r, "truncated") ? " (list cut: raise limit or give paths)" : "") + ":\n";
         t += Lines(r["changes"], ChangeLine);
         if (r.contains("patches"))
           for (const json& p : r["patches"])
             t += S(p, "note").empty() ? S(p, "diff") : S(p, "path") + ": " + S(p, "note") + "\n";
         return Cut(t, kMaxOutput);
       }},
      {"digest", [](const json& r, int64_t) { return S(r, "text"); }},
      {"bisect", [](const json& r, int64_t now) {
         if (!B(r, "found")) return "No first bad node found on the path (" + N(U(r, "path")) + " nodes).";
         std::string t = "First bad: " + NodeLine(r["first_bad"], now) + "\n";
         if (r.contains("last_good") && r["last_good"].is_string()) t += "Last good: " + r["last_good"].get<std::string>().substr(0, 12) + "\n";
         t += "Changed there:\n" + Lines(r["sample"], ChangeLine);
         return t + "Next: diff from=<last good> to=<first bad> patch=true, or rollback.";
       }},
      {"tag", [](const json& r, int64_t) {
         if (r.contains("tags")) return Lines(r["tags"], [](const json& t) { return S(t, "name") + " " + S(t, "id").substr(0, 12); });
         if (!S(r, "deleted").empty()) return "Deleted tag " + S(r, "deleted") + ".";
         return "Tagged " + S(r, "id").substr(0, 12) + " as " + S(r, "name") + ".";
       }},
      {"status", [](const json& r, int64_t now) {
         std::string t = B(r, "dirty") ? N(U(r, "changed")) + " paths changed since HEAD (not yet in a node):\n" + Lines(r["changes"], ChangeLine)
                                       : std::string("Clean: the live tree is HEAD.\n");
         return t + "HEAD " + NodeLine(r["head"], now) + "; " + N(U(r, "nodes")) + " nodes, " + history::HumanBytes(U(r, "stored_bytes")) + " stored.";
       }},
      {"retain", [](const json& r, int64_t) {
         return std::string(B(r, "dry_run") ? "Would drop " : "Dropped ") + N(U(r, "dropped_nodes")) + " nodes, kept " +
                N(U(r, "kept")) + "." + (B(r, "dry_run") ? "" : " gc frees the space.");
       }},
      {"gc", [](const json& r, int64_t) {
         return "Freed " + history::HumanBytes(U(r, "bytes_freed")) + " (" + N(U(r, "dropped_objects")) + " objects).";
       }},
      {"push", [](const json& r, int64_t) {
         return "Pushed " + S(r, "node").substr(0, 12) + " to " + S(r, "target") + ": " + N(U(r, "blobs_sent")) + " blobs sent (" +
                history::HumanBytes(U(r, "bytes_sent")) + "), " + N(U(r, "blobs_skipped")) + " already there.";
       }},
      {"exec", [](const json& r, int64_t now) {
         std::string t = Exit(r) + " in " + N(U(r, "duration_ms")) + " ms; ";
         t += r.contains("node") && r["node"].is_object() ? "node " + NodeLine(r["node"], now) : std::string("no files changed");
         t += "\n";
         for (const char* stream : {"stdout", "stderr"}) {
           std::string out = S(r, stream);
           if (out.empty()) continue;
           t += std::string("--- ") + stream + (B(r, (std::string(stream) + "_truncated").c_str()) ? " (cut at output_cap)" : "") + "\n";
           t += Cut(out, kMaxOutput);
           if (!out.ends_with('\n')) t += "\n";
         }
         return t;
       }},
      {"spawn", [](const json& r, int64_t) {
         return "Started job " + N(U(r, "job")) + " (pid " + N(U(r, "pid")) + "). Read its output: job_output job=" + N(U(r, "job")) +
                "; stop it: kill job=" + N(U(r, "job")) + ".";
       }},
      {"job_output", [](const json& r, int64_t) {
         std::string t = "job " + N(U(r, "job")) + (B(r, "running") ? " running" : " ended") +
                         (r.contains("exit_code") ? " (exit " + N(U(r, "exit_code")) + ")" : "") + "; bytes " + N(U(r, "from")) + "-" +
                         N(U(r, "next")) + " of " + N(U(r, "size")) + ":\n" + S(r, "data");
         if (!t.ends_with('\n')) t += "\n";
         if (U(r, "next") < U(r, "size")) t += "More: job_output job=" + N(U(r, "job")) + " since=" + N(U(r, "next")) + "\n";
         return t;
       }},
      {"ps", [](const json& r, int64_t) {
         std::string t = Lines(r["jobs"], [](const json& j) {
           return "job " + N(U(j, "job")) + " " + S(j, "kind") + (B(j, "running") ? " running" : " ended " + Exit(j)) + ": " + S(j, "command");
         });
         return t.empty() ? std::string("No jobs.") : t;
       }},
      {"kill", [](const json& r, int64_t) {
         if (!r.contains("killed") || r["killed"].empty()) return std::string("Nothing was running.");
         std::string t = "Killed job";
         for (const json& j : r["killed"]) t += " " + j.dump();
         return t + ".";
       }},
      {"fork", [](const json& r, int64_t) {
         const json& w = r["workspace"];
         return "Workspace " + S(w, "name") + " forked from " + S(w, "base").substr(0, 12) + ". Next: exec workspace=" + S(w, "name") + ".";
       }},
      {"workspaces", [](const json& r, int64_t) {
         std::string t = Lines(r["workspaces"], [](const json& w) {
           return S(w, "name") + " from " + S(w, "base").substr(0, 12) + " at " + S(w, "head").substr(0, 12) + (B(w, "busy") ? " busy" : "");
         });
         return t.empty() ? std::string("No workspaces.") : t;
       }},
      {"workspace_rm", [](const json& r, int64_t) {
         return "Removed workspace " + S(r, "removed") + (B(r, "existed") ? "." : " (it was already gone).");
       }},
      {"tournament", [](const json& r, int64_t) {
         std::string t = Lines(r["candidates"], [](const json& c) {
           return "#" + N(U(c, "index")) + (B(c, "winner") ? " WINNER" : B(c, "passed") ? " passed" : " failed") + ": " + S(c, "candidate") +
                  (S(c, "error").empty() ? "" : " (" + S(c, "error") + ")");
         });
         if (r.contains("winner") && r["winner"].is_number())
           t += B(r, "applied") ? "The winner was applied to the live tree." : "The winner was not applied (apply=false).";
         else
           t += "No candidate passed; the live tree is unchanged.";
         return t;
       }},
      {"mount", [](const json& r, int64_t) { return "Mounted " + S(r["mount"], "node").substr(0, 12) + " at " + S(r["mount"], "dir") + "."; }},
      {"umount", [](const json& r, int64_t) { return "Unmounted " + S(r["unmounted"], "dir") + "."; }},
      {"read_file", [](const json& r, int64_t) {
         std::string where = S(r, "node").empty() ? "live" : "node " + S(r, "node");
         if (B(r, "binary")) return S(r, "path") + " (" + where + "): binary, " + history::HumanBytes(U(r, "size")) + "; not shown.";
         std::string t = S(r, "path") + " (" + where + ") lines " + N(U(r, "start_line")) + "-" + N(U(r, "end_line"));
         if (r.contains("total_lines")) t += " of " + N(U(r, "total_lines"));
         t += ":\n" + S(r, "text");
         if (!t.ends_with('\n')) t += "\n";
         if (B(r, "truncated")) t += "More: read_file start_line=" + N(U(r, "end_line") + 1) + "\n";
         return t;
       }},
      {"write_file", [](const json& r, int64_t now) {
         std::string t = std::string(B(r, "created") ? "Created " : "Wrote ") + S(r, "path") + " (" + history::HumanBytes(U(r, "bytes")) + "); ";
         t += r.contains("node") && r["node"].is_object() ? "node " + NodeLine(r["node"], now) : std::string("content was already so, no node");
         return t;
       }},
      {"list_dir", [](const json& r, int64_t) {
         std::string t = Lines(r["entries"], [](const json& e) {
           std::string k = S(e, "kind");
           return S(e, "path") + (k == "dir" ? "/" : k == "symlink" ? " -> " + S(e, "target") : k == "file" ? "  " + history::HumanBytes(U(e, "size")) : "  (" + k + ")");
         });
         if (B(r, "truncated")) t += N(U(r, "total")) + "+ entries; list a subdirectory or raise limit.\n";
         return t.empty() ? std::string("Empty directory.") : t;
       }},
      {"search", [](const json& r, int64_t) {
         std::string t = Lines(r["matches"], [](const json& m) {
           return U(m, "line") ? S(m, "path") + ":" + N(U(m, "line")) + ": " + S(m, "text") : S(m, "path");
         });
         if (t.empty()) t = "No matches in " + N(U(r, "files")) + " files.\n";
         if (B(r, "truncated")) t += "More matches exist: narrow path or pattern.\n";
         return t;
       }},
      {"file_history", [](const json& r, int64_t now) {
         std::string t = Lines(r["changes"], [&](const json& c) {
           const json& n = c["node"];
           std::string l = S(c, "op") + " " + NodeLine(n, now);
           if (n.contains("provenance") && n["provenance"].is_object()) {
             const json& p = n["provenance"];
             if (!S(p, "command").empty()) l += " `" + S(p, "command") + "`";
             if (p.contains("who") && p["who"].is_object()) l += " via " + S(p["who"], "origin");
           }
           return l;
         });
         if (t.empty()) t = "No change to " + S(r, "path") + " in " + N(U(r, "scanned")) + " nodes.\n";
         if (B(r, "more")) t += "Older changes may exist: raise limit or start at ref=<oldest listed>.\n";
         return t + "Next: read_file ref=<id>, diff from=<parent> to=<id> paths=[path], rollback ref=<id> paths=[path].";
       }},
  };
  return forms;
}

}  // namespace

std::string Ago(int64_t then_ns, int64_t now_ns) {
  int64_t s = (now_ns - then_ns) / 1000000000;
  if (s < 0) s = 0;
  if (s < 60) return N(uint64_t(s)) + "s ago";
  if (s < 3600) return N(uint64_t(s / 60)) + "m ago";
  if (s < 86400 * 2) return N(uint64_t(s / 3600)) + "h ago";
  return N(uint64_t(s / 86400)) + "d ago";
}

std::string SummarizeResult(const std::string& tool, const json& result, int64_t now_ns) {
  auto it = Forms().find(tool);
  if (it == Forms().end() || !result.is_object()) return result.dump(-1, ' ', false, json::error_handler_t::replace);
  try {
    std::string t = it->second(result, now_ns);
    while (t.ends_with('\n')) t.pop_back();
    return t;
  } catch (const json::exception&) {  // a reply of another shape (a newer daemon): the data as it is
    return result.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

}  // namespace agentenv::serve
