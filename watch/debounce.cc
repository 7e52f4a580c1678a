#include "watch/debounce.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <system_error>
#include <utility>

namespace agentenv::watch {

void Debouncer::Add(ChangeSet&& changes, Clock::time_point now) {
  if (changes.empty()) return;
  pending_.Merge(std::move(changes));
  if (!first_) first_ = now;
  last_ = now;
}

std::optional<Clock::time_point> Debouncer::Deadline() const {
  if (!first_) return std::nullopt;
  return std::min(last_ + timing_.quiet, *first_ + timing_.max_delay);
}

bool Debouncer::Due(Clock::time_point now) const {
  auto d = Deadline();
  return d && now >= *d;
}

ChangeSet Debouncer::Take() {
  ChangeSet out = std::move(pending_);
  pending_ = ChangeSet();
  first_.reset();
  out.Compact();
  return out;
}

Result<std::unique_ptr<Watcher>> Watcher::Start(std::string root, WatcherOptions options,
                                                Callback on_changes) {
  AE_ASSIGN(Journal journal, Journal::Open(std::move(root), options.journal));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return FailErrno(journal.root() + ": eventfd", errno);
  std::unique_ptr<Watcher> w(
      new Watcher(std::move(journal), std::move(options), std::move(on_changes), std::move(wake)));
  try {
    w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  } catch (const std::system_error& e) {
    return Fail(w->journal_.root() + ": starting the watch thread: " + e.what(), e.code().value());
  }
  return w;
}

Watcher::Watcher(Journal journal, WatcherOptions options, Callback on_changes, UniqueFd wake)
    : journal_(std::move(journal)),
      options_(std::move(options)),
      on_changes_(std::move(on_changes)),
      debouncer_(options_.timing),
      wake_(std::move(wake)) {
  degraded_ = journal_.degraded();
  watch_count_ = journal_.watch_count();
}

Watcher::~Watcher() { Stop(false); }

void Watcher::Wake() {
  uint64_t one = 1;
  // Fails only when the counter is saturated: the loop is woken anyway.
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void Watcher::Stop(bool deliver_pending) {
  if (deliver_pending) deliver_on_stop_ = true;
  stop_ = true;
  Wake();
  MutexLock lock(join_mu_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Watcher::Flush() {
  MutexLock lock(mu_);
  if (finished_) return;
  uint64_t ticket = ++flush_requested_;
  Wake();
  while (!finished_ && flush_done_ < ticket) flushed_.wait(lock);
}

void Watcher::ReadJournal(Clock::time_point now) {
  ChangeSet changes;
  auto r = journal_.Read(changes);
  if (!r) {
    // Events are lost; say so and let the consumer walk the tree.
    if (options_.journal.on_warning) options_.journal.on_warning(r.error().message);
    changes.rescan_all = true;
  }
  debouncer_.Add(std::move(changes), now);
  degraded_ = journal_.degraded();
  watch_count_ = journal_.watch_count();
}

void Watcher::Deliver() {
  if (debouncer_.pending()) on_changes_(debouncer_.Take());
}

void Watcher::Loop() {
  std::optional<Clock::time_point> next_rescan;
  while (true) {
    Clock::time_point now = Clock::now();
    if (degraded_ && !next_rescan) next_rescan = now + options_.degraded_rescan;
    std::optional<Clock::time_point> deadline = debouncer_.Deadline();
    if (next_rescan && (!deadline || *next_rescan < *deadline)) deadline = next_rescan;
    int timeout = -1;
    if (deadline) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
      timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
    }
    struct pollfd fds[2] = {{journal_.fd(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int ready = ::poll(fds, 2, timeout);
    now = Clock::now();
    if (ready < 0 && errno != EINTR) {
      // Cannot happen with valid descriptors; do not spin if it does.
      if (options_.journal.on_warning)
        options_.journal.on_warning(journal_.root() + ": poll: " + std::strerror(errno));
      break;
    }
    if (ready > 0 && (fds[1].revents & POLLIN)) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_.get(), &count, sizeof count);
    }
    if (ready > 0 && (fds[0].revents & POLLIN)) ReadJournal(now);
    if (next_rescan && now >= *next_rescan) {
      ChangeSet all;
      all.rescan_all = true;
      debouncer_.Add(std::move(all), now);
      next_rescan = now + options_.degraded_rescan;
    }

    uint64_t requested;
    bool flush;
    {
      MutexLock lock(mu_);
      requested = flush_requested_;
      flush = requested > flush_done_;
    }
    bool stop = stop_;  // read once: Stop() may set it any time
    if (stop || flush) ReadJournal(now);  // everything queued before the request
    if (flush || (stop && deliver_on_stop_) || (!stop && debouncer_.Due(now))) Deliver();
    if (flush) {
      MutexLock lock(mu_);
      flush_done_ = requested;
      flushed_.notify_all();
    }
    if (stop) break;
  }
  MutexLock lock(mu_);
  finished_ = true;
  flushed_.notify_all();
}

}  // namespace agentenv::watch
