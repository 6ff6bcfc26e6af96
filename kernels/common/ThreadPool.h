//===- ThreadPool.h - the persistent worker pool kernels share -------------------===//
#ifndef HELM_KERNELS_COMMON_THREADPOOL_H
#define HELM_KERNELS_COMMON_THREADPOOL_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace helm::kernels {

/// Workers are created once (setThreads) and reused by every call: no thread creation per kernel.
///
/// A decode step makes a few hundred parallel calls of 20-200 us each, with a few microseconds of
/// single-threaded glue between them, so the hand-off itself must cost well under a microsecond:
/// an idle worker spins on the call counter for a while (kSpinMicros) before it sleeps on a futex
/// (std::atomic::wait), and the caller only makes the wake-up system call when a worker sleeps.
class ThreadPool {
public:
  explicit ThreadPool(int threads);
  ~ThreadPool();

  int threads() const { return int(workers_.size()) + 1; }

  /// Runs body(begin, end) over [0, n) split into one contiguous chunk per thread (multiples of
  /// `grain`); the caller's thread takes the first chunk. Returns when all chunks are done.
  /// Not reentrant: one call at a time, from one thread.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &body);

  /// How long an idle thread polls before it sleeps. Long enough to bridge the glue between two
  /// kernels of a decode step; short enough that an idle runtime does not hold cores.
  static constexpr int64_t kSpinMicros = 200;

private:
  void workerLoop(int index);

  std::vector<std::thread> workers_;
  // Published by parallelFor before it bumps generation_ (release), read by workers after they
  // see the new generation (acquire).
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  bool stop_ = false;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleepingWorkers_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> callerSleeping_{false};
};

/// CPU cores this process may run on (its affinity mask), else what the C++ library reports.
int availableCores();

/// The process-wide pool (1 thread until setThreads is called).
ThreadPool &pool();
void setThreads(int threads);

} // namespace helm::kernels

#endif
