//===- ThreadPool.h - the persistent worker pool kernels share -------------------===//
#ifndef HELM_KERNELS_CPU_THREADPOOL_H
#define HELM_KERNELS_CPU_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace helm::kernels {

/// Workers are created once (setThreads) and reused by every call: no thread creation per kernel.
class ThreadPool {
public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int threads() const { return int(workers_.size()) + 1; }
  /// Runs body(begin, end) over [0, n) split into one contiguous chunk per thread (multiples of
  /// `grain`); the caller's thread takes the first chunk. Returns when all chunks are done.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &body);

private:
  void workerLoop(int index);
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

/// The process-wide pool (1 thread until setThreads is called).
ThreadPool &pool();
void setThreads(int threads);

} // namespace helm::kernels

#endif
