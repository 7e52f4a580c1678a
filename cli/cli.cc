#include "cli/cli.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

namespace agentenv::cli {
namespace {

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
  }
  return "io";
}

namespace {

int ExitFor(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalid: return kExitUsage;
    case ErrorCode::kNotFound: return kExitNotFound;
    case ErrorCode::kCorrupt: return kExitCorrupt;
    case ErrorCode::kBusy: return kExitBusy;
    case ErrorCode::kExists: return kExitExists;
    case ErrorCode::kIo:
    case ErrorCode::kUnsupported: return kExitFailed;
  }
  return kExitFailed;
}

}  // namespace

void AddGlobals(CLI::App& app, Globals& g) {
  const char* env = std::getenv("AGENTENV_ROOT");
  g.root = env && *env ? env : "/agentfs";
  app.add_option("--root", g.root, "Repository root (default: $AGENTENV_ROOT or /agentfs)");
  app.add_flag("--json", g.json, "Print one JSON object on stdout");
}

int Parse(CLI::App& app, int argc, char** argv, const Globals& g) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    Error err{app.get_name() + ": " + e.what() + " (see --help)", 0, ErrorCode::kInvalid};
    return ReportError(g, err);
  }
  return -1;
}

int ReportError(const Globals& g, const Error& e) {
  if (g.json) {
    nlohmann::json j = {{"ok", false},
                        {"error", {{"code", ErrorCodeName(e.code)}, {"message", e.message}}}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    std::cerr << "agentenv: " << e.message << '\n';
  }
  return ExitFor(e.code);
}

int ReportOk(const Globals& g, nlohmann::json j, std::string_view text) {
  if (g.json) {
    j["ok"] = true;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else if (!text.empty()) {
    std::cout << text;
    if (text.back() != '\n') std::cout << '\n';
  }
  return kExitOk;
}

std::string HumanBytes(uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string FormatTime(int64_t ns) {
  time_t t = time_t(ns / 1000000000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

Result<std::unique_ptr<snap::Repo>> OpenRepo(const Globals& g) {
  AE_ASSIGN(auto repo, snap::Repo::Open(g.root));
  AE_ASSIGN(snap::PathFilter ignored, LoadIgnoreRules(g.root));
  repo->set_ignored(std::move(ignored));
  return repo;
}

std::string Short(const store::ObjectId& id) { return id.Hex().substr(0, 12); }

nlohmann::json ChangeJson(const snap::Change& c) {
  return {{"op", std::string(1, c.op)}, {"path", c.path}, {"dir", c.is_dir}};
}

nlohmann::json NodeJson(const snap::NodeRecord& r) {
  nlohmann::json j = {{"id", r.id.Hex()},      {"short", Short(r.id)},  {"seq", r.seq},
                      {"time", FormatTime(r.time_ns)}, {"time_ns", r.time_ns},
                      {"title", r.title},      {"changes", r.changes}};
  j["parent"] = r.parent ? nlohmann::json(r.parent->Hex()) : nlohmann::json(nullptr);
  j["damaged"] = r.damaged();
  if (r.damaged()) j["damage"] = r.damage;
  return j;
}

std::string NodeLine(const snap::NodeRecord& r) {
  return Short(r.id) + "  " + FormatTime(r.time_ns) + "  " + (r.damaged() ? "[damaged] " : "") + r.title;
}

}  // namespace agentenv::cli
