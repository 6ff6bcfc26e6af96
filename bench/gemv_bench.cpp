//===- gemv_bench.cpp - helm_k_linear weight streaming rate vs a STREAM-style triad ----===//
//
// Decode reads every weight once per token, so a GEMV's speed is the rate it streams weight bytes.
// For each weight dtype (f16, bf16, f32), layout ([N,K] and [K,N]), matrix size and thread count
// this prints the GB/s of weight bytes per call and that rate as a percentage of a triad
// a[i] = b[i] + s * c[i] (doubles, 3 x 128 MiB, 24 bytes per element counted, as STREAM does)
// run on the same threads.
//
// "DRAM" cycles through enough copies of the matrix (>= 512 MiB in all) that none is in cache
// when it is read again, which is what decode sees; "hot" repeats one matrix (an 8 MB one fits
// in a 32 MB L3).
//
//   helm-gemv-bench [--m M] [--sizes 8,16,32,64] [--threads 1,2] [--isa scalar|avx2|avx512]
//                   [--quant q8_0,q4_0,...] [--min-time SECONDS] [--json]
//
// Quantized rows (kernels/quant's quantLinear, --quant any block format of the contract's table, or none): the same K x N as
// the f16 row of each size (so "8 MB" is the 2048 x 2048 f16 shape), f32 x and y, W as ggml blocks;
// GB/s counts the block bytes actually read (codes and scales), which is what bounds decode.
//
// --json prints one JSON object instead of the text (for bench/compare_bench.py):
//   {"isa", "m", "k", "threads": [...], "triad": {"T": {"triad_gbs", "read_gbs"}},
//    "rows": [{"weights", "layout", "mb", "threads", "dram_gbs", "pct_triad", "hot_gbs"}]}
//
// --prefill measures the prefill GEMM instead: GFLOP/s (2 M K N per call) for the projection shapes
// of Qwen3-0.6B and a ~1B Llama (--shapes KxN,...), M rows (--m 32,128,512), weights f16/f32/bf16
// (--dtypes) with x and y of the same type, both layouts, on the GEMV micro-kernels ("gemv": the
// M <= 8 kernels over blocks of 8 rows) and on the oneDNN GEMM ("gemm"); --path picks one.
// Weights cycle through >= 256 MiB of copies, so every call reads them from memory.
//
//   helm-gemv-bench --prefill [--m 32,128,512] [--shapes KxN,...] [--dtypes f16,f32,bf16|none]
//                   [--quant q8_0,q4_0,...] [--path gemv|gemm|auto] [--threads 1,2] [--isa ...]
//                   [--min-time SECONDS]
// With --quant, --prefill first prints quantLinear's GFLOP/s for those block formats (x and y f32);
// --dtypes none leaves out the element rows.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Gemm.h"
#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/ThreadPool.h"
#include "kernels/quant/QuantGemv.h"
#include "contract/helm_contract.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace helm::kernels;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// "8,16,32": positive integers, comma-separated; anything else is a one-line error.
std::vector<int> parseList(const char *option, const char *s) {
  std::vector<int> out;
  std::string str(s);
  size_t pos = 0;
  while (pos <= str.size()) {
    size_t comma = str.find(',', pos);
    if (comma == std::string::npos)
      comma = str.size();
    if (comma > pos) {
      std::string item = str.substr(pos, comma - pos);
      char *end = nullptr;
      long v = std::strtol(item.c_str(), &end, 10);
      if (*end != '\0' || v <= 0 || v > 1 << 20) {
        std::fprintf(stderr, "helm-gemv-bench: %s wants positive integers, got '%s'\n", option,
                     item.c_str());
        std::exit(1);
      }
      out.push_back(int(v));
    }
    pos = comma + 1;
  }
  if (out.empty()) {
    std::fprintf(stderr, "helm-gemv-bench: %s is empty\n", option);
    std::exit(1);
  }
  return out;
}

/// Best of 3 batches, each at least minTime / 3 seconds: the seconds one call of `fn` takes.
template <class F> double timeIt(F &&fn, double minTime) {
  fn(); // warm-up (page faults, thread wake-up)
  double best = 1e30;
  for (int batch = 0; batch < 3; ++batch) {
    int calls = 0;
    double t0 = now(), t1;
    do {
      fn();
      ++calls;
      t1 = now();
    } while (t1 - t0 < minTime / 3);
    best = std::min(best, (t1 - t0) / calls);
  }
  return best;
}

