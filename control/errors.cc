#include "control/errors.h"

#include <cerrno>

namespace agentenv::control {
namespace {

constexpr ErrorCode kCodes[] = {ErrorCode::kIo,     ErrorCode::kInvalid, ErrorCode::kNotFound,   ErrorCode::kExists,
                                ErrorCode::kBusy,   ErrorCode::kCorrupt, ErrorCode::kUnsupported,
                                ErrorCode::kNoProgram};

}  // namespace

std::string_view ErrorCodeName(ErrorCode c) {
  switch (c) {
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInvalid: return "invalid";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kExists: return "exists";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kNoProgram: return "no_program";
  }
  return "io";
}

ErrorCode ErrorCodeNamed(std::string_view name) {
  for (ErrorCode c : kCodes)
    if (ErrorCodeName(c) == name) return c;
  return ErrorCode::kIo;
}

nlohmann::json ErrorJson(const Error& e) {
  nlohmann::json j = {{"code", ErrorCodeName(e.code)}, {"message", e.message}};
  if (e.partial) j["partial"] = true;
  return j;
}

Error ErrorFromJson(const nlohmann::json& error) {
  if (!error.is_object()) return Error{"daemon error", 0, ErrorCode::kIo};
  Error e{error.value("message", "daemon error"), 0, ErrorCodeNamed(error.value("code", "io"))};
  e.partial = error.value("partial", false);
  return e;
}

Error ExplainFullDisk(Error e, std::string_view where, FullDiskAt at) {
  if (e.errno_value != ENOSPC && e.errno_value != EDQUOT) return e;
  const char* what = e.errno_value == ENOSPC ? "full" : "over its quota";
  e.message += "\n  the filesystem holding " + std::string(where) + " is " + what + ": free space there";
  if (at == FullDiskAt::kRepository) e.message += " (`agentenv retain` then `agentenv gc` drop old history)";
  e.message += ", then run the command again";
  return e;
}

}  // namespace agentenv::control
