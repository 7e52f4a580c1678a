// registry/: the client side of the OCI distribution API (Docker
// Distribution, Harbor, ECR, GHCR, ...): pushing an image from an OCI image
// layout and pulling one into a layout. It knows layouts and HTTP, not
// repositories: control/ turns nodes into layouts and back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"

namespace agentenv::registry {

// "HOST[:PORT]/REPO[/MORE]:TAG" (or "@sha256:..." instead of ":TAG"). The
// host must look like one (a '.', a ':' or "localhost"), as docker says.
struct Reference {
  std::string host, repository, tag;  // tag: a tag or a digest
  std::string String() const;
};
// Errors: kInvalid naming what is wrong.
Result<Reference> ParseReference(const std::string& text);

// What a transfer is doing, for a progress display.
struct Progress {
  std::string what;        // "layer", "config", "manifest"
  std::string digest;
  size_t index = 0, count = 0;  // this blob of how many (layers and config)
  uint64_t done = 0, total = 0;  // bytes of this blob
  bool skipped = false;    // the registry has it already (push)
  bool finished = false;
};

struct Options {
  bool insecure = false;  // plain HTTP (and no TLS verification)
  // A docker/podman config.json with "auths"; empty: the first of
  // $XDG_RUNTIME_DIR/containers/auth.json and ~/.docker/config.json that exists.
  std::string auth_file;
  int attempts = 4;       // per request, for transient failures (connection, 5xx, 429)
  int backoff_ms = 200;   // doubled after each failed attempt
  // Waits out one backoff; empty: sleeps. Tests pass a clock of their own.
  std::function<void(std::chrono::milliseconds)> wait;
  std::function<void(const Progress&)> progress;  // may be empty
};

struct TransferStats {
  uint64_t blobs = 0, blobs_sent = 0, blobs_skipped = 0, bytes_sent = 0, bytes_received = 0;
  std::string manifest;  // its digest
};

// Pushes image `manifest_digest` of the layout at `layout` as `ref`: each
// blob the manifest names is checked with HEAD first and uploaded only
// when the registry lacks it, then the manifest is PUT under the tag.
// Errors: kInvalid (401/403: credentials refused or missing, named with the
// auth file), kNotFound (404), kIo (connection refused, timeouts, 5xx after
// the retries; the message says which and how often it was tried). Not
// thread-safe per call; calls may run in parallel.
Result<TransferStats> Push(const std::string& layout, const std::string& manifest_digest, const Reference& ref,
                           const Options& opt);

// Whether the registry has blob `digest` (a HEAD request). Errors: as Push.
Result<bool> HasBlob(const Reference& ref, const Options& opt, const std::string& digest);

// Pulls `ref` into the new OCI image layout `layout` (created; must not
// exist) as tag `tag`: the manifest (for an index, this machine's linux
// platform), its config and layers, each verified against its digest
// while it is written (a mismatch is kInvalid and nothing is kept). On
// error the caller removes `layout`. Errors: as Push.
Result<TransferStats> Pull(const Reference& ref, const std::string& layout, const std::string& tag,
                           const Options& opt);

}  // namespace agentenv::registry
