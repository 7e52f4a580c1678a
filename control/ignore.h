// The repository's ignore rules and opening a repository with them.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "snap/repo.h"
#include "watch/ignore.h"

namespace agentenv::control {

// Built-in defaults plus <root>/ignore (gitignore syntax). Errors: kInvalid
// with the file's path and line on a bad pattern.
Result<watch::IgnoreRules> RepoIgnoreRules(const std::string& root);

// The same rules as a filter for snap/.
Result<snap::PathFilter> LoadIgnoreRules(const std::string& root);

// Opens the repository at `root` with its ignore rules. Errors: as
// snap::Repo::Open, bad ignore file.
Result<std::unique_ptr<snap::Repo>> OpenRepo(const std::string& root);

}  // namespace agentenv::control
