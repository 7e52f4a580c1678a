// Automatic labels: what a model reads to choose a rollback target. They
// name the most significant paths and agree with the node's own counts.
#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace agentenv::test
