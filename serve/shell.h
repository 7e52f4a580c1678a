// shell: an interactive shell inside the environment on a pty, with
// automatic capture while it runs and a snapshot when it ends.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "capture/capture.h"

namespace agentenv::serve {

struct ShellOptions {
  std::vector<std::string> argv;  // empty: /bin/bash -i if the tree has it, else /bin/sh -i
  std::string network = "allow";
  std::string cwd = "/";
  capture::CaptureOptions capture;
  std::string workspace;  // a workspace's shell: its overlay as /, its snapshot at the end
};

struct ShellResult {
  int exit_code = 0;                // 128+N when signal N ended the shell
  std::optional<std::string> node;  // the snapshot at the end; none when nothing changed
  std::string label;
};

// Runs the shell on this process's terminal (stdin/stdout; raw mode while
// it runs, restored on every exit path; window size passed through) until
// it exits. Holds the repository lock meanwhile (a daemon serving the same
// root makes this fail with kBusy). Errors: the repository's, the pty's,
// the env's start-up.
Result<ShellResult> RunShell(const std::string& root, const ShellOptions& opt);

}  // namespace agentenv::serve
