//===- CudaDeviceOpsTest.cpp - createCudaDeviceOps on a real GPU against host references ---===//
//
// Needs a GPU: without one (cudaAvailable() false) every test skips with the reason. With one,
// each DeviceOps method runs on device buffers and is compared with a plain C++ reference written
// here, which takes the steps runtime/device/DeviceOps.h specifies (f32 arithmetic, the documented
// roundings to the storage type) in f32, f16 and bf16. Tolerances allow what a GPU may do
// differently: other summation orders and fused multiply-adds in f32, which can move an
// intermediate rounding to f16/bf16 by one step.
//
// Attention runs on a real PagedKvCache in the GPU's memory: prefill then decode calls, so the
// keys and values the kernel appended in one call are read back by the next; batches whose rows
// have different pasts, GQA ratios 1, 4 and 8, head dims 1 to 256, a sliding window, several
// chunks per sequence and more spans than one kernel launch takes (the online-softmax state
// carried between launches), and the thesis' six-token example.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/Numeric.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/quant/BlockFormats.h"
#include "runtime/device/DeviceOps.h"
#include "runtime/kv/KvCache.h"
#include "runtime/kv/PagedKvCache.h"
#include "runtime/backends/cuda/CudaDevice.h"

#include "test/unit/DeviceTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>

using namespace helm::rt;
using helm::test::blockDtypeCode;
using helm::test::blockRows;
using helm::test::errorText;
using helm::test::randomFloats;
using helm::kernels::DType;

namespace {



const DType kAllTypes[] = {DType::f32, DType::f16, DType::bf16};

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  }
  return "?";
}

/// Relative error allowed on a result whose last one or two roundings to `dtype` may land one
/// step apart from the reference's (f32: summation order and fused multiply-adds only).
double tolerance(DType dtype) {
  switch (dtype) {
  case DType::f32: return 1e-5;
  case DType::f16: return 2.5e-3;
  case DType::bf16: return 2e-2;
  }
  return 0;
}


using helm::kernels::roundTo;

/// `values` rounded to `dtype` (what the device sees as input).
std::vector<float> rounded(DType dtype, std::vector<float> values) {
  for (float &v : values)
    v = roundTo(v, dtype);
  return values;
}

std::vector<char> encode(DType dtype, const std::vector<float> &values) {
  std::vector<char> bytes(values.size() * size_t(helm::kernels::dtypeBytes(dtype)));
  for (size_t i = 0; i < values.size(); ++i)
    helm::kernels::storeAs(bytes.data(), dtype, int64_t(i), values[i]);
  return bytes;
}

std::vector<float> decode(DType dtype, const std::vector<char> &bytes) {
  std::vector<float> values(bytes.size() / size_t(helm::kernels::dtypeBytes(dtype)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = helm::kernels::loadAs(bytes.data(), dtype, int64_t(i));
  return values;
}

/// got[i] within allowed[i] of want[i] (at most 5 failures reported).
void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const std::vector<double> &allowed, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - want[i]) <= allowed[i])) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i]
                    << " (allowed error " << allowed[i] << ")";
      if (++reported == 5)
        return;
    }
  }
}

/// Bit-exact equality (NaN matches any NaN: payloads may differ).
void expectSameBits(const std::vector<float> &got, const std::vector<float> &want,
                    const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = std::isnan(got[i]) ? std::isnan(want[i])
                                   : std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
    if (!same) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i];
      if (++reported == 5)
        return;
    }
  }
}

// --- Fixture ----------------------------------------------------------------------------------

class CudaDeviceOpsTest : public testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!cudaAvailable(&reason))
      GTEST_SKIP() << reason;
    ASSERT_VALUE(device, CudaDevice::create({}));
    device_ = std::move(device);
    ASSERT_VALUE(ops, createCudaDeviceOps(*device_, helm::kernels::cudaKernelImage()));
    ops_ = std::move(ops);
  }
  void TearDown() override {
    if (ops_)
      if (llvm::Error e = ops_->synchronize())
        ADD_FAILURE() << llvm::toString(std::move(e));
    for (void *p : buffers_)
      device_->free(p);
    ops_.reset(); // before the device it runs on
    device_.reset();
  }

  /// linearBlocks on every format against a float64 sum over the dequantized weights.
  void checkLinearInBlocks(uint32_t seed);

  /// A device buffer holding a copy of `bytes` host bytes (freed after the test).
  void *upload(const void *host, size_t bytes) {
    auto p = device_->allocate(std::max<size_t>(bytes, 1), "test data");
    if (!p) {
      ADD_FAILURE() << llvm::toString(p.takeError());
      return nullptr;
    }
    buffers_.push_back(*p);
    if (llvm::Error e = device_->copyToDevice(*p, host, bytes, Stream::compute, false))
      ADD_FAILURE() << llvm::toString(std::move(e));
    return *p;
  }
  void *upload(const std::vector<char> &bytes) { return upload(bytes.data(), bytes.size()); }
  void *upload(DType dtype, const std::vector<float> &values) {
    return upload(encode(dtype, values));
  }
  /// A device buffer of `bytes` filled with 0x7f bytes (a large finite value in every dtype), so
  /// that an element an op fails to write shows.
  void *garbage(size_t bytes) { return upload(std::vector<char>(bytes, 0x7f)); }
  /// `n` elements of `dtype` at `p` once every queued operation has finished.
  std::vector<float> fetch(DType dtype, const void *p, size_t n) {
    if (llvm::Error e = ops_->synchronize())
      ADD_FAILURE() << llvm::toString(std::move(e));
    std::vector<char> host(n * size_t(helm::kernels::dtypeBytes(dtype)));
    if (llvm::Error e = device_->copyToHost(host.data(), p, host.size(), Stream::compute, false))
      ADD_FAILURE() << llvm::toString(std::move(e));
    return decode(dtype, host);
  }

  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<DeviceOps> ops_;
  std::vector<void *> buffers_;
};

// --- Creation ---------------------------------------------------------------------------------

