//===- HostProfiler.cpp - measure this machine's CPU side for the cost model ----===//
#include "passes/plan/HostProfiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <unistd.h>
#include <vector>

namespace helm {

namespace {
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Runs `body(thread, threads)` on every core and returns the wall time of the slowest.
template <typename F> double parallel(int threads, F body) {
  std::vector<std::thread> pool;
  auto start = Clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { body(t, threads); });
  for (auto &th : pool)
    th.join();
  return seconds(start, Clock::now());
}

/// Sum of every 64-bit word of [p, p + n): a read stream the compiler vectorizes and cannot drop.
uint64_t readSum(const uint64_t *p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i)
    a += p[i];
  return a + b + c + d;
}

/// Best-of-`reps` read bandwidth over `bytes`, GB/s, each thread reading its own slice `passes` times.
double readBandwidth(size_t bytes, int threads, int reps, int passes) {
  size_t words = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  // First touch from the owning threads (NUMA placement), and no lazily mapped zero pages.
  parallel(threads, [&](int t, int n) {
    size_t lo = words * t / n, hi = words * (t + 1) / n;
    for (size_t i = lo; i < hi; ++i)
      buffer[i] = i;
  });
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    double s = parallel(threads, [&](int t, int n) {
      size_t lo = words * t / n, hi = words * (t + 1) / n;
      uint64_t acc = 0;
      for (int p = 0; p < passes; ++p)
        acc += readSum(buffer.get() + lo, hi - lo);
      sink += acc;
    });
    best = std::max(best, double(bytes) * passes / s / 1e9);
  }
  return best;
}

/// fp32 y = W x for W [rows, cols]: decode-style GEMV, GFLOP/s.
double gemvRate(int threads, int reps) {
  const size_t rows = 4096, cols = 4096;
  std::vector<float> w(rows * cols), x(cols), y(rows);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i % 7) * 0.25f;
  for (size_t i = 0; i < cols; ++i)
    x[i] = float(i % 5);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    double s = parallel(threads, [&](int t, int n) {
      for (size_t i = rows * t / n; i < rows * (t + 1) / n; ++i) {
        const float *row = &w[i * cols];
        // Eight independent partial sums: the compiler vectorizes this without -ffast-math.
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t j = 0; j < cols; j += 8)
          for (int l = 0; l < 8; ++l)
            acc[l] += row[j + l] * x[j + l];
        y[i] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      }
    });
    best = std::max(best, 2.0 * rows * cols / s / 1e9);
  }
  volatile float keep = y[rows / 2];
  (void)keep;
  return best;
}

/// Sixteen fp32 lanes as one value (GCC vector extension): one zmm register, or two ymm / four xmm
/// where the ISA is narrower.
typedef float Lanes16 __attribute__((vector_size(64)));

#define HELM_LOAD_LANES(dst, p) std::memcpy(&(dst), (p), sizeof(Lanes16))

/// `passes` rounds of rows x cols fp32 dot products against x (cols a multiple of 64), compiled for
/// the widest vector ISA this CPU has (GCC's target clones pick one at load): attention's kernels
/// run at that width. Four independent chains of 16 lanes keep the multiply-add units busy.
#if defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void
cachedDots(const float *m, const float *x, float *out, size_t rows, size_t cols, size_t passes) {
  for (size_t p = 0; p < passes; ++p)
    for (size_t i = 0; i < rows; ++i) {
      const float *row = &m[i * cols];
      Lanes16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
      for (size_t j = 0; j < cols; j += 64) {
        Lanes16 w0, w1, w2, w3, x0, x1, x2, x3;
        HELM_LOAD_LANES(w0, row + j);
        HELM_LOAD_LANES(w1, row + j + 16);
        HELM_LOAD_LANES(w2, row + j + 32);
        HELM_LOAD_LANES(w3, row + j + 48);
        HELM_LOAD_LANES(x0, x + j);
        HELM_LOAD_LANES(x1, x + j + 16);
        HELM_LOAD_LANES(x2, x + j + 32);
        HELM_LOAD_LANES(x3, x + j + 48);
        a0 += w0 * x0;
        a1 += w1 * x1;
        a2 += w2 * x2;
        a3 += w3 * x3;
      }
      Lanes16 a = (a0 + a1) + (a2 + a3);
      float sum = 0;
      for (int l = 0; l < 16; ++l)
        sum += a[l];
      out[i] += sum;
    }
}
#undef HELM_LOAD_LANES

