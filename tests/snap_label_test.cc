// Automatic labels: what a model reads to choose a rollback target. They
// name the most significant paths and agree with the node's own counts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "snap/node.h"

namespace agentenv::test {
namespace {

using snap::Change;

TEST_CASE("labels: one deleted file is named by its path, not its directory", "[snap][label]") {
  std::vector<Change> c = {{'M', "etc", true}, {'-', "etc/issue.net", false}};
  CHECK(snap::SummaryLabel(c) == "+0 ~1 -1: - etc/issue.net");
  std::vector<Change> one = {{'+', "added.txt", false}};
  CHECK(snap::SummaryLabel(one) == "+ added.txt");
}

TEST_CASE("labels: counts agree with the node's, groups name the busiest directories", "[snap][label]") {
  std::vector<Change> c;
  for (int i = 0; i < 455; ++i) c.push_back({'+', "usr/lib/python3/dist-packages/pkg/f" + std::to_string(i), false});
  for (int i = 0; i < 178; ++i) c.push_back({'M', "etc/conf.d/c" + std::to_string(i), false});
  c.push_back({'-', "etc/issue.net", false});
  c.push_back({'M', "etc", true});
  c.push_back({'M', "", true});  // the root
  snap::ChangeSummary s = snap::Summarize(c);
  std::string label = snap::SummaryLabel(c);
  INFO(label);
  CHECK(label.rfind("+" + std::to_string(s.added) + " ~" + std::to_string(s.modified) + " -" +
                        std::to_string(s.deleted) + ": ", 0) == 0);
  CHECK(label.find("+455 usr/") != std::string::npos);
  CHECK(label.find("M178 etc/conf.d/…") != std::string::npos);
  CHECK(label.find("- etc/issue.net") != std::string::npos);
}

TEST_CASE("labels: a change of the root alone is named '.'", "[snap][label]") {
  std::vector<Change> c = {{'M', "", true}};
  CHECK(snap::SummaryLabel(c) == "M .");
}


// The label as it was computed from the whole list of changes, before the
// changes were tallied as they come: the streamed label must match it.
std::string WholeListLabel(const std::vector<Change>& changes) {
  auto dirname = [](const std::string& p) {
    size_t slash = p.rfind('/');
    return slash == std::string::npos ? std::string() : p.substr(0, slash);
  };
  auto depth = [](const std::string& p) { return size_t(std::count(p.begin(), p.end(), '/')); };
  std::vector<Change> named;
  for (const Change& c : changes)
    if (!(c.is_dir && c.op == 'M')) named.push_back(c);
  const std::vector<Change>& all = named.empty() ? changes : named;
  if (all.empty()) return "";
  struct Group {
    uint64_t n = 0;
    std::string example;
  };
  std::map<std::pair<char, std::string>, Group> groups;
  for (const Change& c : all) {
    Group& g = groups[{c.op, c.path}];
    if (g.n++ == 0) g.example = c.path.empty() ? "." : c.path;
  }
  for (int round = 0; groups.size() > 3 && round < 64; ++round) {
    std::map<std::pair<char, std::string>, Group> up;
    size_t deepest = 0;
    for (const auto& [k, g] : groups) deepest = std::max(deepest, depth(k.second));
    for (const auto& [k, g] : groups) {
      std::string key = depth(k.second) == deepest && !k.second.empty() ? dirname(k.second) : k.second;
      Group& to = up[{k.first, key}];
      if (to.n == 0) to.example = g.example;
      to.n += g.n;
    }
    if (up.size() == groups.size() && deepest == 0) break;
    groups = std::move(up);
  }
  std::vector<std::pair<uint64_t, std::pair<char, std::string>>> order;
  for (const auto& [k, g] : groups) order.push_back({g.n, k});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (size_t i = 0; i < order.size() && i < 3; ++i) {
    const auto& [n, k] = order[i];
    if (!out.empty()) out += ", ";
    out += k.first;
    if (n > 1) out += std::to_string(n) + " " + (k.second.empty() ? std::string(".") : k.second) + "/…";
    else out += " " + groups[k].example;
  }
  if (order.size() > 3) out += ", …";
  snap::ChangeSummary counts = snap::Summarize(changes);
  if (counts.total() == 1) return out;
  return "+" + std::to_string(counts.added) + " ~" + std::to_string(counts.modified) + " -" +
         std::to_string(counts.deleted) + ": " + out;
}

TEST_CASE("labels: tallied in bounded memory, the label is the whole list's", "[snap][label]") {
  // Many more groups than the tally keeps, at uneven depths, with a few
  // lone changes that must keep their own path when they stay alone.
  for (unsigned seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    std::vector<Change> c;
    const char ops[] = {'+', 'M', '-'};
    int n = 2000 + int(rng() % 30000);
    for (int i = 0; i < n; ++i) {
      std::string p = "d" + std::to_string(rng() % (seed * 3));
      for (unsigned lvl = rng() % 6; lvl > 0; --lvl) p += "/s" + std::to_string(rng() % 40);
      p += "/f" + std::to_string(i);
      c.push_back({ops[seed % 2 ? 0 : rng() % 3], p, rng() % 50 == 0});
    }
    if (seed == 6) c = {{'M', "", true}, {'M', "a", true}, {'M', "a/b", true}, {'M', "c", true}, {'M', "d", true}};
    snap::ChangeTally t;
    for (const Change& x : c) t.Add(x);
    INFO("seed " << seed << ", " << c.size() << " changes");
    CHECK(t.Label() == WholeListLabel(c));
    CHECK(t.summary() == snap::Summarize(c));
  }
}

}  // namespace
}  // namespace agentenv::test