TEST(CudaDeviceOpsCreate, RefusesImagesWithoutTheKernels) {
  std::string reason;
  if (!cudaAvailable(&reason))
    GTEST_SKIP() << reason;
  ASSERT_VALUE(device, CudaDevice::create({}));

  auto none = createCudaDeviceOps(*device, {});
  ASSERT_FALSE(bool(none));
  std::string message = llvm::toString(none.takeError());
  EXPECT_NE(message.find("cannot load the kernel image"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;

  // A valid module with one kernel, but none of the ops' kernels.
  static const char kPtx[] = ".version 7.0\n"
                             ".target sm_75\n"
                             ".address_size 64\n"
                             ".visible .entry helm_cuda_dummy()\n"
                             "{\n"
                             "  ret;\n"
                             "}\n";
  auto lacking = createCudaDeviceOps(*device, llvm::ArrayRef<char>(kPtx, sizeof kPtx - 1));
  ASSERT_FALSE(bool(lacking));
  message = llvm::toString(lacking.takeError());
  EXPECT_NE(message.find("the kernel image lacks helm_cuda_"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // The refused ops unloaded their module and left nothing allocated.
  EXPECT_EQ(device->bytesInUse(), 0u);

  ASSERT_VALUE(ops, createCudaDeviceOps(*device, helm::kernels::cudaKernelImage()));
  ASSERT_OK(ops->synchronize());
}

// --- Row and elementwise ops ------------------------------------------------------------------

TEST_F(CudaDeviceOpsTest, EmbedGathersClampedRows) {
  const int64_t vocab = 50, width = 129;
  const std::vector<int64_t> ids = {0, 49, 7, -3, 50, int64_t(1) << 40, 7};
  const int64_t rows = int64_t(ids.size());
  const auto *dids = static_cast<const int64_t *>(upload(ids.data(), ids.size() * 8));
  for (DType dt : kAllTypes) {
    std::vector<float> table = rounded(dt, randomFloats(size_t(vocab * width), -1, 1, 1));
    std::vector<float> want(size_t(rows * width));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t id = std::clamp<int64_t>(ids[size_t(r)], 0, vocab - 1);
      std::copy_n(table.begin() + id * width, width, want.begin() + r * width);
    }
    const void *dtable = upload(dt, table);
    void *dout = garbage(want.size() * 4);
    ASSERT_OK(ops_->embed(dids, dtable, dout, dt, rows, vocab, width));
    expectSameBits(fetch(dt, dout, want.size()), want, std::string("embed ") + dtypeName(dt));
  }
}

TEST_F(CudaDeviceOpsTest, RmsNormRoundsTheNormalisedValueFirst) {
  struct Shape {
    int64_t groups, group;
  };
  const float eps = 1e-6f;
  for (DType dt : kAllTypes) {
    for (Shape s : {Shape{1, 1}, Shape{4, 1000}, Shape{6, 128}, Shape{2, 4096}, Shape{300, 64}}) {
      for (bool inPlace : {false, true}) {
        const std::string what = std::string("rmsNorm ") + dtypeName(dt) + " " +
                                 std::to_string(s.groups) + "x" + std::to_string(s.group) +
                                 (inPlace ? " in place" : "");
        const size_t n = size_t(s.groups * s.group);
        std::vector<float> x = rounded(dt, randomFloats(n, -3, 3, uint32_t(2 + s.group)));
        std::vector<float> gamma = rounded(dt, randomFloats(size_t(s.group), 0.5f, 1.5f, 3));
        std::vector<double> want(n), allowed(n);
        for (int64_t g = 0; g < s.groups; ++g) {
          double squares = 0;
          for (int64_t i = 0; i < s.group; ++i)
            squares += double(x[size_t(g * s.group + i)]) * x[size_t(g * s.group + i)];
          const float inv = 1.0f / std::sqrt(float(squares) / float(s.group) + eps);
          for (int64_t i = 0; i < s.group; ++i) {
            const size_t at = size_t(g * s.group + i);
            want[at] = roundTo(roundTo(x[at] * inv, dt) * gamma[size_t(i)], dt);
            allowed[at] = tolerance(dt) * std::fabs(want[at]) + 1e-6;
          }
        }
        void *dx = upload(dt, x);
        const void *dgamma = upload(dt, gamma);
        void *dy = inPlace ? dx : garbage(n * 4);
        ASSERT_OK(ops_->rmsNorm(dx, dgamma, dy, dt, s.groups, s.group, eps));
        expectClose(fetch(dt, dy, n), want, allowed, what);
      }
    }
  }
}

// Gemma's elementwise ops: geglu (GELU's tanh form, the activation rounded to the dtype before
// the product), the scale (bit-identical: one f32 product) and the soft cap.
TEST_F(CudaDeviceOpsTest, GegluScaleAndSoftcap) {
  for (DType dt : kAllTypes) {
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(100003)}) {
      const std::string suffix = std::string(" ") + dtypeName(dt) + " n=" + std::to_string(n);
      std::vector<float> a = rounded(dt, randomFloats(size_t(n), -12, 12, 6));
      std::vector<float> b = rounded(dt, randomFloats(size_t(n), -3, 3, 7));
      std::vector<double> glu(static_cast<size_t>(n)), gluAllowed(glu.size()), capped(glu.size()),
          cappedAllowed(glu.size());
      std::vector<float> scaled(glu.size());
      for (size_t i = 0; i < size_t(n); ++i) {
        const double g = a[i];
        const float gelu =
            roundTo(float(0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)))), dt);
        glu[i] = roundTo(gelu * b[i], dt);
        gluAllowed[i] = tolerance(dt) * std::fabs(glu[i]) + 1e-5;
        scaled[i] = roundTo(a[i] * 25.298221588134766f, dt);
        capped[i] = roundTo(float(7.5 * std::tanh(g / 7.5)), dt);
        cappedAllowed[i] = tolerance(dt) * std::fabs(capped[i]) + 1e-6;
      }
      const void *da = upload(dt, a), *db = upload(dt, b);
      void *dy = garbage(size_t(n) * 4);
      ASSERT_OK(ops_->geglu(da, db, dy, dt, n));
      expectClose(fetch(dt, dy, size_t(n)), glu, gluAllowed, "geglu" + suffix);
      ASSERT_OK(ops_->scale(da, dy, dt, n, 25.298221588134766f));
      expectSameBits(fetch(dt, dy, size_t(n)), scaled, "scale" + suffix);
      ASSERT_OK(ops_->softcap(da, dy, dt, n, 7.5f));
      expectClose(fetch(dt, dy, size_t(n)), capped, cappedAllowed, "softcap" + suffix);
    }
  }
}

TEST_F(CudaDeviceOpsTest, SwigluAndAdd) {
  for (DType dt : kAllTypes) {
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(100003)}) {
      const std::string suffix = std::string(" ") + dtypeName(dt) + " n=" + std::to_string(n);
      std::vector<float> a = rounded(dt, randomFloats(size_t(n), -8, 8, 4));
      std::vector<float> b = rounded(dt, randomFloats(size_t(n), -8, 8, 5));
      std::vector<double> glu(static_cast<size_t>(n)), gluAllowed(glu.size());
      std::vector<float> sum(glu.size());
      for (size_t i = 0; i < size_t(n); ++i) {
        const float silu = roundTo(a[i] / (1.0f + std::exp(-a[i])), dt);
        glu[i] = roundTo(silu * b[i], dt);
        gluAllowed[i] = tolerance(dt) * std::fabs(glu[i]) + 1e-6;
        // The same f32 addition and rounding as on the GPU: bit-identical.
        sum[i] = roundTo(a[i] + b[i], dt);
      }
      const void *da = upload(dt, a), *db = upload(dt, b);
      void *dy = garbage(size_t(n) * 4);
      ASSERT_OK(ops_->swiglu(da, db, dy, dt, n));
      expectClose(fetch(dt, dy, size_t(n)), glu, gluAllowed, "swiglu" + suffix);
      ASSERT_OK(ops_->add(da, db, dy, dt, n));
      expectSameBits(fetch(dt, dy, size_t(n)), sum, "add" + suffix);
    }
  }
}

TEST_F(CudaDeviceOpsTest, ConvertsBetweenEveryPairOfTypes) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.5f,
                               1.0f / 3.0f,
                               65504.0f,
                               65520.0f, // rounds to f16 infinity
                               1e-7f,    // an f16 subnormal
                               1e-30f,   // f16 zero, bf16 normal
                               3.0e38f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  for (float v : randomFloats(1000, -70000, 70000, 6))
    values.push_back(v);
  const size_t n = values.size();
  for (DType from : kAllTypes) {
    const std::vector<char> source = encode(from, values);
    const void *dx = upload(source);
    for (DType to : kAllTypes) {
      // The reference: widen exactly, round once (kernels/common/Numeric.h).
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i)
        want[i] = roundTo(loadAs(source.data(), from, int64_t(i)), to);
      void *dy = garbage(n * 4);
      ASSERT_OK(ops_->convert(dx, from, dy, to, int64_t(n)));
      expectSameBits(fetch(to, dy, n), want,
                     std::string("convert ") + dtypeName(from) + " -> " + dtypeName(to));
    }
  }
  // In place between the two 16-bit types (element for element).
  std::vector<float> halves = rounded(DType::f16, randomFloats(777, -100, 100, 7));
  void *dh = upload(DType::f16, halves);
  ASSERT_OK(ops_->convert(dh, DType::f16, dh, DType::bf16, int64_t(halves.size())));
  expectSameBits(fetch(DType::bf16, dh, halves.size()), rounded(DType::bf16, halves),
                 "convert f16 -> bf16 in place");
}

