//===- ThreadPool.cpp -----------------------------------------------------------===//
#include "kernels/cpu/ThreadPool.h"

#include <algorithm>
#include <memory>
#include <system_error>

namespace helm::kernels {

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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto &w : workers_)
    w.join();
}

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)> *body;
    int64_t begin, end;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      body = body_;
      begin = std::min(n_, index * chunk_);
      end = std::min(n_, begin + chunk_);
    }
    if (begin < end)
      (*body)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0)
        done_.notify_one();
    }
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    n_ = n;
    chunk_ = chunk;
    pending_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  body(0, std::min(n, chunk));
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

namespace {
std::unique_ptr<ThreadPool> &globalPool() {
  static std::unique_ptr<ThreadPool> p = std::make_unique<ThreadPool>(1);
  return p;
}
} // namespace

ThreadPool &pool() { return *globalPool(); }
void setThreads(int threads) { globalPool() = std::make_unique<ThreadPool>(threads); }

} // namespace helm::kernels