double triadGBs(int threads, double minTime) {
  setThreads(threads);
  const int64_t n = (int64_t(128) << 20) / 8;
  std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n), 1.0), c(static_cast<size_t>(n), 2.0);
  const double s = 3.0;
  // First touch on the threads that will use the pages.
  pool().parallelFor(n, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      a[size_t(i)] = 0;
  });
  double sec = timeIt(
      [&] {
        pool().parallelFor(n, 4096, [&](int64_t i0, int64_t i1) {
          double *pa = a.data();
          const double *pb = b.data(), *pc = c.data();
          for (int64_t i = i0; i < i1; ++i)
            pa[i] = pb[i] + s * pc[i];
        });
      },
      minTime);
  return double(n) * 24 / sec / 1e9;
}

/// A read-only stream (what a GEMV does): sums 256 MiB of 64-bit words.
double readGBs(int threads, double minTime) {
  setThreads(threads);
  const int64_t n = (int64_t(256) << 20) / 8;
  std::vector<uint64_t> a(static_cast<size_t>(n));
  pool().parallelFor(n, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      a[size_t(i)] = uint64_t(i);
  });
  std::vector<uint64_t> sums(64);
  double sec = timeIt(
      [&] {
        pool().parallelFor(n, 4096, [&](int64_t i0, int64_t i1) {
          const uint64_t *p = a.data();
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          int64_t i = i0;
          for (; i + 4 <= i1; i += 4) {
            s0 += p[i];
            s1 += p[i + 1];
            s2 += p[i + 2];
            s3 += p[i + 3];
          }
          for (; i < i1; ++i)
            s0 += p[i];
          sums[size_t(i0 * 63 / n)] += s0 + s1 + s2 + s3;
        });
      },
      minTime);
  volatile uint64_t sink = sums[0];
  (void)sink;
  return double(n) * 8 / sec / 1e9;
}

struct Result {
  double dram, hot;
};

/// `elems` random weights in [-1, 1], encoded as `wd`.
std::vector<unsigned char> randomEncoded(DType wd, int64_t elems, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t elem = wd == DType::f32 ? 4 : 2;
  std::vector<unsigned char> out(size_t(elems * elem));
  for (int64_t i = 0; i < elems; ++i) {
    float v = uni(rng);
    if (wd == DType::f32)
      std::memcpy(&out[size_t(i * 4)], &v, 4);
    else {
      uint16_t h = wd == DType::f16 ? floatToHalf(v) : floatToBf16(v);
      std::memcpy(&out[size_t(i * 2)], &h, 2);
    }
  }
  return out;
}

Result gemvGBs(DType wd, bool transposed, int64_t bytes, int64_t M, int threads, double minTime) {
  setThreads(threads);
  const int64_t elem = wd == DType::f32 ? 4 : 2;
  const int64_t K = 2048, N = bytes / (K * elem);
  const int64_t copies = std::max<int64_t>(1, ((int64_t(512) << 20) + bytes - 1) / bytes);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const std::vector<unsigned char> master = randomEncoded(wd, K * N, rng);
  std::vector<std::vector<unsigned char>> w(static_cast<size_t>(copies), master);
  std::vector<float> x(size_t(M * K)), y(size_t(M * N));
  for (float &v : x)
    v = uni(rng);
  size_t next = 0;
  double dram = timeIt(
      [&] {
        helm_k_linear(x.data(), 0, w[next].data(), int32_t(wd), transposed, y.data(), 0, M, K, N);
        next = (next + 1) % w.size();
      },
      minTime);
  double hot = timeIt(
      [&] { helm_k_linear(x.data(), 0, w[0].data(), int32_t(wd), transposed, y.data(), 0, M, K, N); },
      minTime);
  double b = double(K * N * elem) / 1e9;
  return {b / dram, b / hot};
}