TEST_F(CudaDeviceOpsTest, CopyColumns) {
  for (DType dt : kAllTypes) {
    struct Case {
      int64_t rows, width, offset, count;
    };
    for (Case c : {Case{5, 37, 11, 13}, Case{3, 64, 0, 64}, Case{7, 20, 19, 1}, Case{1, 9, 0, 4}}) {
      std::vector<float> x = rounded(dt, randomFloats(size_t(c.rows * c.width), -5, 5, 8));
      std::vector<float> want;
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t i = 0; i < c.count; ++i)
          want.push_back(x[size_t(r * c.width + c.offset + i)]);
      const void *dx = upload(dt, x);
      void *dy = garbage(want.size() * 4);
      ASSERT_OK(ops_->copyColumns(dx, dy, dt, c.rows, c.width, c.offset, c.count));
      expectSameBits(fetch(dt, dy, want.size()), want,
                     std::string("copyColumns ") + dtypeName(dt) + " [" + std::to_string(c.offset) +
                         ", +" + std::to_string(c.count) + ") of " + std::to_string(c.width));
    }
  }
}

/// The rope of DeviceOps.h on the host: x [rows, heads * headDim] at `positions`.
void ropeReference(const std::vector<float> &x, const std::vector<int64_t> &positions, DType dt,
                   int64_t heads, int64_t headDim, int64_t rotaryDim, double theta,
                   const std::vector<float> &factors, bool interleaved, std::vector<double> &want,
                   std::vector<double> &allowed) {
  const int64_t width = heads * headDim, half = rotaryDim / 2;
  want.assign(x.size(), 0.0);
  allowed.assign(x.size(), 0.0);
  for (size_t r = 0; r < positions.size(); ++r)
    for (int64_t h = 0; h < heads; ++h) {
      const size_t base = r * size_t(width) + size_t(h * headDim);
      for (int64_t i = 0; i < headDim; ++i) {
        want[base + size_t(i)] = x[base + size_t(i)];
        allowed[base + size_t(i)] = 0.0;
      }
      for (int64_t c = 0; c < half; ++c) {
        const double factor = factors.empty() ? 1.0 : double(factors[size_t(c)]);
        const float freq =
            float(1.0 / (std::pow(theta, double(float(2 * c) / float(rotaryDim))) * factor));
        const float angle = float(positions[r]) * freq;
        const float co = roundTo(float(std::cos(double(angle))), dt);
        const float si = roundTo(float(std::sin(double(angle))), dt);
        const size_t i0 = base + size_t(interleaved ? 2 * c : c);
        const size_t i1 = base + size_t(interleaved ? 2 * c + 1 : c + half);
        const float x0 = x[i0], x1 = x[i1];
        want[i0] = roundTo(roundTo(x0 * co, dt) - roundTo(x1 * si, dt), dt);
        want[i1] = roundTo(roundTo(x1 * co, dt) + roundTo(x0 * si, dt), dt);
        // cos and sin on the GPU may differ in the last f32 bit: one step of the rounding of C
        // or S, of the products and of the result.
        allowed[i0] = allowed[i1] = tolerance(dt) * (std::fabs(x0) + std::fabs(x1)) + 1e-6;
      }
    }
}

TEST_F(CudaDeviceOpsTest, RopeNeoxInterleavedAndPartial) {
  struct Case {
    int64_t heads, headDim, rotaryDim;
    double theta;
    bool interleaved;
    bool factors = false; // Llama 3-like frequency divisors, 1 .. 8
  };
  const std::vector<int64_t> positions = {0, 1, 17, 4095, 40000, 131071, 3};
  const int64_t rows = int64_t(positions.size());
  const auto *dpos = static_cast<const int64_t *>(upload(positions.data(), positions.size() * 8));
  for (DType dt : kAllTypes) {
    for (Case c : {Case{4, 64, 64, 10000.0, false}, Case{3, 128, 32, 1e6, false},
                   Case{2, 80, 40, 500000.0, false}, Case{2, 64, 64, 10000.0, true},
                   Case{3, 96, 48, 10000.0, true}, Case{2, 16, 0, 10000.0, false},
                   Case{4, 64, 64, 500000.0, true, true}, Case{2, 128, 128, 500000.0, false, true}}) {
      for (bool inPlace : {false, true}) {
        const std::string what =
            std::string("rope ") + dtypeName(dt) + " heads=" + std::to_string(c.heads) +
            " head_dim=" + std::to_string(c.headDim) +
            " rotary_dim=" + std::to_string(c.rotaryDim) +
            (c.interleaved ? " interleaved" : " neox") + (c.factors ? " factors" : "") +
            (inPlace ? " in place" : "");
        const size_t n = size_t(rows * c.heads * c.headDim);
        std::vector<float> x = rounded(dt, randomFloats(n, -2, 2, uint32_t(9 + c.headDim)));
        std::vector<float> factors;
        for (int64_t p = 0; c.factors && p < c.rotaryDim / 2; ++p)
          factors.push_back(1.0f + 7.0f * float(p) / float(c.rotaryDim / 2));
        const auto *dfactors = factors.empty() ? nullptr
                                               : static_cast<const float *>(upload(factors.data(), factors.size() * 4));
        std::vector<double> want, allowed;
        ropeReference(x, positions, dt, c.heads, c.headDim, c.rotaryDim, c.theta, factors,
                      c.interleaved, want, allowed);
        void *dx = upload(dt, x);
        void *dy = inPlace ? dx : garbage(n * 4);
        ASSERT_OK(ops_->rope(dx, dpos, dy, dt, rows, c.heads, c.headDim, c.rotaryDim, c.theta,
                             dfactors, c.interleaved));
        expectClose(fetch(dt, dy, n), want, allowed, what);
      }
    }
  }
}

// --- Linear -----------------------------------------------------------------------------------

