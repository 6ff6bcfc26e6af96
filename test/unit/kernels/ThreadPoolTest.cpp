//===- ThreadPoolTest.cpp - parallelFor coverage, reuse, setThreads ----------------===//
#include "kernels/common/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using helm::kernels::ThreadPool;

namespace {

struct Call {
  int64_t begin, end;
  std::thread::id thread;
};

/// Runs parallelFor(n, grain) and checks: every index in [0, n) visited exactly once, every chunk
/// non-empty and inside [0, n), chunk starts on multiples of `grain`, at most one chunk per thread,
/// the first chunk on the calling thread.
void checkCoverage(ThreadPool &pool, int64_t n, int64_t grain) {
  SCOPED_TRACE("threads " + std::to_string(pool.threads()) + " n " + std::to_string(n) + " grain " +
               std::to_string(grain));
  std::vector<std::atomic<int>> hits(size_t(n > 0 ? n : 0));
  for (auto &h : hits)
    h.store(0);
  std::mutex m;
  std::vector<Call> calls;
  pool.parallelFor(n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      if (i >= 0 && i < n)
        hits[size_t(i)].fetch_add(1);
    std::lock_guard<std::mutex> lock(m);
    calls.push_back({b, e, std::this_thread::get_id()});
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i;
  if (n <= 0) {
    EXPECT_TRUE(calls.empty());
    return;
  }
  ASSERT_FALSE(calls.empty());
  EXPECT_LE(int(calls.size()), pool.threads());
  std::set<std::thread::id> threads;
  bool callerHadFirst = false;
  for (const Call &c : calls) {
    EXPECT_LT(c.begin, c.end) << "empty chunk";
    EXPECT_GE(c.begin, 0);
    EXPECT_LE(c.end, n);
    EXPECT_EQ(c.begin % std::max<int64_t>(1, grain), 0) << "chunk start " << c.begin;
    threads.insert(c.thread);
    if (c.begin == 0)
      callerHadFirst = c.thread == std::this_thread::get_id();
  }
  EXPECT_EQ(threads.size(), calls.size()) << "a thread ran two chunks";
  EXPECT_TRUE(callerHadFirst);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100, 255, 1000, 4097, 12345})
      for (int64_t grain : {0, 1, 2, 3, 8, 16, 100, 5000})
        checkCoverage(pool, n, grain);
  }
}

TEST(ThreadPool, SpreadsLargeRangesOverThreads) {
  // With n far above grain * threads every thread gets a chunk.
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    std::mutex m;
    std::set<std::thread::id> seen;
    pool.parallelFor(10000, 1, [&](int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(m);
      seen.insert(std::this_thread::get_id());
    });
    EXPECT_EQ(int(seen.size()), threads);
  }
}

TEST(ThreadPool, ReusedAcrossManyCalls) {
  ThreadPool pool(3);
  std::set<std::thread::id> workers;
  std::mutex m;
  for (int call = 0; call < 3000; ++call) {
    int64_t n = 1 + call % 97;
    std::atomic<int64_t> sum{0};
    pool.parallelFor(n, 1 + call % 5, [&](int64_t b, int64_t e) {
      int64_t local = 0;
      for (int64_t i = b; i < e; ++i)
        local += i + 1;
      sum += local;
      std::lock_guard<std::mutex> lock(m);
      workers.insert(std::this_thread::get_id());
    });
    ASSERT_EQ(sum.load(), n * (n + 1) / 2) << "call " << call;
  }
  // The same persistent threads served every call: the caller plus at most two workers.
  EXPECT_LE(workers.size(), size_t(3));
  EXPECT_GE(workers.size(), size_t(2));
}

TEST(ThreadPool, SetThreadsChangesTheGlobalPool) {
  for (int t : {1, 4, 2, 3, 1}) {
    helm::kernels::setThreads(t);
    EXPECT_EQ(helm::kernels::pool().threads(), t);
    checkCoverage(helm::kernels::pool(), 1000, 8);
  }
  helm::kernels::setThreads(0); // nonsensical counts mean one thread
  EXPECT_EQ(helm::kernels::pool().threads(), 1);
  helm::kernels::setThreads(1);
}

TEST(ThreadPool, DestroyedWhileIdle) {
  for (int i = 0; i < 50; ++i) {
    auto pool = std::make_unique<ThreadPool>(1 + i % 4);
    std::atomic<int> count{0};
    pool->parallelFor(100, 1, [&](int64_t b, int64_t e) { count += int(e - b); });
    EXPECT_EQ(count.load(), 100);
  }
}

} // namespace
