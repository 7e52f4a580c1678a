// agentenv ctl exec: runs a command through the daemon's exec op and
// prints its output as it streams in; exits with the command's code.
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"
#include "common/text.h"
#include "control/frames.h"
#include "snap/layout.h"

namespace agentenv::cli {
namespace {

void WriteFd(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

// The raw bytes of an output frame.
std::string FrameBytes(const json& f) {
  if (f.contains("data") && f["data"].is_string()) return f["data"].get<std::string>();
  if (f.contains("data_b64") && f["data_b64"].is_string())
    return Base64Decode(f["data_b64"].get<std::string>()).value_or("");
  return "";
}

}  // namespace

int CmdCtlExec(int argc, char** argv) {
  Globals g;
  std::vector<std::string> cmd;
  std::string network = "allow", cwd, session, line;
  double timeout_s = 0, cpus = 0;
  uint64_t output_cap = 0, memory = 0, pids = 0, disk = 0;
  bool no_snap = false;
  CLI::App app{"Run a command inside the environment through the running daemon: output is printed as it "
               "arrives, the tree is snapshotted afterwards (labelled with the command), and the command's "
               "exit code is passed through (128+N when killed by signal N)", "ctl exec"};
  AddGlobals(app, g);
  app.add_option("--network", network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--cwd", cwd, "Working directory inside (default /, or the session's)");
  app.add_option("--timeout", timeout_s, "Kill every process of the command after this many seconds");
  app.add_option("--output-cap", output_cap, "Bytes of output kept per stream (default: all)");
  app.add_option("--memory", memory, "Memory limit in bytes (an error where it cannot be enforced)");
  app.add_option("--pids", pids, "Limit on processes/threads at once");
  app.add_option("--disk", disk, "Bytes the command may write (500M, 2G): past it writes fail with ENOSPC inside")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--cpus", cpus, "CPU time per wall second (0.5 = half a core)");
  app.add_option("--session", session, "Keep cwd and exported variables across calls with this name");
  app.add_flag("--no-snap", no_snap, "Do not snapshot afterwards");
  app.add_option("-c,--command", line, "A shell command line (run by /bin/sh -c) instead of CMD...; with "
                 "--session its cd and export carry over");
  app.add_option("command", cmd, "Command and arguments (after --)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (cmd.empty() == line.empty())
    return ReportError(g, Error{"ctl exec: give a command after -- or one command line with -c", 0, ErrorCode::kInvalid});

  json args = {{"network", network}, {"snapshot", !no_snap}};
  if (line.empty()) args["argv"] = cmd;
  else args["command"] = line;
  if (!cwd.empty()) args["cwd"] = cwd;
  if (timeout_s > 0) args["timeout_s"] = timeout_s;
  if (output_cap) args["output_cap"] = output_cap;
  if (memory) args["memory_bytes"] = memory;
  if (pids) args["pids"] = pids;
  if (disk) args["disk_bytes"] = disk;
  if (cpus > 0) args["cpus"] = cpus;
  if (!session.empty()) args["session"] = session;
  std::string out, err;
  control::Client client(g.root);
  auto resp = client.AskDaemon("exec", args, [&](json f) {
    if (!f.is_object()) return true;  // a probe: we still listen
    std::string kind = f.value("frame", "");
    if (kind != "stdout" && kind != "stderr") return true;
    std::string bytes = FrameBytes(f);
    if (g.json) (kind == "stdout" ? out : err) += bytes;
    else WriteFd(kind == "stdout" ? 1 : 2, bytes);
    return true;
  });
  if (!resp) return ReportError(g, resp.error());
  if (!*resp)
    return ReportError(g, Error{snap::layout::Socket(g.root) + ": no daemon is running (start one with `agentenv daemon`)",
                                0, ErrorCode::kNotFound});
  json result = std::move(**resp);
  int sig = result.value("signal", 0);
  int code = sig ? 128 + sig : result["exit_code"].is_number() ? result["exit_code"].get<int>() : kExitFailed;
  if (g.json) {
    // Output that is not UTF-8 cannot be a JSON string: it goes as base64.
    for (auto [name, bytes] : {std::pair{"stdout", &out}, std::pair{"stderr", &err}}) {
      bool tail = false;
      if (Utf8Prefix(*bytes, &tail) == bytes->size()) result[name] = *bytes;
      else result[std::string(name) + "_b64"] = Base64Encode(*bytes);
    }
    ReportOk(g, result, "");
  } else if (result["node"].is_object()) {
    std::fprintf(stderr, "agentenv: node %s: exec: %s\n", result["node"].value("short", "").c_str(),
                 result.value("command", "").c_str());
  }
  if (result.value("timed_out", false) && !g.json) std::fprintf(stderr, "agentenv: timed out; every process was killed\n");
  return code;
}

}  // namespace agentenv::cli