/// Random blocks of `format` for an N x K matrix: codes uniform, scales (and mins) random finite
/// f16 values of moderate size. The kernel's speed does not depend on the values.
std::vector<unsigned char> randomBlocks(helm::quant::BlockFormat format, int64_t N, int64_t K, std::mt19937 &rng) {
  namespace q = helm::quant;
  const q::BlockFormatInfo &info = q::blockFormatInfo(format);
  std::vector<unsigned char> out(size_t(*q::rowBytes(format, K) * N));
  std::uniform_int_distribution<int> byte(0, 255);
  for (unsigned char &b : out)
    b = static_cast<unsigned char>(byte(rng));
  // Where each format keeps its f16 fields: d first, or at the end of the block, then a min beside d.
  using q::BlockFormat;
  const size_t first = format == BlockFormat::q6_k   ? offsetof(q::BlockQ6K, d)
                       : format == BlockFormat::q2_k ? offsetof(q::BlockQ2K, d)
                       : format == BlockFormat::q3_k ? offsetof(q::BlockQ3K, d)
                                                     : 0;
  const int fields = format == BlockFormat::q4_1 || format == BlockFormat::q5_1 || format == BlockFormat::q4_k ||
                             format == BlockFormat::q5_k || format == BlockFormat::q2_k
                         ? 2
                         : 1;
  for (size_t at = 0; at < out.size(); at += size_t(info.bytesPerBlock))
    for (int f = 0; f < fields; ++f) {
      unsigned char &high = out[at + first + 2 * size_t(f) + 1];
      high = static_cast<unsigned char>(0x20 | (high & 0x83)); // exponent 8: about 2^-7
    }
  return out;
}

/// quantLinear's block-byte GB/s for the K x N of an f16 matrix of `f16Bytes`.
Result quantGBs(helm::quant::BlockFormat format, int64_t f16Bytes, int64_t M, int threads, double minTime,
                double &quantMB) {
  setThreads(threads);
  const int64_t K = 2048, N = f16Bytes / (K * 2);
  std::mt19937 rng(7);
  const std::vector<unsigned char> master = randomBlocks(format, N, K, rng);
  const int64_t bytes = int64_t(master.size());
  quantMB = double(bytes) / double(1 << 20);
  const int64_t copies = std::max<int64_t>(1, ((int64_t(512) << 20) + bytes - 1) / bytes);
  std::vector<std::vector<unsigned char>> w(static_cast<size_t>(copies), master);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(size_t(M * K)), y(size_t(M * N));
  for (float &v : x)
    v = uni(rng);
  std::string error;
  auto call = [&](const std::vector<unsigned char> &weights) {
    if (!helm::quant::quantLinear(format, x.data(), M, K, weights.data(), N, y.data(), &error)) {
      std::fprintf(stderr, "helm-gemv-bench: %s\n", error.c_str());
      std::exit(1);
    }
  };
  size_t next = 0;
  double dram = timeIt(
      [&] {
        call(w[next]);
        next = (next + 1) % w.size();
      },
      minTime);
  double hot = timeIt([&] { call(w[0]); }, minTime);
  double b = double(bytes) / 1e9;
  return {b / dram, b / hot};
}

/// GFLOP/s of y[M, N] = x[M, K] . W with x, W and y all of type `wd`.
double prefillGflops(DType wd, bool transposed, int64_t M, int64_t K, int64_t N, int threads,
                     double minTime) {
  setThreads(threads);
  const int64_t elem = wd == DType::f32 ? 4 : 2, bytes = K * N * elem;
  const int64_t copies = std::max<int64_t>(1, ((int64_t(256) << 20) + bytes - 1) / bytes);
  std::mt19937 rng(7);
  const std::vector<unsigned char> master = randomEncoded(wd, K * N, rng);
  std::vector<std::vector<unsigned char>> w(size_t(copies), master);
  std::vector<unsigned char> x = randomEncoded(wd, M * K, rng), y(size_t(M * N * elem));
  size_t next = 0;
  double sec = timeIt(
      [&] {
        helm_k_linear(x.data(), int32_t(wd), w[next].data(), int32_t(wd), transposed, y.data(),
                      int32_t(wd), M, K, N);
        next = (next + 1) % w.size();
      },
      minTime);
  return 2.0 * double(M) * double(K) * double(N) / sec / 1e9;
}

