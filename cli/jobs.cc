// spawn, ps and kill; the job table; the request parsing shared with exec
// (cli/exec_op.cc); the op specs of all four.
#include "cli/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/exec_session.h"
#include "cli/job_table.h"
#include "common/unique_fd.h"
#include "snap/fsops.h"

namespace agentenv::cli {

Result<nlohmann::json> ExecOp(snap::Repo& repo, const nlohmann::json& args, const OpFrameSink& emit);  // exec_op.cc

namespace {

using json = nlohmann::json;

// How many ended spawn jobs ps keeps showing.
constexpr size_t kKeepEnded = 64;

Result<std::string> StrArg(const json& args, const char* key, const std::string& def) {
  if (!args.contains(key)) return def;
  if (!args[key].is_string()) return Fail(ErrorCode::kInvalid, std::string("argument '") + key + "' must be a string");
  return args[key].get<std::string>();
}

Result<double> NumArg(const json& args, const char* key, double def) {
  if (!args.contains(key)) return def;
  if (!args[key].is_number() || args[key].get<double>() < 0)
    return Fail(ErrorCode::kInvalid, std::string("argument '") + key + "' must be a non-negative number");
  return args[key].get<double>();
}

Result<uint64_t> UIntArg(const json& args, const char* key, uint64_t def) {
  if (!args.contains(key)) return def;
  if (!args[key].is_number_unsigned())
    return Fail(ErrorCode::kInvalid, std::string("argument '") + key + "' must be a non-negative integer");
  return args[key].get<uint64_t>();
}

json JobJson(Job& j) {
  std::lock_guard lock(j.mu);
  j.PollLocked();
  json o = {{"job", j.id}, {"kind", j.kind}, {"command", j.command}, {"started", FormatTime(j.started_ns)},
            {"running", !j.status.has_value()}};
  if (!j.log.empty()) o["log"] = j.log;
  if (j.status) {
    o["exit_code"] = j.status->signal ? json(nullptr) : json(j.status->exit_code);
    o["signal"] = j.status->signal;
    o["killed"] = j.killed;
  }
  json procs = json::array();
  if (j.env && !j.status) {
    if (auto ps = j.env->Processes()) {
      for (const auto& p : *ps) {
        if (p.ns_pid == 1) continue;  // the env's own init
        procs.push_back({{"pid", p.pid}, {"ns_pid", p.ns_pid}, {"ppid", p.ppid}, {"cmdline", p.cmdline}});
      }
    }
  }
  o["processes"] = procs;
  return o;
}

Result<json> SpawnOp(snap::Repo& repo, const json& args, const OpFrameSink&) {
  AE_ASSIGN(RunRequest req, ParseRunRequest(repo, args, false, false));
  uint64_t id = Jobs().NextId();
  std::string dir = repo.root() + "/jobs";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(dir, errno);
  std::string log = dir + "/" + std::to_string(id) + ".log";
  UniqueFd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out) return FailErrno(log, errno);
  UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!in) return FailErrno("/dev/null", errno);
  AE_ASSIGN(runner::Env env, runner::Env::Start(req.spec, {in.get(), out.get(), out.get()}));
  pid_t pid = env.pid();
  auto job = Jobs().Add(id, "spawn", req.line, std::move(env), log);
  return json{{"job", job->id}, {"pid", pid}, {"log", log}};
}

Result<json> PsOp(snap::Repo&, const json&, const OpFrameSink&) {
  json arr = json::array();
  for (const auto& j : Jobs().List()) arr.push_back(JobJson(*j));
  return json{{"jobs", arr}};
}

Result<json> KillOp(snap::Repo&, const json& args, const OpFrameSink&) {
  bool all = args.contains("all") && args["all"].is_boolean() && args["all"].get<bool>();
  if (!all && !args.contains("job")) return Fail(ErrorCode::kInvalid, "kill: give job=<id> (see ps) or all=true");
  AE_ASSIGN(uint64_t want, UIntArg(args, "job", 0));
  json killed = json::array();
  bool found = false;
  for (const auto& j : Jobs().List()) {
    if (!all && j->id != want) continue;
    found = true;
    std::lock_guard lock(j->mu);
    j->PollLocked();
    if (j->status) continue;
    j->KillLocked();
    killed.push_back(j->id);
  }
  if (!all && !found) return Fail(ErrorCode::kNotFound, "kill: no job " + std::to_string(want) + " (see ps)");
  return json{{"killed", killed}};
}

json Obj(std::initializer_list<std::pair<const std::string, json>> props) {
  json j = {{"type", "object"}, {"properties", json::object()}};
  for (const auto& [k, v] : props) j["properties"][k] = v;
  return j;
}

