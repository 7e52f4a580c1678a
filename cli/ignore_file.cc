// LoadIgnoreRules (cli.h): defaults plus the repository's ignore file.
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/cli.h"
#include "watch/ignore.h"

namespace agentenv::cli {

Result<snap::PathFilter> LoadIgnoreRules(const std::string& root) {
  auto rules = std::make_shared<watch::IgnoreRules>(watch::IgnoreRules::Defaults());
  std::string path = root + "/ignore";
  std::ifstream in(path);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    auto extra = watch::IgnoreRules::Parse(text.str());
    if (!extra) return Fail(ErrorCode::kInvalid, path + ": " + extra.error().message);
    rules->Add(*extra);
  }
  return snap::PathFilter([rules](std::string_view rel, bool is_dir) { return rules->Ignored(rel, is_dir); });
}

}  // namespace agentenv::cli