/// GFLOP/s of quantLinear (x and y f32, W of `format`) at y[M, N] = x[M, K] . W^T, the weights
/// cycled through >= 256 MiB of copies as in prefillGflops.
double quantPrefillGflops(helm::quant::BlockFormat format, int64_t M, int64_t K, int64_t N, int threads,
                          double minTime) {
  setThreads(threads);
  std::mt19937 rng(7);
  const std::vector<unsigned char> master = randomBlocks(format, N, K, rng);
  const int64_t bytes = int64_t(master.size());
  const int64_t copies = std::max<int64_t>(1, ((int64_t(256) << 20) + bytes - 1) / bytes);
  std::vector<std::vector<unsigned char>> w(size_t(copies), master);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(size_t(M * K)), y(size_t(M * N));
  for (float &v : x)
    v = uni(rng);
  std::string error;
  size_t next = 0;
  double sec = timeIt(
      [&] {
        if (!helm::quant::quantLinear(format, x.data(), M, K, w[next].data(), N, y.data(), &error)) {
          std::fprintf(stderr, "helm-gemv-bench: %s\n", error.c_str());
          std::exit(1);
        }
        next = (next + 1) % w.size();
      },
      minTime);
  return 2.0 * double(M) * double(K) * double(N) / sec / 1e9;
}

/// "1024x2048,3072x1024": K x N pairs; anything else is a one-line error.
std::vector<std::pair<int64_t, int64_t>> parseShapes(const char *s) {
  std::vector<std::pair<int64_t, int64_t>> out;
  std::string str(s);
  for (size_t pos = 0; pos < str.size();) {
    size_t comma = str.find(',', pos);
    if (comma == std::string::npos)
      comma = str.size();
    std::string item = str.substr(pos, comma - pos);
    long k = 0, n = 0;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%ldx%ld%c", &k, &n, &tail) != 2 || k <= 0 || n <= 0) {
      std::fprintf(stderr, "helm-gemv-bench: --shapes wants KxN pairs, got '%s'\n", item.c_str());
      std::exit(1);
    }
    out.emplace_back(k, n);
    pos = comma + 1;
  }
  if (out.empty()) {
    std::fprintf(stderr, "helm-gemv-bench: --shapes is empty\n");
    std::exit(1);
  }
  return out;
}

const char *pathName(PrefillPath p) {
  return p == PrefillPath::gemv ? "gemv" : p == PrefillPath::gemm ? "gemm" : "auto";
}