json RunProps(bool is_exec) {
  json p = Obj({
      {"command", {{"type", "string"}, {"description", "Shell command line, run by /bin/sh -c (or give argv)"}}},
      {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", "Program and arguments, no shell"}}},
      {"cwd", {{"type", "string"}, {"description", "Working directory inside (default /, or the session's)"}}},
      {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}, {"description", "Extra environment variables"}}},
      {"network", {{"type", "string"}, {"enum", {"allow", "deny"}}, {"description", "deny: loopback only"}}},
      {"memory_bytes", {{"type", "integer"}, {"description", "Memory limit; fails plainly where it cannot be enforced"}}},
      {"pids", {{"type", "integer"}, {"description", "Limit on processes/threads at once"}}},
      {"cpus", {{"type", "number"}, {"description", "CPU time per wall second (0.5 = half a core)"}}},
  });
  if (is_exec) {
    p["properties"]["timeout_s"] = {{"type", "number"}, {"description", "Kill every process of the command after this many seconds (MCP default 300)"}};
    p["properties"]["output_cap"] = {{"type", "integer"}, {"description", "Bytes kept per stream (MCP default 65536); the rest is counted, not kept"}};
    p["properties"]["session"] = {{"type", "string"}, {"description", "Session name: cwd and exported variables carry over between calls with the same name"}};
    p["properties"]["snapshot"] = {{"type", "boolean"}, {"description", "Snapshot afterwards (default true)"}};
  }
  return p;
}

}  // namespace

void Job::PollLocked() {
  if (status || !env) return;
  auto st = env->TryWait();
  if (!st) {
    status = runner::ExitStatus{1, 0, false};
  } else if (*st) {
    status = **st;
  } else {
    return;
  }
  env.reset();  // removes its cgroups
}

void Job::KillLocked() {
  if (status || !env) return;
  env->KillAll();
  auto st = env->Wait();
  status = st ? *st : runner::ExitStatus{-1, SIGKILL, false};
  killed = true;
  env.reset();
}

std::shared_ptr<Job> JobTable::Add(uint64_t id, std::string kind, std::string command, runner::Env env,
                                   std::string log) {
  auto j = std::make_shared<Job>();
  j->id = id;
  j->kind = std::move(kind);
  j->command = std::move(command);
  j->started_ns = snap::NowNs();
  j->log = std::move(log);
  j->env.emplace(std::move(env));
  std::lock_guard lock(mu_);
  jobs_[id] = j;
  // Forget the oldest ended jobs beyond kKeepEnded (newest first here).
  std::vector<uint64_t> ended;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    std::lock_guard jl(it->second->mu);
    if (it->second->status) ended.push_back(it->first);
  }
  for (size_t i = kKeepEnded; i < ended.size(); ++i) jobs_.erase(ended[i]);
  return j;
}

uint64_t JobTable::NextId() {
  std::lock_guard lock(mu_);
  return next_++;
}

void JobTable::Remove(uint64_t id) {
  std::lock_guard lock(mu_);
  jobs_.erase(id);
}

std::vector<std::shared_ptr<Job>> JobTable::List() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Job>> v;
  for (const auto& [id, j] : jobs_) v.push_back(j);
  return v;
}

JobTable& Jobs() {
  static JobTable table;
  return table;
}

void EnsureRunDir(const std::string& work_dir) {
  struct stat root_st;
  if (::stat(work_dir.c_str(), &root_st) == 0 && ::mkdir((work_dir + "/run").c_str(), 0755) == 0) {
    struct timespec ts[2] = {root_st.st_atim, root_st.st_mtim};
    ::utimensat(AT_FDCWD, work_dir.c_str(), ts, 0);
  }
}

