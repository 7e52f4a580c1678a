// history/digest: a span of history (by default the last day) in one page
// for a model: phases of activity, each with its time span, node count,
// the package deltas and commands of HEAD's line, directories touched,
// failed commands with how they ended, rollbacks with what they undid,
// tournaments with every candidate and the winner, and forks by name,
// held to a token budget (characters / 4).
//
// Read from node records (provenance, parents, package deltas), node
// objects (the change sample of each) and the operation log, never from
// titles or trees (history/digest_span.h sorts the span into HEAD's line,
// undone work, forks and tournament candidates).
//
// A first node (no parent) "installs" every package of its tree: those
// are counted, not listed. Phases split where no node was made for
// kPhaseGap; past kMaxPhases the closest neighbours merge. Every package
// delta of HEAD's line is named (dependencies by name, versions of the
// asked-for ones); caches and lock files are not named as directories;
// commands are whole up to 400 bytes. Detail (dirs, commands, messages,
// command length) shrinks first when the page would be over budget.
#pragma once

#include <cstdint>
#include <functional>

#include "history/node_view.h"
#include "snap/repo.h"

namespace agentenv::history {

// log --digest : a span of history in one page.
struct DigestRequest {
  std::string since;  // "2 hours ago", "2025-03-12 08:00"; empty: a day before the newest node
  std::string until;  // empty: now
  uint64_t max_tokens = 2000;  // budget of the text, counted as characters / 4
  template <class V> void Fields(V& v) {
    v("since", since, kOmitEmpty); v("until", until, kOmitEmpty); v("max_tokens", max_tokens);
  }
};
struct DigestPhase {
  std::string start, end;  // local times
  uint64_t nodes = 0, changes = 0;
  std::vector<PackageInfo> packages;  // live-line nodes' deltas, in order
  std::vector<std::string> dirs, commands, failures, rollbacks, tournaments, forks, tags;
  template <class V> void Fields(V& v) {
    v("start", start); v("end", end); v("nodes", nodes); v("changes", changes);
    v("packages", packages, kOmitEmpty); v("dirs", dirs, kOmitEmpty); v("commands", commands, kOmitEmpty);
    v("failures", failures, kOmitEmpty); v("rollbacks", rollbacks, kOmitEmpty);
    v("tournaments", tournaments, kOmitEmpty); v("forks", forks, kOmitEmpty); v("tags", tags, kOmitEmpty);
  }
};
struct DigestReply {
  std::string text;  // the page
  std::string since, until;
  uint64_t nodes = 0;
  uint64_t tokens = 0;  // text.size() / 4, rounded up
  std::vector<DigestPhase> phases;
  template <class V> void Fields(V& v) {
    v("text", text); v("since", since); v("until", until); v("nodes", nodes); v("tokens", tokens);
    v("phases", phases);
  }
};


inline constexpr int64_t kPhaseGap = int64_t{20} * 60 * 1000000000;
inline constexpr size_t kMaxPhases = 12;

// The digest of the nodes made between r.since and r.until (ParseWhen
// syntax, snap/repo.h, relative to `now_ns`; since defaults to a day
// before the newest node). Reads the span's records through the time
// index (built first, once, in a repository an older binary wrote to) and
// their node objects: memory and time follow the span, not the history.
// Thread-safe with writers. Errors: kInvalid for a time it cannot read; the
// repository's (corrupt records, lost node objects are skipped).
// With `keep`, only the nodes it keeps are counted and named (a scoped
// caller's environment, control/confine.h).
Result<DigestReply> Digest(snap::Repo& repo, const DigestRequest& r, int64_t now_ns,
                           const std::function<bool(const snap::NodeRecord&)>& keep = {});

}  // namespace agentenv::history