TEST_F(CudaDeviceOpsTest, LinearMatchesTheRoundedReference) {
  struct Case {
    int64_t m, k, n;
    DType x, w, y;
    bool transposed, bias;
  };
  using D = DType;
  const Case cases[] = {
      {1, 64, 48, D::f32, D::f32, D::f32, false, false},
      {7, 33, 65, D::f32, D::f32, D::f32, true, true},
      {5, 128, 96, D::f16, D::f16, D::f16, true, true},
      {1, 200, 72, D::f16, D::f16, D::f16, false, false},
      {33, 257, 100, D::bf16, D::bf16, D::bf16, false, true},
      {3, 64, 40, D::f32, D::f16, D::f32, true, false},  // x converted to f16
      {4, 48, 24, D::f16, D::f32, D::f16, false, true},  // x to f32; f32 GEMM, then to f16
      {6, 80, 32, D::bf16, D::bf16, D::f32, true, true}, // f32 logits from bf16 operands
      {2, 40, 20, D::f16, D::bf16, D::bf16, false, false},
      {3, 0, 5, D::f16, D::f16, D::f16, false, true}, // an empty sum: the bias alone
      {0, 16, 8, D::f32, D::f32, D::f32, false, true},
  };
  uint32_t seed = 10;
  for (const Case &c : cases) {
    const std::string what = "linear " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                             std::to_string(c.n) + " x " + dtypeName(c.x) + " w " + dtypeName(c.w) +
                             " y " + dtypeName(c.y) + (c.transposed ? " transposed" : "") +
                             (c.bias ? " bias" : "");
    std::vector<float> x = rounded(c.x, randomFloats(size_t(c.m * c.k), -1, 1, ++seed));
    std::vector<float> w = rounded(c.w, randomFloats(size_t(c.k * c.n), -1, 1, ++seed));
    std::vector<float> bias = rounded(c.y, randomFloats(size_t(c.n), -2, 2, ++seed));
    std::vector<double> want(size_t(c.m * c.n)), allowed(want.size());
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double xv = roundTo(x[size_t(r * c.k + p)], c.w); // x in w's dtype
          const double wv = c.transposed ? w[size_t(j * c.k + p)] : w[size_t(p * c.n + j)];
          acc += xv * wv;
          mag += std::fabs(xv * wv);
        }
        const float product = roundTo(float(acc), c.y);
        const float result = c.bias ? roundTo(product + bias[size_t(j)], c.y) : product;
        want[size_t(r * c.n + j)] = result;
        // One step of each rounding to y's dtype, and f32 accumulation in another order.
        allowed[size_t(r * c.n + j)] =
            tolerance(c.y) * (std::fabs(product) + std::fabs(result)) + 3e-5 * mag + 1e-6;
      }
    const void *dx = upload(c.x, x), *dw = upload(c.w, w);
    const void *dbias = c.bias ? upload(c.y, bias) : nullptr;
    void *dy = garbage(std::max<size_t>(want.size(), 1) * 4);
    if (llvm::Error e = ops_->linear(dx, c.x, dw, c.w, c.transposed, dbias, dy, c.y, c.m, c.k, c.n))
      FAIL() << what << ": " << llvm::toString(std::move(e));
    expectClose(fetch(c.y, dy, want.size()), want, allowed, what);
  }
}

// --- Weights in blocks ------------------------------------------------------------------------
// The reference is kernels/quant's scalar code: quantizeRow makes the blocks, dequantizeRow (the
// format's definition, itself checked against ggml's layouts in the quant tests) decodes them.

TEST_F(CudaDeviceOpsTest, EmbedBlocksDequantizesBitForBitLikeTheCpu) {
  const int64_t vocab = 6, width = 512;
  const std::vector<int64_t> ids = {3, 0, 5, -4, 9, 3}; // out-of-range ids read the nearest row
  const auto *dids = static_cast<const int64_t *>(upload(ids.data(), ids.size() * 8));
  uint32_t seed = 300;
  for (const helm::quant::BlockFormatInfo &info : helm::quant::allBlockFormats()) {
    std::vector<char> blocks;
    std::vector<float> values;
    blockRows(info.format, vocab, width, seed += 10, blocks, values);
    const void *table = upload(blocks);
    for (DType out : kAllTypes) {
      const std::string what = "embed " + std::string(info.name) + " -> " + dtypeName(out);
      std::vector<float> want;
      for (int64_t id : ids) {
        const int64_t row = std::clamp<int64_t>(id, 0, vocab - 1);
        for (int64_t c = 0; c < width; ++c)
          want.push_back(roundTo(values[size_t(row * width + c)], out));
      }
      void *dy = garbage(want.size() * 4);
      if (llvm::Error e = ops_->embedBlocks(dids, table, blockDtypeCode(info.format), dy, out,
                                            int64_t(ids.size()), vocab, width))
        FAIL() << what << ": " << llvm::toString(std::move(e));
      expectSameBits(fetch(out, dy, want.size()), want, what);
    }
  }
}

// m up to 32 runs a GEMV (in launches of 8 rows of x); beyond, dequantized panels for cuBLAS on
// the tensor cores (f16 panels for f16 x, else TF32 products), where each weight and activation
// is rounded to 11 significant bits first (TF32 may truncate: 2^-10 each), so those results may
// be 2^-9 of the products' magnitudes further from the exact sum. The
// GEMV is the byte-load one, or under HELM_CUDA_QGEMV=staged the staged one where the weight's
// rows start on 16-byte boundaries (every format but q6_k at these K, q6_k at K = 16384) and the
// byte-load one elsewhere (q6_k's 210-byte blocks, a weight 2 bytes past an aligned address);
// K = 11008 and 16384 give a warp of the staged GEMV more than one stage, n = 5 and 9 a last step
// with fewer rows than it takes. Under HELM_CUDA_QGEMV=lanes q4_k weights at an aligned address
// run the q4_k GEMV: K = 256 and 768 leave some of a warp's 4 super-block slots idle, K = 11008
// and 16384 take it around its loop more than once (43 and 64 super-blocks), odd n leave a warp's
// second row past the end; the weight at +2 bytes falls back to the byte-load GEMV.
void CudaDeviceOpsTest::checkLinearInBlocks(uint32_t seed) {
  struct Case {
    int64_t m, k, n;
    DType x, y;
    bool bias;
    int64_t weightOffset; // bytes before the weight in its buffer
  };
  using D = DType;
  const Case cases[] = {
      {1, 512, 48, D::f32, D::f32, false, 0},  {3, 256, 33, D::f16, D::f16, true, 0},
      {8, 768, 20, D::bf16, D::f32, false, 0}, {13, 512, 40, D::f32, D::bf16, true, 0},
      {40, 256, 70, D::f32, D::f32, true, 0},  {33, 512, 17, D::f16, D::f32, false, 0},
      {2, 16384, 9, D::f32, D::f32, false, 0}, {1, 11008, 5, D::f16, D::f32, true, 0},
      {4, 512, 12, D::f32, D::f32, false, 2},
  };
  for (const helm::quant::BlockFormatInfo &info : helm::quant::allBlockFormats())
    for (const Case &c : cases) {
      const std::string what = "linear " + std::string(info.name) + " " + std::to_string(c.m) +
                               "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " x " +
                               dtypeName(c.x) + " y " + dtypeName(c.y) + (c.bias ? " bias" : "") +
                               (c.weightOffset ? " weight at +" + std::to_string(c.weightOffset)
                                               : std::string());
      std::vector<char> blocks;
      std::vector<float> w;
      blockRows(info.format, c.n, c.k, seed += 100, blocks, w);
      std::vector<float> x = rounded(c.x, randomFloats(size_t(c.m * c.k), -1, 1, ++seed));
      std::vector<float> bias = rounded(c.y, randomFloats(size_t(c.n), -2, 2, ++seed));
      std::vector<double> want(size_t(c.m * c.n)), allowed(want.size());
      for (int64_t r = 0; r < c.m; ++r)
        for (int64_t j = 0; j < c.n; ++j) {
          double acc = 0, mag = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const double product = double(x[size_t(r * c.k + p)]) * w[size_t(j * c.k + p)];
            acc += product;
            mag += std::fabs(product);
          }
          const float product = roundTo(float(acc), c.y);
          const float result = c.bias ? roundTo(product + bias[size_t(j)], c.y) : product;
          want[size_t(r * c.n + j)] = result;
          const double tensorCores = c.m > 32 ? 0x1p-9 : 0.0;
          allowed[size_t(r * c.n + j)] = tolerance(c.y) * (std::fabs(product) + std::fabs(result)) +
                                         (3e-5 + tensorCores) * mag + 1e-6;
        }
      blocks.insert(blocks.begin(), size_t(c.weightOffset), char(0x5a));
      const void *dx = upload(c.x, x);
      const void *dw = static_cast<const char *>(upload(blocks)) + c.weightOffset;
      const void *dbias = c.bias ? upload(c.y, bias) : nullptr;
      void *dy = garbage(want.size() * 4);
      if (llvm::Error e = ops_->linearBlocks(dx, c.x, dw, blockDtypeCode(info.format), dbias, dy,
                                             c.y, c.m, c.k, c.n))
        FAIL() << what << ": " << llvm::toString(std::move(e));
      expectClose(fetch(c.y, dy, want.size()), want, allowed, what);
    }
}

