// Opening a repository with its ignore rules (the defaults plus
// <root>/ignore, watch/ignore.h), as every caller of the operations does.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "snap/repo.h"

namespace agentenv::control {

// The repository's ignore rules as a filter for snap/. Errors: kInvalid
// with the file's path and line on a bad pattern.
Result<snap::PathFilter> LoadIgnoreRules(const std::string& root);

// Opens the repository at `root` with its ignore rules. Errors: as
// snap::Repo::Open, bad ignore file.
Result<std::unique_ptr<snap::Repo>> OpenRepo(const std::string& root);

}  // namespace agentenv::control
