#include "run/session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include "common/read_all.h"
#include "common/unique_fd.h"
#include "snap/layout.h"

namespace agentenv::run {
namespace {

// Runs first in every session command, then `eval "$1"` (a command line)
// or `"$@"` (an argv). The trap saves cwd and exports whenever this
// shell exits; `exit N` in the command keeps N.
std::string Prelude() {
  const std::string d = kSessionDir;
  return "if [ -f " + d + "/env ]; then . " + d + "/env; fi\n"
         "cd -- \"$AGENTENV_SESSION_CWD\" 2>/dev/null || { echo \"agentenv: session directory $AGENTENV_SESSION_CWD "
         "is gone; running in /\" >&2; cd /; }\n"
         "unset AGENTENV_SESSION_CWD\n"
         "trap 'AGENTENV_RC=$?; pwd > " + d + "/cwd 2>/dev/null; export -p > " + d + "/env 2>/dev/null; "
         "exit $AGENTENV_RC' EXIT\n";
}

// A small file of the session, not following symlinks (the env can write
// there). Missing: "".
Result<std::string> ReadSmall(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) return std::string();
    return FailErrno(path, errno);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return FailErrno(path, errno);
  if (!S_ISREG(st.st_mode)) return Fail(ErrorCode::kInvalid, path + ": not a regular file");
  constexpr size_t kMax = 4u << 20;
  AE_ASSIGN(std::string out, ReadUpTo(fd.get(), path, kMax + 1));
  if (out.size() > kMax) return Fail(ErrorCode::kInvalid, path + ": larger than 4 MiB");
  return out;
}

}  // namespace

Result<std::string> SessionDir(const std::string& root, const std::string& id) {
  AE_TRY(CheckSessionId(id));
  std::string jobs = snap::layout::Jobs(root);
  if (::mkdir(jobs.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(jobs, errno);
  std::string dir = jobs + "/session-" + id;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(dir, errno);
  return dir;
}

void WrapInSession(const std::string& session_dir, const std::string& command,
                   const std::vector<std::string>& argv, const std::string& cwd_arg, runner::EnvSpec* spec) {
  auto state = LoadSession(session_dir);
  std::string cwd = !cwd_arg.empty() ? cwd_arg : state ? state->cwd : "/";
  std::vector<std::string> wrapped = {"/bin/sh", "-c"};
  if (!command.empty()) {
    wrapped.push_back(Prelude() + "eval \"$1\"\n");
    wrapped.push_back("sh");
    wrapped.push_back(command);
  } else {
    wrapped.push_back(Prelude() + "\"$@\"\n");
    wrapped.push_back("sh");
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  }
  spec->argv = std::move(wrapped);
  spec->cwd = "/";
  spec->set_env.push_back("AGENTENV_SESSION_CWD=" + cwd);
  spec->binds.push_back({session_dir, kSessionDir, false});
}

Result<SessionState> LoadSession(const std::string& session_dir) {
  SessionState s;
  AE_ASSIGN(std::string cwd, ReadSmall(session_dir + "/cwd"));
  while (!cwd.empty() && cwd.back() == '\n') cwd.pop_back();
  if (!cwd.empty() && cwd[0] == '/') s.cwd = cwd;
  AE_ASSIGN(std::string env, ReadSmall(session_dir + "/env"));
  s.env = ParseExports(env);
  return s;
}

std::map<std::string, std::string> ParseExports(const std::string& text) {
  std::map<std::string, std::string> vars;
  size_t i = 0;
  auto skip_blank = [&] { while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i; };
  while (i < text.size()) {
    skip_blank();
    // "export NAME=..." (dash, busybox) or "declare -x NAME=..." (bash).
    for (const char* kw : {"export ", "declare -x "}) {
      std::string k = kw;
      if (text.compare(i, k.size(), k) == 0) i += k.size();
    }
    skip_blank();
    size_t name_start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
    std::string name = text.substr(name_start, i - name_start);
    bool has_value = i < text.size() && text[i] == '=';
    std::string value;
    if (has_value) {
      ++i;
      while (i < text.size() && text[i] != '\n' && text[i] != ' ') {
        char c = text[i];
        if (c == '\'') {
          size_t end = text.find('\'', i + 1);
          if (end == std::string::npos) end = text.size();
          value += text.substr(i + 1, end - i - 1);
          i = end + 1;
        } else if (c == '"') {
          for (++i; i < text.size() && text[i] != '"'; ++i) {
            if (text[i] == '\\' && i + 1 < text.size()) ++i;
            value += text[i];
          }
          ++i;
        } else if (c == '\\' && i + 1 < text.size()) {
          value += text[i + 1];
          i += 2;
        } else {
          value += c;
          ++i;
        }
      }
    }
    if (!name.empty() && has_value) vars[name] = value;
    while (i < text.size() && text[i] != '\n') ++i;
    ++i;
  }
  return vars;
}

}  // namespace agentenv::run