TEST_F(CudaDeviceOpsTest, LinearInBlocksMatchesTheDequantizedWeights) { checkLinearInBlocks(400); }

// The same with the staged GEMV (HELM_CUDA_QGEMV=staged, read when the ops are created).
TEST_F(CudaDeviceOpsTest, LinearInBlocksOnTheStagedGemvMatchesToo) {
  ops_.reset();
  ::setenv("HELM_CUDA_QGEMV", "staged", 1);
  auto ops = createCudaDeviceOps(*device_, helm::kernels::cudaKernelImage());
  ::unsetenv("HELM_CUDA_QGEMV");
  ASSERT_TRUE(bool(ops)) << llvm::toString(ops.takeError());
  ops_ = std::move(*ops);
  checkLinearInBlocks(900);
}

// The same with the q4_k lane GEMV (HELM_CUDA_QGEMV=lanes): the other formats on the byte-load one.
TEST_F(CudaDeviceOpsTest, LinearInBlocksOnTheLaneGemvMatchesToo) {
  // The ops fall back to the byte-load GEMV when the image lacks the lane kernel: this image must
  // have it, or the cases below would check the other kernel.
  auto module = device_->loadModule(helm::kernels::cudaKernelImage());
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  auto lanes = device_->getFunction(*module, "helm_cuda_qgemv_q4k");
  EXPECT_TRUE(bool(lanes)) << llvm::toString(lanes.takeError());
  device_->unloadModule(*module);
  ops_.reset();
  ::setenv("HELM_CUDA_QGEMV", "lanes", 1);
  auto ops = createCudaDeviceOps(*device_, helm::kernels::cudaKernelImage());
  ::unsetenv("HELM_CUDA_QGEMV");
  ASSERT_TRUE(bool(ops)) << llvm::toString(ops.takeError());
  ops_ = std::move(*ops);
  checkLinearInBlocks(1300);
}

TEST_F(CudaDeviceOpsTest, BlockCallsRefuseBadFormatsAndSizes) {
  void *buf = garbage(4096);
  const auto *ids = static_cast<const int64_t *>(buf);
  const int32_t q4k = blockDtypeCode(helm::quant::BlockFormat::q4_k);
  auto refusal = [](llvm::Error e) {
    std::string message = errorText(std::move(e));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  };
  EXPECT_NE(refusal(ops_->linearBlocks(buf, DType::f32, buf, int32_t(DType::f16), nullptr, buf,
                                       DType::f32, 1, 32, 4))
                .find("unsupported block dtype code 1"),
            std::string::npos);
  EXPECT_NE(refusal(ops_->linearBlocks(buf, DType::f32, buf, q4k, nullptr, buf, DType::f32, 1, 96,
                                       4))
                .find("96 weights per row are not whole q4_k blocks of 256"),
            std::string::npos);
  EXPECT_NE(refusal(ops_->embedBlocks(ids, buf, q4k, buf, DType::f32, 2, 0, 256)).find("vocab 0"),
            std::string::npos);
  EXPECT_NE(refusal(ops_->linearBlocks(buf, DType::f32, buf, q4k, nullptr, buf, DType::f32, -1,
                                       256, 4))
                .find("negative size"),
            std::string::npos);
  // Empty calls do nothing and succeed.
  EXPECT_FALSE(bool(ops_->linearBlocks(nullptr, DType::f32, nullptr, q4k, nullptr, nullptr,
                                       DType::f32, 0, 256, 4)));
}

// --- Stage inputs -----------------------------------------------------------------------------

TEST_F(CudaDeviceOpsTest, ConstantsAreCopiedOnceAndPositionsPerCall) {
  std::vector<float> host = randomFloats(100, -1, 1, 20);
  ASSERT_VALUE(first, ops_->constant(host.data(), int64_t(host.size() * 4)));
  ASSERT_VALUE(again, ops_->constant(host.data(), int64_t(host.size() * 4)));
  EXPECT_EQ(first, again);
  EXPECT_NE(first, static_cast<const void *>(host.data()));
  expectSameBits(fetch(DType::f32, first, host.size()), host, "constant");

  // Positions reach the kernels from a device copy; the host array may change after the call.
  const int64_t heads = 2, headDim = 32;
  std::vector<float> x = randomFloats(size_t(3 * heads * headDim), -1, 1, 21);
  const void *dx = upload(DType::f32, x);
  void *dy = garbage(x.size() * 4);
  for (std::vector<int64_t> positions :
       {std::vector<int64_t>{3, 1000, 7}, std::vector<int64_t>{50000, 0, 12}}) {
    ASSERT_VALUE(dpos, ops_->stagePositions(positions.data(), int64_t(positions.size())));
    EXPECT_NE(dpos, positions.data());
    ASSERT_OK(ops_->rope(dx, dpos, dy, DType::f32, 3, heads, headDim, headDim, 10000.0, nullptr, false));
    std::vector<double> want, allowed;
    ropeReference(x, positions, DType::f32, heads, headDim, headDim, 10000.0, {}, false, want, allowed);
    std::fill(positions.begin(), positions.end(), -1); // the copy was made at the call
    expectClose(fetch(DType::f32, dy, x.size()), want, allowed, "rope at stage positions");
  }
}

// --- Attention --------------------------------------------------------------------------------

struct AttentionGeometry {
  DType dtype = DType::f32;
  int64_t heads = 1, kvHeads = 1, headDim = 1;
  float scale = 1.0f;
  int64_t window = 0;
  int64_t layer = 1; // of 2: the cache's layers are kept apart
  float softcap = 0.0f;
};

/// The runtime's GPU-stage KV cache on `device`: pages of `pageTokens` positions, `devicePages`
/// of them on the device (the rest evicted to pinned host memory and streamed back).
std::unique_ptr<PagedKvCache> pagedCache(Device &device, int64_t layers, int32_t sequences,
                                         int64_t width, int64_t pageTokens = 128,
                                         int64_t devicePages = 1 << 16) {
  PagedKvOptions options;
  options.pageTokens = pageTokens;
  options.devicePages = devicePages;
  auto cache = PagedKvCache::create(device, layers, sequences, width, options);
  if (!cache) {
    ADD_FAILURE() << llvm::toString(cache.takeError());
    return nullptr;
  }
  return std::move(*cache);
}

/// The host's copy of what the cache holds: per sequence slot, K rows and V rows (f32).
using KvMirror = std::map<int32_t, std::pair<std::vector<float>, std::vector<float>>>;

/// Attention reference (DeviceOps.h): scores round(q.k * scale) to the dtype (soft-capped first
/// when g.softcap > 0: round(tanh(s / cap) * cap)), exact softmax,
/// output in double. `out` [batch, seq, heads * headDim].
std::vector<double> attentionReference(const AttentionGeometry &g, const KvMirror &mirror,
                                       const std::vector<int32_t> &slots,
                                       const std::vector<int64_t> &past, int64_t seq,
                                       const std::vector<float> &q) {
  const int64_t D = g.headDim, qWidth = g.heads * D, kvWidth = g.kvHeads * D;
  const int64_t group = g.heads / g.kvHeads;
  std::vector<double> out(size_t(int64_t(slots.size()) * seq * qWidth));
  for (size_t b = 0; b < slots.size(); ++b) {
    const auto &[K, V] = mirror.at(slots[b]);
    for (int64_t i = 0; i < seq; ++i)
      for (int64_t h = 0; h < g.heads; ++h) {
        const int64_t pos = past[b] + i, kvHead = h / group;
        const int64_t lo = g.window > 0 ? std::max<int64_t>(0, pos - g.window + 1) : 0;
        const float *qRow = q.data() + (int64_t(b) * seq + i) * qWidth + h * D;
        std::vector<double> score;
        for (int64_t t = lo; t <= pos; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(qRow[d]) * K[size_t(t * kvWidth + kvHead * D + d)];
          const float scaled = float(dot) * g.scale;
          score.push_back(roundTo(g.softcap > 0 ? float(std::tanh(double(scaled) / g.softcap) * g.softcap) : scaled,
                                  g.dtype));
        }
        const double m = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double &s : score)
          sum += (s = std::exp(s - m));
        double *o = out.data() + (int64_t(b) * seq + i) * qWidth + h * D;
        for (int64_t t = lo; t <= pos; ++t)
          for (int64_t d = 0; d < D; ++d)
            o[d] += score[size_t(t - lo)] / sum * V[size_t(t * kvWidth + kvHead * D + d)];
      }
  }
  return out;
}