Result<RunRequest> ParseRunRequest(snap::Repo& repo, const json& args, bool is_exec, bool collect) {
  RunRequest req;
  runner::EnvSpec& s = req.spec;
  s.root = repo.work_dir();
  AE_ASSIGN(std::string command, StrArg(args, "command", ""));
  std::vector<std::string> argv;
  if (args.contains("argv")) {
    if (!args["argv"].is_array()) return Fail(ErrorCode::kInvalid, "argument 'argv' must be an array of strings");
    for (const auto& a : args["argv"]) {
      if (!a.is_string()) return Fail(ErrorCode::kInvalid, "argument 'argv' must be an array of strings");
      argv.push_back(a.get<std::string>());
    }
  }
  if (command.empty() == argv.empty())
    return Fail(ErrorCode::kInvalid, "give exactly one of 'command' (a shell command line) or 'argv' (an array)");
  for (const auto& a : argv) req.line += (req.line.empty() ? "" : " ") + a;
  if (!command.empty()) req.line = command;
  s.argv = argv.empty() ? std::vector<std::string>{"/bin/sh", "-c", command} : argv;
  AE_ASSIGN(s.cwd, StrArg(args, "cwd", "/"));
  if (args.contains("env")) {
    if (!args["env"].is_object()) return Fail(ErrorCode::kInvalid, "argument 'env' must be an object of strings");
    for (const auto& [k, v] : args["env"].items()) {
      if (!v.is_string() || k.empty() || k.find('=') != std::string::npos)
        return Fail(ErrorCode::kInvalid, "argument 'env': '" + k + "' must be a name with a string value");
      s.set_env.push_back(k + "=" + v.get<std::string>());
    }
  }
  AE_ASSIGN(std::string network, StrArg(args, "network", "allow"));
  if (network != "allow" && network != "deny") return Fail(ErrorCode::kInvalid, "argument 'network' must be allow or deny");
  s.network = network == "deny" ? runner::Network::kDeny : runner::Network::kAllow;
  AE_ASSIGN(double timeout_s, NumArg(args, "timeout_s", collect ? 300 : 0));
  s.limits.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  AE_ASSIGN(s.limits.output_cap, UIntArg(args, "output_cap", collect ? 65536 : 0));
  AE_ASSIGN(s.limits.memory_bytes, UIntArg(args, "memory_bytes", 0));
  AE_ASSIGN(s.limits.pids, UIntArg(args, "pids", 0));
  AE_ASSIGN(s.limits.cpus, NumArg(args, "cpus", 0));
  if (args.contains("snapshot")) {
    if (!args["snapshot"].is_boolean()) return Fail(ErrorCode::kInvalid, "argument 'snapshot' must be a boolean");
    req.snapshot = args["snapshot"].get<bool>();
  }
  AE_ASSIGN(req.session, StrArg(args, "session", ""));
  if (!req.session.empty()) {
    if (!is_exec) return Fail(ErrorCode::kInvalid, "argument 'session' is for exec only");
    AE_ASSIGN(req.session_dir, SessionDir(repo.root(), req.session));
    // An explicit cwd moves the session there.
    WrapInSession(req.session_dir, command, argv, args.contains("cwd") ? s.cwd : "", &s);
    EnsureRunDir(repo.work_dir());
  }
  return req;
}

const std::vector<JobOp>& JobOps() {
  static const std::vector<JobOp> ops = {
      {{"exec",
        "Run a command inside this environment and wait for it. Returns exit_code (null if killed by a signal), "
        "signal, timed_out, stdout and stderr (each capped at output_cap bytes; *_truncated says so) and the node "
        "that snapshots the filesystem afterwards, labelled with the command, so `rollback` can undo exactly this "
        "command. Use session=<name> to keep the working directory and exported variables between calls (like one "
        "terminal). If the result is an error, the command did not run, or may have run only partly: check with "
        "`status` or `diff` before retrying.",
        RunProps(true),
        Obj({{"exit_code", {{"type", {"integer", "null"}}}}, {"signal", {{"type", "integer"}}},
             {"timed_out", {{"type", "boolean"}}}, {"oom_killed", {{"type", "boolean"}}},
             {"stdout", {{"type", "string"}}}, {"stderr", {{"type", "string"}}},
             {"stdout_truncated", {{"type", "boolean"}}}, {"stderr_truncated", {{"type", "boolean"}}},
             {"stdout_bytes", {{"type", "integer"}}}, {"stderr_bytes", {{"type", "integer"}}},
             {"duration_ms", {{"type", "integer"}}}, {"job", {{"type", "integer"}}}, {"command", {{"type", "string"}}},
             {"killed", {{"type", "boolean"}}},
             {"node", {{"type", {"object", "null"}}, {"description", "The snapshot after the command; null if nothing changed"}}},
             {"session", {{"type", {"object", "null"}}, {"description", "id, cwd, env after the command"}}}}),
        true},
       ExecOp},
      {{"spawn",
        "Start a command in the background inside this environment (a server, a watcher) and return at once with "
        "its job id. Its output goes to a log file on the host (`log`); use `ps` to see whether it still runs and "
        "`kill` to stop it. Its file changes are captured automatically while the daemon runs.",
        RunProps(false), Obj({{"job", {{"type", "integer"}}}, {"pid", {{"type", "integer"}}}, {"log", {{"type", "string"}}}}),
        true},
       SpawnOp},
      {{"ps", "List the jobs started by exec and spawn: running or not, exit status, and the processes of each.",
        Obj({}), Obj({{"jobs", {{"type", "array"}}}})},
       PsOp},
      {{"kill",
        "Stop a job (job=<id> from ps) or every job (all=true): every process of its environment is killed at once.",
        Obj({{"job", {{"type", "integer"}}}, {"all", {{"type", "boolean"}}}}), Obj({{"killed", {{"type", "array"}}}}),
        true},
       KillOp},
  };
  return ops;
}

}  // namespace agentenv::cli
