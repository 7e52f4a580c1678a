#include "control/patch.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace agentenv::control {
namespace {

// Bounds on the work a patch may ask for: hunks, and line comparisons
// spent looking for one hunk's place (kMaxHunks * kCompareBudget in all).
constexpr size_t kMaxHunks = 1000;
constexpr size_t kCompareBudget = 100000;

// A file as lines, each with its '\n' (the last may lack it).
std::vector<std::string> Lines(std::string_view s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t nl = s.find('\n', at);
    size_t end = nl == std::string_view::npos ? s.size() : nl + 1;
    out.emplace_back(s.substr(at, end - at));
    at = end;
  }
  return out;
}

struct Hunk {
  uint64_t old_start = 0, old_count = 1, new_start = 0, new_count = 1;
  std::vector<std::string> old_lines, new_lines;
};

// "N" or "N,M" at p; advances p.
bool Range(std::string_view& p, uint64_t& start, uint64_t& count) {
  auto r = std::from_chars(p.data(), p.data() + p.size(), start);
  if (r.ec != std::errc()) return false;
  p.remove_prefix(size_t(r.ptr - p.data()));
  count = 1;
  if (!p.empty() && p[0] == ',') {
    p.remove_prefix(1);
    r = std::from_chars(p.data(), p.data() + p.size(), count);
    if (r.ec != std::errc()) return false;
    p.remove_prefix(size_t(r.ptr - p.data()));
  }
  return true;
}

bool ParseHeader(std::string_view line, Hunk& h) {
  if (!line.starts_with("@@ -")) return false;
  line.remove_prefix(4);
  if (!Range(line, h.old_start, h.old_count)) return false;
  if (!line.starts_with(" +")) return false;
  line.remove_prefix(2);
  if (!Range(line, h.new_start, h.new_count)) return false;
  return line.starts_with(" @@");
}

bool MatchesAt(const std::vector<std::string>& file, size_t at, const std::vector<std::string>& old) {
  if (at + old.size() > file.size()) return false;
  for (size_t i = 0; i < old.size(); ++i)
    if (file[at + i] != old[i]) return false;
  return true;
}

}  // namespace

Result<std::string> ApplyPatch(std::string_view original, std::string_view patch) {
  std::vector<std::string> plines = Lines(patch);
  std::vector<Hunk> hunks;
  for (size_t i = 0; i < plines.size();) {
    std::string_view line = plines[i];
    if (!line.starts_with("@@")) {
      if (!hunks.empty() && !line.starts_with("diff ") && !line.starts_with("--- ") && !line.starts_with("index ") &&
          line != "\n")
        return Fail(ErrorCode::kInvalid, "patch: hunk " + std::to_string(hunks.size()) + ": more lines than its header counts");
      ++i;
      continue;
    }
    Hunk h;
    std::string where = "patch: hunk " + std::to_string(hunks.size() + 1) + ": ";
    if (!ParseHeader(line, h)) return Fail(ErrorCode::kInvalid, where + "malformed header (expected @@ -a,b +c,d @@)");
    ++i;
    uint64_t olds = 0, news = 0;
    std::string* last = nullptr;
    while (i < plines.size() && (olds < h.old_count || news < h.new_count)) {
      std::string_view l = plines[i];
      if (l.starts_with("\\")) {  // "\ No newline at end of file"
        if (last && last->ends_with('\n')) last->pop_back();
        ++i;
        continue;
      }
      char kind = l.empty() ? ' ' : l[0];
      std::string body(l.empty() ? l : l.substr(1));
      if (l == "\n") body = "\n";  // an empty context line whose space an editor dropped
      if (kind == ' ') {
        h.old_lines.push_back(body);
        h.new_lines.push_back(body);
        ++olds, ++news;
        last = nullptr;
        // Both sides share it: a later "\" cuts both.
        if (i + 1 < plines.size() && plines[i + 1].starts_with("\\")) {
          if (h.old_lines.back().ends_with('\n')) h.old_lines.back().pop_back();
          if (h.new_lines.back().ends_with('\n')) h.new_lines.back().pop_back();
          ++i;
        }
      } else if (kind == '-') {
        h.old_lines.push_back(body);
        last = &h.old_lines.back();
        ++olds;
      } else if (kind == '+') {
        h.new_lines.push_back(body);
        last = &h.new_lines.back();
        ++news;
      } else {
        return Fail(ErrorCode::kInvalid, where + "a line starts with neither ' ', '-' nor '+'");
      }
      ++i;
    }
    if (i < plines.size() && plines[i].starts_with("\\")) {
      if (last && last->ends_with('\n')) last->pop_back();
      ++i;
    }
    if (olds != h.old_count || news != h.new_count)
      return Fail(ErrorCode::kInvalid, where + "its lines do not add up to the counts in its header");
    hunks.push_back(std::move(h));
  }
  if (hunks.empty()) return Fail(ErrorCode::kInvalid, "patch: no hunks (expected a unified diff with @@ lines)");
  if (hunks.size() > kMaxHunks)
    return Fail(ErrorCode::kInvalid, "patch: " + std::to_string(hunks.size()) + " hunks (at most " +
                                         std::to_string(kMaxHunks) + "; write the whole content instead)");

  std::vector<std::string> file = Lines(original);
  std::vector<std::string> out;
  size_t done = 0;  // lines of `file` already copied or replaced
  for (size_t k = 0; k < hunks.size(); ++k) {
    const Hunk& h = hunks[k];
    // diff -u numbers an empty old side by the line before it.
    size_t want = h.old_count == 0 ? size_t(h.old_start) : (h.old_start == 0 ? 0 : size_t(h.old_start - 1));
    size_t at = SIZE_MAX;
    // Offsets tried: at most kCompareBudget line comparisons per hunk.
    const size_t window = std::max<size_t>(1, kCompareBudget / std::max<size_t>(1, h.old_lines.size()));
    for (size_t d = 0; at == SIZE_MAX && d <= window && (want >= d + done || want + d <= file.size()); ++d) {
      if (want + d <= file.size() && want + d >= done && MatchesAt(file, want + d, h.old_lines)) at = want + d;
      else if (d && want >= d + done && MatchesAt(file, want - d, h.old_lines)) at = want - d;
    }
    if (at == SIZE_MAX)
      return Fail(ErrorCode::kInvalid, "patch: hunk " + std::to_string(k + 1) + ": its old lines (from line " +
                                           std::to_string(h.old_start) + ") are not in the file; read_file it again");
    out.insert(out.end(), file.begin() + long(done), file.begin() + long(at));
    out.insert(out.end(), h.new_lines.begin(), h.new_lines.end());
    done = at + h.old_lines.size();
  }
  out.insert(out.end(), file.begin() + long(done), file.end());
  std::string result;
  for (const std::string& l : out) result += l;
  return result;
}

}  // namespace agentenv::control