class CudaDeviceOpsAttentionTest : public CudaDeviceOpsTest {
protected:
  /// One attention call of batch rows (slots[b], past[b]) with `seq` new random tokens each,
  /// checked against the reference (values in [-1, 1]); the mirror takes the new rows. Returns
  /// the output.
  std::vector<float> attend(const AttentionGeometry &g, KvCache &kv, KvMirror &mirror,
                            const std::vector<int32_t> &slots, const std::vector<int64_t> &past,
                            int64_t seq, uint32_t seed, const std::string &what) {
    const int64_t batch = int64_t(slots.size()), kvWidth = g.kvHeads * g.headDim;
    std::vector<float> q =
        rounded(g.dtype, randomFloats(size_t(batch * seq * g.heads * g.headDim), -1, 1, seed));
    std::vector<float> k =
        rounded(g.dtype, randomFloats(size_t(batch * seq * kvWidth), -1, 1, seed + 1000));
    std::vector<float> v =
        rounded(g.dtype, randomFloats(size_t(batch * seq * kvWidth), -1, 1, seed + 2000));
    return attendWith(g, kv, mirror, slots, past, seq, q, k, v, what);
  }

  /// attend() with given q, k and v (already rounded to the dtype).
  std::vector<float> attendWith(const AttentionGeometry &g, KvCache &kv, KvMirror &mirror,
                                const std::vector<int32_t> &slots, const std::vector<int64_t> &past,
                                int64_t seq, const std::vector<float> &q,
                                const std::vector<float> &k, const std::vector<float> &v,
                                const std::string &what) {
    const int64_t batch = int64_t(slots.size()), kvWidth = g.kvHeads * g.headDim;
    for (int64_t b = 0; b < batch; ++b) {
      auto &[K, V] = mirror[slots[size_t(b)]];
      EXPECT_EQ(int64_t(K.size()), past[size_t(b)] * kvWidth) << what << ": the test's bookkeeping";
      K.insert(K.end(), k.begin() + b * seq * kvWidth, k.begin() + (b + 1) * seq * kvWidth);
      V.insert(V.end(), v.begin() + b * seq * kvWidth, v.begin() + (b + 1) * seq * kvWidth);
    }
    DeviceAttentionCall call;
    call.layer = g.layer;
    call.q = upload(g.dtype, q);
    call.k = upload(g.dtype, k);
    call.v = upload(g.dtype, v);
    call.out = garbage(q.size() * 4);
    call.dtype = g.dtype;
    call.batch = batch;
    call.seq = seq;
    call.heads = g.heads;
    call.kvHeads = g.kvHeads;
    call.headDim = g.headDim;
    call.scale = g.scale;
    call.window = g.window;
    call.softcap = g.softcap;
    call.sequence = slots.data();
    call.past = past.data();
    if (llvm::Error e = ops_->attention(call, kv)) {
      ADD_FAILURE() << what << ": " << llvm::toString(std::move(e));
      return {};
    }
    std::vector<float> got = fetch(g.dtype, call.out, q.size());
    std::vector<double> want = attentionReference(g, mirror, slots, past, seq, q);
    // |v| <= 1 bounds every output. f16/bf16: a score's rounding may land one step apart (the
    // f32 dot products are summed in another order), which moves the softmax by about that step,
    // and the output is rounded once.
    const double bound = g.dtype == DType::f32 ? 2e-5 : g.dtype == DType::f16 ? 4e-3 : 2.5e-2;
    expectClose(got, want, std::vector<double>(want.size(), bound), what);
    return got;
  }
};

TEST_F(CudaDeviceOpsAttentionTest, ThesisSixTokenExample) {
  // One head of dimension 1: with q = 1 and scale 1 the scores are the keys themselves.
  const std::vector<float> scores = {2, 4, 1, 0, 1, 2}, values = {10, 30, 5, 2, 8, 12};
  double num = 0, den = 0;
  for (size_t t = 0; t < scores.size(); ++t) {
    num += std::exp(double(scores[t])) * values[t];
    den += std::exp(double(scores[t]));
  }
  const double expected = num / den; // 24.24...
  EXPECT_NEAR(expected, 24.2, 0.05);
  for (DType dt : {DType::f32, DType::f16}) {
    for (int64_t chunk : {int64_t(128), int64_t(2)}) {
      auto kvOwner = pagedCache(*device_, 2, 1, 1, chunk);
    PagedKvCache &kv = *kvOwner;
      AttentionGeometry g;
      g.dtype = dt;
      g.layer = 0;
      std::vector<int32_t> slot = {0};
      // The first five tokens, then the sixth as a decode step that sees all six.
      std::vector<float> ones(5, 1.0f);
      std::vector<float> k5(scores.begin(), scores.begin() + 5);
      std::vector<float> v5(values.begin(), values.begin() + 5);
      std::vector<float> v1 = {values[5]}, k1 = {scores[5]}, q1 = {1.0f};
      // Values up to 30 (attend()'s bounds are for |v| <= 1): checked here, f16 outputs to within
      // their rounding (steps of 1/64 above 16).
      const std::string what =
          std::string("six tokens ") + dtypeName(dt) + " chunk " + std::to_string(chunk);
      DeviceAttentionCall prefill;
      prefill.layer = 0;
      prefill.q = upload(dt, ones);
      prefill.k = upload(dt, k5);
      prefill.v = upload(dt, v5);
      prefill.out = garbage(5 * 4);
      prefill.dtype = dt;
      prefill.batch = 1;
      prefill.seq = 5;
      prefill.heads = prefill.kvHeads = prefill.headDim = 1;
      prefill.scale = 1.0f;
      const std::vector<int64_t> past0 = {0}, past5 = {5};
      prefill.sequence = slot.data();
      prefill.past = past0.data();
      ASSERT_OK(ops_->attention(prefill, kv));
      // Query i of the prefill sees tokens 0..i: its output is their softmax-weighted mean.
      std::vector<float> prefillOut = fetch(dt, prefill.out, 5);
      for (size_t i = 0; i < 5; ++i) {
        double n = 0, d = 0;
        for (size_t t = 0; t <= i; ++t) {
          n += std::exp(double(scores[t])) * values[t];
          d += std::exp(double(scores[t]));
        }
        EXPECT_NEAR(prefillOut[i], n / d, dt == DType::f32 ? 1e-4 : 0.02) << what << " query " << i;
      }
      DeviceAttentionCall decode = prefill;
      decode.q = upload(dt, q1);
      decode.k = upload(dt, k1);
      decode.v = upload(dt, v1);
      decode.out = garbage(4);
      decode.seq = 1;
      decode.past = past5.data();
      ASSERT_OK(ops_->attention(decode, kv));
      const float got = fetch(dt, decode.out, 1)[0];
      EXPECT_NEAR(got, expected, dt == DType::f32 ? 1e-4 : 0.02) << what;
      EXPECT_NEAR(got, 24.2, 0.1) << what;
    }
  }
}