int prefillMain(const std::vector<int> &ms, const std::vector<int> &threadCounts,
                const std::vector<std::pair<int64_t, int64_t>> &shapes,
                const std::vector<DType> &dtypes, const std::vector<PrefillPath> &paths,
                const std::vector<helm::quant::BlockFormat> &quantFormats, double minTime) {
  if (!quantFormats.empty()) {
    // Block weights have one path (quantLinear's kernels); K must be a multiple of the block.
    std::printf("helm-gemv-bench --prefill: quantized weights, path %s; x and y f32; GFLOP/s (2 M K N per "
                "call)\n\n| weights | K | N | M | threads | GFLOP/s |\n|---|---:|---:|---:|---:|---:|\n",
                helm::quant::quantPathName(helm::quant::activeQuantPath()));
    for (helm::quant::BlockFormat format : quantFormats)
      for (auto [K, N] : shapes)
        for (int M : ms)
          for (int t : threadCounts) {
            std::printf("| %s | %lld | %lld | %d | %d | %.1f |\n", helm::quant::blockFormatInfo(format).name.data(),
                        (long long)K, (long long)N, M, t, quantPrefillGflops(format, M, K, N, t, minTime));
            std::fflush(stdout);
          }
    if (dtypes.empty())
      return 0;
    std::printf("\n");
  }
  std::printf("helm-gemv-bench --prefill: isa %s; x, W and y of the weight type; GFLOP/s "
              "(2 M K N per call)\n\n| weights | layout | K | N | M | threads |",
              isaName(activeIsa()));
  for (PrefillPath p : paths)
    std::printf(" %s |", pathName(p));
  std::printf("\n|---|---|---:|---:|---:|---:|");
  for (size_t i = 0; i < paths.size(); ++i)
    std::printf("---:|");
  std::printf("\n");
  const char *names[] = {"f32", "f16", "bf16"};
  for (DType wd : dtypes)
    for (bool transposed : {false, true})
      for (auto [K, N] : shapes)
        for (int M : ms)
          for (int t : threadCounts) {
            std::printf("| %s | %s | %lld | %lld | %d | %d |", names[int(wd)],
                        transposed ? "[N,K]" : "[K,N]", (long long)K, (long long)N, M, t);
            for (PrefillPath p : paths) {
              setPrefillPathForTesting(p);
              std::printf(" %.1f |", prefillGflops(wd, transposed, M, K, N, t, minTime));
              std::fflush(stdout);
            }
            std::printf("\n");
          }
  setPrefillPathForTesting(PrefillPath::automatic);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int> sizes = {8, 16, 32, 64}, threadCounts = {1, 2};
  int64_t M = 1;
  double minTime = 0.6;
  bool json = false, prefill = false;
  std::vector<int> ms = {32, 128, 512};
  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1024, 2048}, {1024, 1024}, {1024, 3072}, {3072, 1024}, // Qwen3-0.6B q, k/v, gate/up, down
      {2048, 5632}, {5632, 2048}};                            // ~1B Llama gate/up, down
  std::vector<DType> dtypes = {DType::f16, DType::f32};
  std::vector<PrefillPath> paths = {PrefillPath::gemv, PrefillPath::gemm};
  std::vector<helm::quant::BlockFormat> quantFormats = {helm::quant::BlockFormat::q8_0,
                                                        helm::quant::BlockFormat::q4_0};
  bool quantGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "helm-gemv-bench: %s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--m") {
      ms = parseList("--m", value());
      M = ms[0];
    } else if (a == "--prefill")
      prefill = true;
    else if (a == "--shapes")
      shapes = parseShapes(value());
    else if (a == "--dtypes") {
      std::string v(",");
      v.append(value()).append(",");
      dtypes.clear();
      for (auto [name, d] :
           {std::pair{",f32,", DType::f32}, {",f16,", DType::f16}, {",bf16,", DType::bf16}})
        if (v.find(name) != std::string::npos)
          dtypes.push_back(d);
      if (dtypes.empty() && v != ",none,") {
        std::fprintf(stderr, "helm-gemv-bench: --dtypes wants f32, f16 and/or bf16 (or none)\n");
        return 1;
      }
    } else if (a == "--path") {
      std::string v = value();
      paths.clear();
      for (PrefillPath p : {PrefillPath::gemv, PrefillPath::gemm, PrefillPath::automatic})
        if (v == pathName(p))
          paths.push_back(p);
      if (paths.empty()) {
        std::fprintf(stderr, "helm-gemv-bench: --path wants gemv, gemm or auto, got '%s'\n",
                     v.c_str());
        return 1;
      }
    }
    else if (a == "--quant") {
      std::string v = value();
      quantGiven = true;
      quantFormats.clear();
      for (size_t pos = 0; v != "none" && pos <= v.size();) {
        size_t comma = std::min(v.find(',', pos), v.size());
        auto f = helm::quant::parseBlockFormat(v.substr(pos, comma - pos));
        if (!f) {
          std::fprintf(stderr, "helm-gemv-bench: --quant wants block formats (q8_0, q4_k, iq4_xs, ...) or none, got '%s'\n",
                       v.substr(pos, comma - pos).c_str());
          return 1;
        }
        quantFormats.push_back(*f);
        pos = comma + 1;
      }
    } else if (a == "--sizes")
      sizes = parseList("--sizes", value());
    else if (a == "--threads")
      threadCounts = parseList("--threads", value());
    else if (a == "--min-time")
      minTime = std::atof(value());
    else if (a == "--json")
      json = true;
    else if (a == "--isa") {
      std::string v = value();
      bool ok = false;
      for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (v == isaName(isa))
          ok = setIsaForTesting(isa);
      if (!ok) {
        std::fprintf(stderr, "helm-gemv-bench: --isa %s is unknown or not supported here\n", v.c_str());
        return 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: helm-gemv-bench [--m M] [--sizes 8,16,32,64] [--threads 1,2] "
                   "[--isa scalar|avx2|avx512] [--quant q8_0,q4_0,...,q3_k|none] [--min-time SECONDS] "
                   "[--json]\n"
                   "       helm-gemv-bench --prefill [--m 32,128,512] [--shapes KxN,...] "
                   "[--dtypes f16,f32,bf16|none] [--quant ...] [--path gemv|gemm|auto] [--threads 1,2]\n");
      return a == "--help" ? 0 : 1;
    }
  }
  // --prefill runs quantized rows only when --quant names formats.
  const std::vector<helm::quant::BlockFormat> prefillQuant =
      quantGiven ? quantFormats : std::vector<helm::quant::BlockFormat>{};
  if (prefill)
    return prefillMain(ms, threadCounts, shapes, dtypes, paths, prefillQuant, minTime);
  if (json) {
    std::printf("{\"isa\": \"%s\", \"m\": %lld, \"k\": 2048, \"threads\": [", isaName(activeIsa()),
                (long long)M);
    for (size_t t = 0; t < threadCounts.size(); ++t)
      std::printf("%s%d", t ? ", " : "", threadCounts[t]);
    std::printf("],\n \"triad\": {");
  } else {
    std::printf("helm-gemv-bench: isa %s, M = %lld, K = 2048, weight GB/s per call (1 GB = 1e9 B)\n",
                isaName(activeIsa()), (long long)M);
  }
  std::vector<double> triad(threadCounts.size());
  for (size_t t = 0; t < threadCounts.size(); ++t) {
    triad[t] = triadGBs(threadCounts[t], minTime);
    double read = readGBs(threadCounts[t], minTime);
    if (json)
      std::printf("%s\"%d\": {\"triad_gbs\": %.3f, \"read_gbs\": %.3f}", t ? ", " : "",
                  threadCounts[t], triad[t], read);
    else
      std::printf("%d thread%s: triad %.1f GB/s (STREAM counting, 24 B per element), read-only "
                  "stream %.1f GB/s\n",
                  threadCounts[t], threadCounts[t] == 1 ? "" : "s", triad[t], read);
  }
  if (json)
    std::printf("},\n \"rows\": [");
  else
    std::printf("\n| weights | layout | MB | threads | DRAM GB/s | %% of triad | hot GB/s |\n"
                "|---|---|---:|---:|---:|---:|---:|\n");
  bool first = true;
  const DType gemvDtypes[] = {DType::f16, DType::bf16, DType::f32};
  const char *names[] = {"f32", "f16", "bf16"};
  for (DType wd : gemvDtypes)
    for (bool transposed : {true, false})
      for (int mb : sizes)
        for (size_t t = 0; t < threadCounts.size(); ++t) {
          Result r = gemvGBs(wd, transposed, int64_t(mb) << 20, M, threadCounts[t], minTime);
          if (json)
            std::printf("%s\n  {\"weights\": \"%s\", \"layout\": \"%s\", \"mb\": %d, \"threads\": %d, "
                        "\"dram_gbs\": %.3f, \"pct_triad\": %.2f, \"hot_gbs\": %.3f}",
                        first ? "" : ",", names[int(wd)], transposed ? "[N,K]" : "[K,N]", mb,
                        threadCounts[t], r.dram, 100 * r.dram / triad[t], r.hot);
          else
            std::printf("| %s | %s | %d | %d | %.1f | %.0f%% | %.1f |\n", names[int(wd)],
                        transposed ? "[N,K]" : "[K,N]", mb, threadCounts[t], r.dram,
                        100 * r.dram / triad[t], r.hot);
          first = false;
          std::fflush(stdout);
        }
  if (!json && !quantFormats.empty())
    std::printf("\nQuantized weights (quantLinear, path %s; K x N of the f16 row of each size; GB/s of block "
                "bytes read)\n\n| weights | K x N | MB read | threads | DRAM GB/s | %% of triad | hot GB/s |\n"
                "|---|---|---:|---:|---:|---:|---:|\n",
                helm::quant::quantPathName(helm::quant::activeQuantPath()));
  for (helm::quant::BlockFormat format : quantFormats)
    for (int mb : sizes)
      for (size_t t = 0; t < threadCounts.size(); ++t) {
        double quantMB = 0;
        Result r = quantGBs(format, int64_t(mb) << 20, M, threadCounts[t], minTime, quantMB);
        const char *name = helm::quant::blockFormatInfo(format).name.data();
        const long long n = (int64_t(mb) << 20) / (2048 * 2);
        if (json)
          std::printf("%s\n  {\"weights\": \"%s\", \"layout\": \"[N,K]\", \"mb\": %d, \"quant_mb\": %.2f, "
                      "\"threads\": %d, \"dram_gbs\": %.3f, \"pct_triad\": %.2f, \"hot_gbs\": %.3f}",
                      first ? "" : ",", name, mb, quantMB, threadCounts[t], r.dram, 100 * r.dram / triad[t], r.hot);
        else
          std::printf("| %s | 2048 x %lld | %.1f | %d | %.1f | %.0f%% | %.1f |\n", name, n, quantMB,
                      threadCounts[t], r.dram, 100 * r.dram / triad[t], r.hot);
        first = false;
        std::fflush(stdout);
      }
  if (json)
    std::printf("\n]}\n");
  return 0;
}
