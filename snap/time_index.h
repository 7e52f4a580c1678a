// snap/time_index: the metadata index's time index (tables `time`,
// `timeline` and `lanes` of snap/meta.h; byte layout in
// docs/meta-format.md). Every node by (time, seq), with the timeline's lane
// it was drawn in, and the sums of the nodes of time buckets at 11 widths
// (2^33 ns, about 8.6 s, times 8 per level up to 2^63), kept by
// MetaDb::Txn::PutNode and DeleteNode in the transaction that changes the
// node. So a time ref, a span of history and a timeline of any range read
// what they return (a few bucket rows per level and the nodes at the
// range's edges), never the history.
//
// Lanes: a node continues its parent's lane when the parent is that lane's
// newest node, else takes the lowest lane (from 1) whose newest node is
// older than the parent, else a new one; the first root takes lane 0.
// Lanes are fixed when a node is added: a restore does not redraw them.
//
// Thread-safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "store/store.h"

namespace agentenv::snap {

// A node as the time index holds it.
struct TimeRow {
  int64_t time_ns = 0;
  uint64_t seq = 0;
  store::ObjectId id;
  uint32_t lane = 0;
  uint64_t changes = 0;  // NodeRecord::changes
  uint64_t thinned = 0;  // nodes retention dropped below it (Provenance::thinned)
};

// The nodes of a time range, summed.
struct TimeSum {
  static constexpr uint32_t kLaneSlots = 32;  // lanes from 31 on are counted in slot 31
  uint64_t nodes = 0, changes = 0, thinned = 0;
  std::array<uint64_t, kLaneSlots> lanes{};  // nodes per lane slot
  // Bit l set when a node of lane slot l is in the range.
  uint32_t LaneMask() const {
    uint32_t m = 0;
    for (uint32_t l = 0; l < kLaneSlots; ++l)
      if (lanes[l]) m |= uint32_t{1} << l;
    return m;
  }
  void Add(const TimeSum& o) {
    nodes += o.nodes, changes += o.changes, thinned += o.thinned;
    for (uint32_t l = 0; l < kLaneSlots; ++l) lanes[l] += o.lanes[l];
  }
  void AddRow(const TimeRow& r) {
    ++nodes, changes += r.changes, thinned += r.thinned;
    ++lanes[r.lane < kLaneSlots ? r.lane : kLaneSlots - 1];
  }
};

// One bucket of a timeline: the nodes with t0 <= time < t1.
struct TimeBucket {
  int64_t t0 = 0, t1 = 0;
  TimeSum sum;
  TimeRow first, last;  // its oldest and newest node
};

// The summary's widths: level l's buckets are 2^(kTimeShift0 + 3 l) ns.
inline constexpr unsigned kTimeShift0 = 33, kTimeLevels = 11;

}  // namespace agentenv::snap