TEST_F(CudaDeviceOpsAttentionTest, BatchRowsWithDifferentPasts) {
  for (DType dt : kAllTypes) {
    AttentionGeometry g;
    g.dtype = dt;
    g.heads = 4;
    g.kvHeads = 4;
    g.headDim = 64;
    g.scale = 1.0f / 8.0f;
    auto kvOwner = pagedCache(*device_, 2, 3, g.kvHeads * g.headDim);
    PagedKvCache &kv = *kvOwner;
    KvMirror mirror;
    const std::string name = std::string("batch of two ") + dtypeName(dt);
    // Slot 2 gets 37 tokens, slot 0 gets 150 (two chunks), each on its own.
    attend(g, kv, mirror, {2}, {0}, 37, 1, name + ": prefill slot 2");
    attend(g, kv, mirror, {0}, {0}, 150, 2, name + ": prefill slot 0");
    // Both rows at once, at their own positions: 4 tokens, then a decode step.
    attend(g, kv, mirror, {2, 0}, {37, 150}, 4, 3, name + ": 4 more tokens");
    attend(g, kv, mirror, {2, 0}, {41, 154}, 1, 4, name + ": decode");
    // Pages of 128 positions (both layers) were taken as needed: one for slot 2 (42 tokens), two
    // for slot 0 (155 tokens).
    EXPECT_EQ(kv.bytes(), 3 * PagedKvCache::pageBytes(2, g.kvHeads * g.headDim, 128));
  }
}

TEST_F(CudaDeviceOpsAttentionTest, GroupedQueryRatios) {
  struct Case {
    DType dtype;
    int64_t heads, kvHeads, headDim, prefill, next, chunk;
  };
  for (Case c : {Case{DType::f16, 8, 2, 128, 300, 1, 128}, // GQA 4, three chunks
                 Case{DType::bf16, 8, 1, 80, 130, 20, 64}, // GQA 8, head_dim not a multiple of 32
                 Case{DType::f32, 4, 1, 33, 100, 3, 128},  // GQA 4
                 Case{DType::f32, 2, 2, 256, 40, 2, 16},   // the largest head_dim
                 Case{DType::f16, 3, 3, 1, 20, 1, 8}}) {   // head_dim 1
    AttentionGeometry g;
    g.dtype = c.dtype;
    g.heads = c.heads;
    g.kvHeads = c.kvHeads;
    g.headDim = c.headDim;
    g.scale = 1.0f / std::sqrt(float(c.headDim));
    auto kvOwner = pagedCache(*device_, 2, 1, g.kvHeads * g.headDim, c.chunk);
    PagedKvCache &kv = *kvOwner;
    KvMirror mirror;
    const std::string name = std::string(dtypeName(c.dtype)) + " heads " + std::to_string(c.heads) +
                             "/" + std::to_string(c.kvHeads) + " head_dim " +
                             std::to_string(c.headDim);
    attend(g, kv, mirror, {0}, {0}, c.prefill, 11, name + ": prefill");
    attend(g, kv, mirror, {0}, {c.prefill}, c.next, 12, name + ": next");
    attend(g, kv, mirror, {0}, {c.prefill + c.next}, 1, 13, name + ": decode");
  }
}

TEST_F(CudaDeviceOpsAttentionTest, SlidingWindow) {
  for (DType dt : {DType::f32, DType::bf16}) {
    AttentionGeometry g;
    g.dtype = dt;
    g.heads = 4;
    g.kvHeads = 2;
    g.headDim = 32;
    g.scale = 0.25f;
    g.window = 16;
    auto kvOwner = pagedCache(*device_, 2, 2, g.kvHeads * g.headDim, 32);
    PagedKvCache &kv = *kvOwner;
    KvMirror mirror;
    const std::string name = std::string("window 16 ") + dtypeName(dt);
    attend(g, kv, mirror, {1}, {0}, 200, 21, name + ": prefill");
    attend(g, kv, mirror, {1}, {200}, 5, 22, name + ": 5 more");
    attend(g, kv, mirror, {1}, {205}, 1, 23, name + ": decode");
    // A window wider than the history sees everything.
    g.window = 1000;
    attend(g, kv, mirror, {1}, {206}, 2, 24, name + ": wide window");
  }
}

// Gemma 2's soft-capped scores: a scale of 4 spreads the scores to about ±30, the cap of 5 bends
// most of them (uncapped, the softmax would be far more peaked than the reference's).
TEST_F(CudaDeviceOpsAttentionTest, SoftCappedScores) {
  for (DType dt : {DType::f32, DType::f16}) {
    AttentionGeometry g;
    g.dtype = dt;
    g.heads = 4;
    g.kvHeads = 2;
    g.headDim = 64;
    g.scale = 4.0f;
    g.window = 24;
    g.softcap = 5.0f;
    auto kvOwner = pagedCache(*device_, 2, 2, g.kvHeads * g.headDim, 32);
    PagedKvCache &kv = *kvOwner;
    KvMirror mirror;
    const std::string name = std::string("soft cap 5 ") + dtypeName(dt);
    attend(g, kv, mirror, {0}, {0}, 70, 31, name + ": prefill");
    attend(g, kv, mirror, {0}, {70}, 1, 32, name + ": decode");
  }
}

TEST_F(CudaDeviceOpsAttentionTest, MoreSpansThanOneLaunchTakes) {
  // Pages of 2 and 1 tokens: 75 and 150+ spans, one launch each, carrying the online-softmax
  // state.
  for (int64_t chunk : {int64_t(2), int64_t(1)}) {
    for (DType dt : {DType::f32, DType::f16}) {
      AttentionGeometry g;
      g.dtype = dt;
      g.heads = 4;
      g.kvHeads = 2;
      g.headDim = 64;
      g.scale = 0.125f;
      auto kvOwner = pagedCache(*device_, 2, 2, g.kvHeads * g.headDim, chunk);
    PagedKvCache &kv = *kvOwner;
      KvMirror mirror;
      const std::string name = std::string("chunk ") + std::to_string(chunk) + " " + dtypeName(dt);
      attend(g, kv, mirror, {0}, {0}, 150, 31, name + ": prefill");
      attend(g, kv, mirror, {0, 1}, {150, 0}, 3, 32, name + ": batch with a new row");
      attend(g, kv, mirror, {0}, {153}, 1, 33, name + ": decode");
      // A window that leaves fewer spans than one launch takes.
      g.window = 40;
      attend(g, kv, mirror, {0}, {154}, 2, 34, name + ": windowed");
    }
  }
}

TEST_F(CudaDeviceOpsAttentionTest, AppendsWidenedRowsIntoTheCache) {
  AttentionGeometry g;
  g.dtype = DType::bf16;
  g.heads = 2;
  g.kvHeads = 2;
  g.headDim = 16;
  const int64_t width = g.kvHeads * g.headDim;
  auto kvOwner = pagedCache(*device_, 2, 1, width, 4);
    PagedKvCache &kv = *kvOwner;
  KvMirror mirror;
  attend(g, kv, mirror, {0}, {0}, 7, 41, "append: prefill");
  attend(g, kv, mirror, {0}, {7}, 3, 42, "append: more");
  ASSERT_OK(ops_->synchronize());
  // The cache's device rows are exactly the widened keys and values, span by span.
  std::vector<float> k, v;
  kv.forEachSpan(g.layer, 0, 0, 10, [&](const void *ksRows, const void *vsRows, int64_t, int64_t n) {
          auto *ks = static_cast<const float *>(ksRows);
          auto *vs = static_cast<const float *>(vsRows);
    std::vector<float> hk(size_t(n * width)), hv(hk.size());
    for (auto [host, dev] : {std::pair{&hk, ks}, std::pair{&hv, vs}})
      if (llvm::Error e =
              device_->copyToHost(host->data(), dev, host->size() * 4, Stream::compute, false))
        ADD_FAILURE() << llvm::toString(std::move(e));
    k.insert(k.end(), hk.begin(), hk.end());
    v.insert(v.end(), hv.begin(), hv.end());
  });
  expectSameBits(k, mirror[0].first, "cached keys");
  expectSameBits(v, mirror[0].second, "cached values");
}

