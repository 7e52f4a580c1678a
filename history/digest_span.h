// history/digest_span: the span of history a digest covers, read from the
// records' provenance and the operation log (never from titles), and
// sorted into what a reader asks about: HEAD's line, the work a rollback
// undid, forks, tournaments and failed commands. Internal to history/
// (digest.cc renders it).
//
// Lines: a node is a tournament candidate (its provenance says so), else
// a fork's node (made in a workspace), else on HEAD's line (HEAD or one of
// its ancestors), else undone: live work a restore left behind. Nodes of
// an older binary (no provenance) count by the graph alone.
//
// Thread-safety: plain values; ReadSpan reads the repository as any
// reader does (safe beside writers).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "snap/oplog.h"
#include "snap/repo.h"

namespace agentenv::history::digest_span {

enum class Line { kHead, kUndone, kFork, kCandidate };

struct SpanNode {
  snap::NodeRecord rec;
  Line line = Line::kHead;
  std::string command;  // as typed (snap::CommandText); empty: none
  std::string outcome;  // "exit 1", "timed out" (snap::OutcomeText); empty: fine
  bool failed = false;
  std::string message;  // the user's, if any
  std::vector<std::string> dirs;  // directories of its sampled changes, caches and lock files left out
  uint64_t noise = 0;             // sampled changes in caches and lock files
};

// A move of HEAD from the operation log.
struct Move {
  int64_t time_ns = 0;
  snap::OpKind kind = snap::OpKind::kUnknown;
  std::optional<store::ObjectId> from;
  store::ObjectId to;
  bool rollback = false;  // `to` is older than where HEAD was: work was undone
  std::vector<size_t> undone;  // span nodes it left behind, oldest first
};

struct Candidate {
  uint32_t index = 0;  // from 0
  size_t node = 0;     // span node
  std::optional<int32_t> test_exit_code;
  bool won = false;
};
struct Tournament {
  std::string id;
  int64_t time_ns = 0;
  uint32_t count = 0;
  std::vector<Candidate> candidates;  // by index
  bool applied = false;  // its winner was restored onto the live tree
};

struct Fork {
  std::string workspace;
  std::optional<store::ObjectId> base;
  std::vector<size_t> nodes;  // oldest first
};

struct Span {
  std::vector<SpanNode> nodes;  // oldest first
  std::vector<Move> moves;      // oldest first
  std::vector<Tournament> tournaments;
  std::vector<Fork> forks;
  std::optional<store::ObjectId> head;
  // Directories were read from every capture_stride-th automatic capture
  // (1: from every node).
  size_t capture_stride = 1;
  size_t Rollbacks() const;
};

// Whether a changed path is noise a reader does not want named: package
// manager caches, build caches and lock files.
bool Noise(std::string_view path);

// The nodes made in [since_ns, until_ns] (those `keep` keeps, when given)
// and the moves of HEAD then. Errors: the repository's (a node object that
// cannot be read only loses that node's sample and message).
Result<Span> ReadSpan(snap::Repo& repo, int64_t since_ns, int64_t until_ns,
                      const std::function<bool(const snap::NodeRecord&)>& keep = {});

}  // namespace agentenv::history::digest_span
