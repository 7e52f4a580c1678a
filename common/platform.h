// Facts about the host that several formats spell.
#pragma once

namespace agentenv {

// The host's CPU architecture as OCI image platforms (and Go) name it:
// "amd64", "arm64", or "unknown".
constexpr const char* OciArchitecture() {
#if defined(__x86_64__)
  return "amd64";
#elif defined(__aarch64__)
  return "arm64";
#else
  return "unknown";
#endif
}

}  // namespace agentenv
