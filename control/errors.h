// Error codes as the socket, MCP and --json name them ("not_found", ...),
// and back. The CLI's exit codes are a function of the same code
// (cli/cli.cc), so nothing ever matches an error's message.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "common/result.h"

namespace agentenv::control {

std::string_view ErrorCodeName(ErrorCode c);
// The code named `name`; kIo for a name it does not know.
ErrorCode ErrorCodeNamed(std::string_view name);

// {"code","message"} plus "partial": true when the operation may have
// partly happened.
nlohmann::json ErrorJson(const Error& e);
// The Error a response's "error" object describes.
Error ErrorFromJson(const nlohmann::json& error);

// Whose filesystem filled up: the repository's (dropping old history
// frees space) or an output's the user named (export).
enum class FullDiskAt { kRepository, kOutput };

// A full disk (ENOSPC, EDQUOT) says where and what to do: `e` with the
// filesystem holding `where` named and the remedy appended; any other
// error unchanged. Every operation's error goes through this once.
Error ExplainFullDisk(Error e, std::string_view where, FullDiskAt at = FullDiskAt::kRepository);
template <class T>
Result<T> ExplainFullDisk(Result<T> r, std::string_view where, FullDiskAt at = FullDiskAt::kRepository) {
  if (r) return r;
  return Unexpected<Error>(ExplainFullDisk(std::move(r.error()), where, at));
}

}  // namespace agentenv::control
