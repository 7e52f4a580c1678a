// Mutexes that Clang's -Wthread-safety can check (scripts/thread_safety.sh).
// libstdc++'s std::mutex carries no capability attributes, so shared state
// is guarded by these thin wrappers instead: a member declared
// `T x GUARDED_BY(mu_);` read or written without `mu_` held, or a function
// declared REQUIRES(mu_) called without it, fails that check. With GCC the
// attributes expand to nothing. Thread-safety: as std::mutex.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define AE_THREAD_ATTR(x) __attribute__((x))
#else
#define AE_THREAD_ATTR(x)
#endif

#define CAPABILITY(x) AE_THREAD_ATTR(capability(x))
#define SCOPED_CAPABILITY AE_THREAD_ATTR(scoped_lockable)
#define GUARDED_BY(x) AE_THREAD_ATTR(guarded_by(x))
#define PT_GUARDED_BY(x) AE_THREAD_ATTR(pt_guarded_by(x))
#define REQUIRES(...) AE_THREAD_ATTR(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) AE_THREAD_ATTR(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) AE_THREAD_ATTR(acquire_capability(__VA_ARGS__))
#define RELEASE(...) AE_THREAD_ATTR(release_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS AE_THREAD_ATTR(no_thread_safety_analysis)

namespace agentenv {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }

 private:
  std::mutex m_;
};

// Holds a Mutex for its scope. Also BasicLockable, so a
// std::condition_variable_any waits on it (the wait releases and retakes
// the mutex inside; the analysis sees it held throughout, which is what
// the code after the wait may assume).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& m) ACQUIRE(m) : m_(m) { m_.lock(); }
  ~MutexLock() RELEASE() { m_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  // For std::condition_variable_any only.
  void lock() NO_THREAD_SAFETY_ANALYSIS { m_.lock(); }
  void unlock() NO_THREAD_SAFETY_ANALYSIS { m_.unlock(); }

 private:
  Mutex& m_;
};

using CondVar = std::condition_variable_any;

}  // namespace agentenv
