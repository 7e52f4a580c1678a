#include "common/textdiff.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace agentenv {
namespace {

// Lines including their '\n' (the last may lack it).
std::vector<std::string_view> Lines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t nl = s.find('\n', i);
    size_t end = nl == std::string_view::npos ? s.size() : nl + 1;
    out.push_back(s.substr(i, end - i));
    i = end;
  }
  return out;
}

struct Edit {
  char op;       // ' ' same, '-' only in a, '+' only in b
  size_t a, b;   // line indexes (a for ' ' and '-', b for '+')
};

// Myers' greedy shortest edit script, keeping each round's frontier
// (round d holds diagonals -d..d) to walk back the path.
std::optional<std::vector<Edit>> Script(const std::vector<std::string_view>& A, const std::vector<std::string_view>& B,
                                        size_t max_d) {
  const long n = long(A.size()), m = long(B.size());
  std::vector<std::vector<long>> trace;
  std::vector<long> v(3, 0);  // round -1: diagonal 1 starts at x = 0
  auto at = [](const std::vector<long>& r, long d, long k) { return r[size_t(k + d)]; };
  long found = -1;
  for (long d = 0; d <= n + m && size_t(d) <= max_d; ++d) {
    std::vector<long> cur(size_t(2 * d + 1));
    for (long k = -d; k <= d; k += 2) {
      long x;
      if (d == 0) x = 0;
      else if (k == -d || (k != d && at(v, d - 1, k - 1) < at(v, d - 1, k + 1))) x = at(v, d - 1, k + 1);
      else x = at(v, d - 1, k - 1) + 1;
      long y = x - k;
      while (x < n && y < m && A[size_t(x)] == B[size_t(y)]) ++x, ++y;
      cur[size_t(k + d)] = x;
      if (x >= n && y >= m) found = d;
    }
    trace.push_back(cur);
    v = std::move(cur);
    if (found >= 0) break;
  }
  if (found < 0) return std::nullopt;
  std::vector<Edit> rev;
  long x = n, y = m;
  for (long d = found; d > 0; --d) {
    const std::vector<long>& prev = trace[size_t(d - 1)];
    long k = x - y;
    long pk = (k == -d || (k != d && at(prev, d - 1, k - 1) < at(prev, d - 1, k + 1))) ? k + 1 : k - 1;
    long px = at(prev, d - 1, pk), py = px - pk;
    long mx = pk == k + 1 ? px : px + 1;  // after the one edit of this round
    long my = mx - k;
    while (x > mx && y > my) --x, --y, rev.push_back({' ', size_t(x), size_t(y)});
    if (pk == k + 1) rev.push_back({'+', size_t(px), size_t(py)});
    else rev.push_back({'-', size_t(px), size_t(py)});
    x = px, y = py;
  }
  while (x > 0 && y > 0) --x, --y, rev.push_back({' ', size_t(x), size_t(y)});
  std::reverse(rev.begin(), rev.end());
  return rev;
}

void PutLine(std::string& out, char op, std::string_view line) {
  out += op;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

}  // namespace

bool LooksLikeText(std::string_view data) {
  return std::memchr(data.data(), 0, std::min<size_t>(data.size(), 8000)) == nullptr;
}

std::optional<std::string> UnifiedDiff(std::string_view a, std::string_view b, const std::string& a_name,
                                       const std::string& b_name, size_t max_edits) {
  if (a == b) return std::string();
  std::vector<std::string_view> A = Lines(a), B = Lines(b);
  auto script = Script(A, B, max_edits);
  if (!script) return std::nullopt;
  const std::vector<Edit>& e = *script;
  constexpr size_t kContext = 3;
  std::string out = "--- " + a_name + "\n+++ " + b_name + "\n";
  size_t i = 0;
  while (i < e.size()) {
    while (i < e.size() && e[i].op == ' ') ++i;
    if (i == e.size()) break;
    // A hunk: from kContext lines before this change to kContext after
    // the last change that is at most 2*kContext unchanged lines later.
    size_t start = i >= kContext ? i - kContext : 0;
    size_t end = i;
    for (size_t j = i; j < e.size(); ++j) {
      if (e[j].op != ' ') end = j + 1;
      else if (j - end >= 2 * kContext) break;
    }
    end = std::min(e.size(), end + kContext);
    size_t a_start = 0, b_start = 0, a_len = 0, b_len = 0;
    bool a_set = false, b_set = false;
    // Positions: the first line of each side in the hunk.
    size_t a_pos = 0, b_pos = 0;
    for (size_t j = 0; j < start; ++j) {
      if (e[j].op != '+') ++a_pos;
      if (e[j].op != '-') ++b_pos;
    }
    std::string body;
    for (size_t j = start; j < end; ++j) {
      if (e[j].op != '+') {
        if (!a_set) a_start = a_pos, a_set = true;
        ++a_len;
      }
      if (e[j].op != '-') {
        if (!b_set) b_start = b_pos, b_set = true;
        ++b_len;
      }
      PutLine(body, e[j].op, e[j].op == '+' ? B[e[j].b] : A[e[j].a]);
    }
    if (!a_set) a_start = a_pos;
    if (!b_set) b_start = b_pos;
    // Unified diff numbers lines from 1; an empty side names the line before.
    out += "@@ -" + std::to_string(a_len ? a_start + 1 : a_start) + "," + std::to_string(a_len) + " +" +
           std::to_string(b_len ? b_start + 1 : b_start) + "," + std::to_string(b_len) + " @@\n" + body;
    i = end;
  }
  return out;
}

}  // namespace agentenv