/// The same fp32 dot products over a 128 KiB matrix per thread that stays in its core's cache,
/// GFLOP/s: the rate of decode work whose operands are in cache, as attention's are (each K and V
/// row serves every query head of its group).
double cachedGemvRate(int threads, int reps) {
  // 8 x 4096 x 4000 multiply-adds a thread: milliseconds of work, so starting the threads is
  // noise.
  const size_t rows = 8, cols = 4096, passes = 4000;
  std::vector<std::vector<float>> w(size_t(threads), std::vector<float>(rows * cols, 0.0f));
  std::vector<std::vector<float>> y(size_t(threads), std::vector<float>(rows, 0.0f));
  std::vector<float> x(cols);
  for (auto &m : w)
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = float(i % 7) * 0.25f;
  for (size_t i = 0; i < cols; ++i)
    x[i] = float(i % 5) * 0.5f;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    double s = parallel(threads, [&](int t, int) {
      cachedDots(w[size_t(t)].data(), x.data(), y[size_t(t)].data(), rows, cols, passes);
    });
    best = std::max(best, 2.0 * double(rows * cols * passes) * threads / s / 1e9);
  }
  volatile float keep = y[0][rows / 2];
  (void)keep;
  return best;
}

/// fp32 C = A B, 384^3, cache-blocked: a prefill-style GEMM rate (a lower bound for tuned BLAS).
double gemmRate(int threads, int reps) {
  const size_t n = 384, block = 64;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (size_t i = 0; i < n * n; ++i) {
    a[i] = float(i % 3);
    b[i] = float(i % 5) * 0.5f;
  }
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::fill(c.begin(), c.end(), 0.0f);
    double s = parallel(threads, [&](int t, int nt) {
      for (size_t i0 = block * t; i0 < n; i0 += block * nt)
        for (size_t k0 = 0; k0 < n; k0 += block)
          for (size_t j0 = 0; j0 < n; j0 += block)
            for (size_t i = i0; i < i0 + block; ++i)
              for (size_t k = k0; k < k0 + block; ++k) {
                float aik = a[i * n + k];
                float *crow = &c[i * n];
                const float *brow = &b[k * n];
                for (size_t j = j0; j < j0 + block; ++j)
                  crow[j] += aik * brow[j];
              }
    });
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  volatile float keep = c[n * n / 2];
  (void)keep;
  return best;
}

/// L3 size from sysfs (index3), 0 when the OS does not say.
double l3Bytes() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string s;
  if (!(f >> s) || s.empty())
    return 0;
  double v = std::atof(s.c_str());
  char unit = s.back();
  return unit == 'K' ? v * 1024 : unit == 'M' ? v * 1024 * 1024 : v;
}

std::string cpuName() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown CPU";
}
} // namespace

TargetProfile measureHost(bool quick, const std::function<void(const std::string &)> &progress) {
  auto say = [&](const std::string &s) {
    if (progress)
      progress(s);
  };
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  TargetProfile t;
  t.name = "host";
  t.cpu.name = cpuName();
  t.cpu.cores = threads;
  t.cpu.l3Bytes = l3Bytes();
  t.cpu.ramBytes = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  say("DRAM read bandwidth over 1 GiB, " + std::to_string(threads) + " threads");
  t.cpu.dramBwGbs = readBandwidth(size_t(1) << 30, threads, quick ? 2 : 5, 1);
  say("L3 read bandwidth");
  size_t l3 = t.cpu.l3Bytes > 0 ? size_t(t.cpu.l3Bytes / 2) : size_t(8) << 20;
  t.cpu.l3BwGbs = std::max(t.cpu.dramBwGbs, readBandwidth(l3, threads, quick ? 3 : 8, 8));
  if (t.cpu.l3Bytes == 0)
    t.cpu.l3Bytes = double(l3) * 2;
  say("fp32 GEMV (from DRAM and from cache) and GEMM throughput");
  t.cpu.pDecGflops = gemvRate(threads, quick ? 3 : 10);
  t.cpu.pPreGflops = gemmRate(threads, quick ? 2 : 5);
  t.cpu.pAttnGflops = std::max(t.cpu.pDecGflops, cachedGemvRate(threads, quick ? 3 : 10));
  t.cpu.overheadMsPerBlock = 0;
  t.source = "measured on this machine by helm-profile (CPU: " + std::to_string(threads) +
             " threads; fp32 GEMV/GEMM rates are portable-C++ lower bounds)";
  return t;
}

} // namespace helm