// --- Refusals ---------------------------------------------------------------------------------

TEST_F(CudaDeviceOpsTest, RefusesBadCallsWithOneLineAndAcceptsEmptyOnes) {
  auto expectRefusal = [](llvm::Error e, const std::string &fragment) {
    std::string message = errorText(std::move(e));
    EXPECT_NE(message.find(fragment), std::string::npos) << "'" << message << "'";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };
  void *buf = garbage(4096);
  const auto *ids = static_cast<const int64_t *>(buf);
  expectRefusal(ops_->add(buf, buf, buf, DType(7), 4), "unsupported dtype code 7");
  expectRefusal(ops_->swiglu(buf, buf, buf, DType::f32, -1), "negative size");
  expectRefusal(ops_->geglu(buf, buf, buf, DType::f32, -1), "negative size");
  expectRefusal(ops_->scale(buf, buf, DType(5), 4, 2.0f), "unsupported dtype code 5");
  expectRefusal(ops_->softcap(buf, buf, DType::f32, 4, 0.0f), "cap");
  expectRefusal(ops_->rmsNorm(buf, buf, buf, DType::f16, -2, 4, 1e-6f), "negative size");
  expectRefusal(ops_->embed(ids, buf, buf, DType::f32, 2, 0, 4), "vocab 0");
  expectRefusal(ops_->copyColumns(buf, buf, DType::f32, 2, 10, 8, 3), "outside");
  expectRefusal(ops_->rope(buf, ids, buf, DType::f32, 1, 2, 16, 15, 10000.0, nullptr, false), "even");
  expectRefusal(ops_->rope(buf, ids, buf, DType::f32, 1, 2, 16, 32, 10000.0, nullptr, false), "even");
  expectRefusal(ops_->rope(buf, ids, buf, DType::f32, 1, 2, 16, 16, -1.0, nullptr, false), "theta");
  expectRefusal(ops_->convert(buf, DType::f32, buf, DType::f16, 8), "in place");
  expectRefusal(
      ops_->linear(buf, DType::f32, buf, DType(3), false, nullptr, buf, DType::f32, 1, 1, 1),
      "unsupported dtype code 3");

  // Zero sizes are no-ops, whatever the pointers.
  ASSERT_OK(ops_->add(nullptr, nullptr, nullptr, DType::f16, 0));
  ASSERT_OK(ops_->swiglu(nullptr, nullptr, nullptr, DType::f32, 0));
  ASSERT_OK(ops_->geglu(nullptr, nullptr, nullptr, DType::f32, 0));
  ASSERT_OK(ops_->scale(nullptr, nullptr, DType::bf16, 0, 2.0f));
  ASSERT_OK(ops_->softcap(nullptr, nullptr, DType::f16, 0, 30.0f));
  ASSERT_OK(ops_->convert(nullptr, DType::f32, nullptr, DType::bf16, 0));
  ASSERT_OK(ops_->rmsNorm(nullptr, nullptr, nullptr, DType::f32, 0, 64, 1e-6f));
  ASSERT_OK(ops_->embed(nullptr, nullptr, nullptr, DType::f32, 0, 10, 8));
  ASSERT_OK(ops_->copyColumns(nullptr, nullptr, DType::f32, 0, 8, 0, 8));
  ASSERT_OK(ops_->rope(nullptr, nullptr, nullptr, DType::f32, 0, 2, 16, 16, 10000.0, nullptr, false));
  ASSERT_OK(ops_->linear(nullptr, DType::f32, nullptr, DType::f32, false, nullptr, nullptr,
                         DType::f32, 0, 8, 8));

  // Attention: geometry the kernel or the cache cannot take.
  auto kvOwner = pagedCache(*device_, 2, 1, 2 * 300);
    PagedKvCache &kv = *kvOwner;
  const int32_t slot = 0;
  const int64_t past = 0;
  DeviceAttentionCall call;
  call.q = call.k = call.v = buf;
  call.out = buf;
  call.batch = 1;
  call.seq = 1;
  call.heads = 2;
  call.kvHeads = 2;
  call.headDim = 300;
  call.sequence = &slot;
  call.past = &past;
  expectRefusal(ops_->attention(call, kv), "headDim 300");
  call.headDim = 64;
  call.heads = 3;
  expectRefusal(ops_->attention(call, kv), "not a positive multiple of kvHeads");
  call.heads = 2;
  expectRefusal(ops_->attention(call, kv), "does not match the KV cache");
  {
    // Rows of the cache's width (2 x 64), but a layer the cache does not have.
    auto matchingOwner = pagedCache(*device_, 2, 1, 2 * 64);
    PagedKvCache &matching = *matchingOwner;
    call.layer = 2;
    expectRefusal(ops_->attention(call, matching), "layer 2 with rows of 128 floats");
  }
  call.layer = 0;
  call.dtype = DType(9);
  expectRefusal(ops_->attention(call, kv), "unsupported dtype code 9");
  call.dtype = DType::f32;
  call.seq = 0;
  auto fitsOwner = pagedCache(*device_, 1, 1, 2 * 64);
    PagedKvCache &fits = *fitsOwner;
  ASSERT_OK(ops_->attention(call, fits));
  EXPECT_EQ(fits.bytes(), 0u); // nothing reserved for nothing
  ASSERT_OK(ops_->synchronize());
}

TEST_F(CudaDeviceOpsAttentionTest, StreamsEvictedPagesBackForAttention) {
  // Two device pages of 8 positions: as the sequence grows page by page (the last layer writes,
  // so pages fill), the oldest full pages go to host memory; attention streams them back through
  // the staging buffers, one page ahead, and must still see every position.
  for (DType dt : {DType::f32, DType::f16}) {
    AttentionGeometry g;
    g.dtype = dt;
    g.heads = 4;
    g.kvHeads = 2;
    g.headDim = 32;
    g.scale = 1.0f / std::sqrt(32.0f);
    auto owner = pagedCache(*device_, 2, 1, g.kvHeads * g.headDim, 8, 2);
    ASSERT_TRUE(owner);
    PagedKvCache &kv = *owner;
    KvMirror mirror;
    const std::string name = std::string("evicted pages ") + dtypeName(dt);
    int64_t past = 0;
    for (int step = 0; step < 6; ++step, past += 8)
      attend(g, kv, mirror, {0}, {past}, 8, 10 + step, name + ": page " + std::to_string(step));
    for (int step = 0; step < 3; ++step, ++past)
      attend(g, kv, mirror, {0}, {past}, 1, 20 + step, name + ": decode");
    ASSERT_OK(ops_->synchronize());
    PagingCounters paging = kv.paging();
    EXPECT_EQ(paging.devicePagesPeak, 2);
    EXPECT_EQ(paging.evicted, 5u); // pages 0..4 (51 positions: pages 0..6, the last two stay)
    EXPECT_GT(paging.prefetched, 0u);
  }
}

} // namespace
