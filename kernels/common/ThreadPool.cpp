//===- ThreadPool.cpp -----------------------------------------------------------===//
#include "kernels/common/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <system_error>

#include <sched.h>

namespace helm::kernels {
namespace {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Polls `ready` for up to ThreadPool::kSpinMicros; true if it became true meanwhile.
template <typename Ready> bool spinUntil(Ready ready) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready())
        return true;
      cpuRelax();
    }
    if (std::chrono::steady_clock::now() - start >
        std::chrono::microseconds(ThreadPool::kSpinMicros))
      return ready();
  }
}

} // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) {
    try {
      workers_.emplace_back([this, i] { workerLoop(i); });
    } catch (const std::system_error &) {
      break; // the system refuses more threads: run with those that started
    }
  }
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto &w : workers_)
    w.join();
}

void ThreadPool::workerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    if (!spinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      // Announce the sleep before re-checking (inside wait): parallelFor bumps the generation and
      // then reads sleepingWorkers_, both seq_cst, so one of the two sides sees the other.
      sleepingWorkers_.fetch_add(1, std::memory_order_seq_cst);
      generation_.wait(seen, std::memory_order_seq_cst);
      sleepingWorkers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_)
      return;
    int64_t begin = std::min(n_, index * chunk_);
    int64_t end = std::min(n_, begin + chunk_);
    if (begin < end)
      (*body_)(begin, end);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        callerSleeping_.load(std::memory_order_seq_cst))
      pending_.notify_one();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  int threads = this->threads();
  grain = std::max<int64_t>(1, grain);
  if (threads == 1 || n <= grain) {
    body(0, n);
    return;
  }
  int64_t chunk = (n + threads - 1) / threads;
  chunk = (chunk + grain - 1) / grain * grain;
  body_ = &body;
  n_ = n;
  chunk_ = chunk;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepingWorkers_.load(std::memory_order_seq_cst) > 0)
    generation_.notify_all();
  body(0, std::min(n, chunk));
  if (!spinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    callerSleeping_.store(true, std::memory_order_seq_cst);
    for (int left; (left = pending_.load(std::memory_order_seq_cst)) != 0;)
      pending_.wait(left, std::memory_order_seq_cst);
    callerSleeping_.store(false, std::memory_order_relaxed);
  }
}

namespace {
std::unique_ptr<ThreadPool> &globalPool() {
  static std::unique_ptr<ThreadPool> p = std::make_unique<ThreadPool>(1);
  return p;
}
} // namespace

int availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    if (int n = CPU_COUNT(&set); n > 0)
      return n;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool &pool() { return *globalPool(); }
void setThreads(int threads) { globalPool() = std::make_unique<ThreadPool>(threads); }

} // namespace helm::kernels
