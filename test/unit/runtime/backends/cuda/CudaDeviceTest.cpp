//===- CudaDeviceTest.cpp - the cuda device and kernels/cuda on a real GPU ----------===//
//
// Needs a GPU: without one (cudaAvailable() false) every test checks that the device refuses
// cleanly, then skips with the reason (ctest reports it "Skipped"). With one: the byte budget and
// its error message, pinned memory, sync and async copies with exact link counters, event
// ordering across the two streams, module loading (and bad images), every kernel of
// cudaKernelImage() in f32, f16 and bf16 against host references computed in double, and cuBLAS
// SGEMM/SGEMV against double references.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/Cublas.h"
#include "kernels/cuda/CudaKernels.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "test/unit/DeviceTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace helm::rt;
using helm::test::errorText;
using helm::test::randomFloats;

namespace {

/// cuBLAS's functions (a device exists, so the library is loaded).
const CublasApi &blas() {
  auto api = cublasApi();
  if (!api) {
    ADD_FAILURE() << llvm::toString(api.takeError());
    static const CublasApi none;
    return none;
  }
  return *api;
}

// cuBLAS is loaded with dlopen (Cublas.h), which needs no GPU: the symbols resolve to the
// library of the headers helm-rt was compiled with.
TEST(CublasLoading, ResolvesEveryFunctionOfTheHeadersVersion) {
  auto api = cublasApi();
  ASSERT_TRUE(bool(api)) << llvm::toString(api.takeError());
  EXPECT_NE(api->library.find("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)), std::string::npos)
      << api->library;
  // (A table with a null entry is never returned: loadCublas refuses it, tested below. What can
  // go wrong is a pointer to another function or version: the calls below see that.)
  int major = -1, minor = -1;
  ASSERT_EQ(api->getProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(api->getProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  EXPECT_GE(minor, 0);
  EXPECT_NE(std::string(api->statusString(CUBLAS_STATUS_NOT_INITIALIZED)).find("not initialized"),
            std::string::npos);
  // A second call gives the same table.
  auto again = cublasApi();
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(&*again, &*api);
}

TEST(CublasLoading, NamesWhatItTriedOrWhatIsMissing) {
  // Nothing at the paths: each is named, and what to do about it.
  auto none = loadCublas({"/nonexistent/libcublas.so.13", "/also/not/here/libcublas.so.13"});
  ASSERT_FALSE(bool(none));
  const std::string error = llvm::toString(none.takeError());
  EXPECT_NE(error.find("cannot be loaded"), std::string::npos) << error;
  EXPECT_NE(error.find("/nonexistent/libcublas.so.13"), std::string::npos) << error;
  EXPECT_NE(error.find("/also/not/here/libcublas.so.13"), std::string::npos) << error;
  EXPECT_NE(error.find("LD_LIBRARY_PATH"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  // A library that is not cuBLAS: the first function it lacks.
  auto foreign = loadCublas({"libm.so.6"});
  ASSERT_FALSE(bool(foreign));
  const std::string lacks = llvm::toString(foreign.takeError());
  EXPECT_NE(lacks.find("libm.so.6 lacks cublasCreate_v2"), std::string::npos) << lacks;
  // The default candidates start with the headers' soname.
  ASSERT_FALSE(defaultCublasCandidates().empty());
  EXPECT_EQ(defaultCublasCandidates().front(), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
}

constexpr uint64_t MiB = uint64_t(1) << 20;
constexpr uint64_t GiB = uint64_t(1) << 30;


/// Whether `message` is loadModule's complaint about an image the CUDA loader rejected.
bool isLoaderError(const std::string &message) {
  return message.find("cuda: cudaLibraryLoadData") == 0 ||
         message.find("cuda: loading the module onto the GPU") == 0 ||
         message.find("GPU code image has no kernels") != std::string::npos;
}



// --- Element types: f32 and the two 16-bit variants (kernel names NAME, NAME_f16, NAME_bf16) ----

enum class Elem { f32, f16, bf16 };
struct ElemType {
  Elem elem;
  const char *suffix;
  size_t size;
  double tolerance; // relative error allowed on a result: f32 compute + one rounding to the type
  double slack;     // absolute error allowed on top (half the type's smallest subnormal step)
};
const ElemType kF32{Elem::f32, "", 4, 1e-5, 1e-45}, kF16{Elem::f16, "_f16", 2, 1.5e-3, 3e-8},
    kBf16{Elem::bf16, "_bf16", 2, 1e-2, 1e-40};
const ElemType kAllTypes[] = {kF32, kF16, kBf16};

std::vector<char> encode(const ElemType &t, const std::vector<float> &values) {
  std::vector<char> bytes(values.size() * t.size);
  for (size_t i = 0; i < values.size(); ++i) {
    if (t.elem == Elem::f32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    } else if (t.elem == Elem::f16) {
      __half h = __float2half_rn(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      __nv_bfloat16 b = __float2bfloat16_rn(values[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  }
  return bytes;
}

std::vector<float> decode(const ElemType &t, const std::vector<char> &bytes) {
  std::vector<float> values(bytes.size() / t.size);
  for (size_t i = 0; i < values.size(); ++i) {
    if (t.elem == Elem::f32) {
      std::memcpy(&values[i], bytes.data() + 4 * i, 4);
    } else if (t.elem == Elem::f16) {
      __half h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      values[i] = __half2float(h);
    } else {
      __nv_bfloat16 b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      values[i] = __bfloat162float(b);
    }
  }
  return values;
}

/// `values` rounded to the type (what the kernel sees as input).
std::vector<float> roundTo(const ElemType &t, const std::vector<float> &values) {
  return decode(t, encode(t, values));
}

/// got[i] within tolerance * scale[i] + slack of want[i].
void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const std::vector<double> &scale, double tolerance, double slack,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double allowed = tolerance * scale[i] + slack;
    if (!(std::fabs(double(got[i]) - want[i]) <= allowed)) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i]
                    << " (allowed error " << allowed << ")";
      if (++reported == 5)
        return;
    }
  }
}

std::vector<double> absOf(const std::vector<double> &v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = std::fabs(v[i]);
  return out;
}

// --- Fixtures ---------------------------------------------------------------------------------

class CudaDeviceTest : public testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!cudaAvailable(&reason))
      GTEST_SKIP() << reason;
    ASSERT_VALUE(device, CudaDevice::create(options()));
    device_ = std::move(device);
  }
  void TearDown() override {
    for (void *p : buffers_)
      device_->free(p);
  }
  virtual CudaOptions options() const { return {}; }

  /// A device buffer holding `bytes` (freed after the test).
  void *upload(const void *host, size_t bytes) {
    auto p = device_->allocate(bytes, "test data");
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
  void *deviceBuffer(size_t bytes) {
    std::vector<char> zeros(bytes, 0);
    return upload(zeros);
  }
  /// `bytes` from the device once the compute stream's work is done.
  std::vector<char> download(const void *p, size_t bytes) {
    std::vector<char> host(bytes);
    if (llvm::Error e = device_->copyToHost(host.data(), p, bytes, Stream::compute, false))
      ADD_FAILURE() << llvm::toString(std::move(e));
    return host;
  }

  std::unique_ptr<CudaDevice> device_;
  std::vector<void *> buffers_;
};

class CudaBudgetTest : public CudaDeviceTest {
protected:
  CudaOptions options() const override {
    CudaOptions o;
    o.budgetBytes = 64 * MiB;
    return o;
  }
};

/// The device with cudaKernelImage() loaded.
class CudaKernelTest : public CudaDeviceTest {
protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_VALUE(module, device_->loadModule(helm::kernels::cudaKernelImage()));
    module_ = module;
  }
  /// Launches `name` on the compute stream; `args` point at the argument values.
  void launch(const std::string &name, CudaDim grid, CudaDim block,
              std::initializer_list<void *> args) {
    ASSERT_VALUE(fn, device_->getFunction(module_, name));
    ASSERT_OK(device_->launchKernel(
        fn, grid, block, llvm::ArrayRef<void *>(args.begin(), args.end()), 0, Stream::compute));
    ASSERT_OK(device_->synchronizeStream(Stream::compute));
  }
  CudaDevice::Module module_ = nullptr;
};

// --- The device ---------------------------------------------------------------------------------

// Runs with or without a GPU: without one, creating the device is an error that says why (never a
// crash, whatever the machine lacks: the driver, a device); with one, it is a cuda device.
TEST(CudaDevice, CreatesOrRefusesCleanly) {
  std::string reason;
  bool available = cudaAvailable(&reason);
  auto device = createCudaDevice({});
  if (available) {
    ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
    EXPECT_EQ((*device)->kind(), HELM_DEVICE_CUDA);
    return;
  }
  ASSERT_FALSE(bool(device));
  std::string message = llvm::toString(device.takeError());
  EXPECT_NE(message.find("CUDA"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST_F(CudaDeviceTest, DescribesItselfAndOwnsTwoStreamsAndCublas) {
  EXPECT_EQ(device_->kind(), HELM_DEVICE_CUDA);
  EXPECT_EQ(device_->ordinal(), 0);
  EXPECT_EQ(device_->describe().rfind("cuda 0 (", 0), 0u) << device_->describe();
  RecordProperty("device", device_->describe());
  std::printf("%s\n", device_->describe().c_str());
  EXPECT_GT(device_->capacity(), 0u);
  EXPECT_EQ(device_->bytesInUse(), 0u);
  EXPECT_NE(device_->cudaStream(Stream::compute), device_->cudaStream(Stream::copy));
  ASSERT_NE(device_->cublas(), nullptr);
  cudaStream_t bound = nullptr;
  ASSERT_EQ(blas().getStream(device_->cublas(), &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, device_->cudaStream(Stream::compute));
}

TEST_F(CudaDeviceTest, CreateCudaDeviceGivesTheCudaKind) {
  ASSERT_VALUE(device, createCudaDevice({}));
  EXPECT_EQ(device->kind(), HELM_DEVICE_CUDA);
}

TEST_F(CudaDeviceTest, DefaultBudgetIsFreeMemoryMinusReserve) {
  size_t freeBytes = 0, totalBytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&freeBytes, &totalBytes), cudaSuccess);
  CudaOptions o;
  o.reserveBytes = 1 * GiB;
  ASSERT_VALUE(device, CudaDevice::create(o));
  // Free memory moves a little between the two readings (the new device's own handles).
  EXPECT_LE(device->capacity(), freeBytes - 1 * GiB + 64 * MiB);
  EXPECT_GE(device->capacity(), freeBytes - 1 * GiB - 512 * MiB);

  o.reserveBytes = totalBytes + 1;
  std::string message = errorText(CudaDevice::create(o));
  EXPECT_NE(message.find("leaves no device memory"), std::string::npos) << message;

  CudaOptions big;
  big.budgetBytes = totalBytes + 1 * GiB;
  message = errorText(CudaDevice::create(big));
  EXPECT_NE(message.find("is more than the GPU's"), std::string::npos) << message;

  CudaOptions bad;
  bad.ordinal = 99;
  message = errorText(CudaDevice::create(bad));
  EXPECT_NE(message.find("no GPU with ordinal 99"), std::string::npos) << message;
}

TEST_F(CudaBudgetTest, AllocatesWithinTheBudgetAndNamesWhatFailed) {
  EXPECT_EQ(device_->capacity(), 64 * MiB);
  ASSERT_VALUE(weights, device_->allocate(16 * MiB, "weights"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weights) % 256, 0u);
  EXPECT_EQ(device_->bytesInUse(), 16 * MiB);
  ASSERT_VALUE(tiny, device_->allocate(1, "a flag")); // counted as one 256-byte granule
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tiny) % 256, 0u);
  EXPECT_EQ(device_->bytesInUse(), 16 * MiB + 256);

  std::string message = errorText(device_->allocate(60 * MiB, "activations of stage 2"));
  EXPECT_EQ(message, "cuda: cannot allocate 60.0 MiB for activations of stage 2: 48.0 MiB of "
                     "64.0 MiB left");
  EXPECT_EQ(device_->bytesInUse(), 16 * MiB + 256);

  ASSERT_VALUE(rest, device_->allocate(48 * MiB - 256, "the rest"));
  EXPECT_EQ(device_->bytesInUse(), 64 * MiB);
  message = errorText(device_->allocate(1, "one more byte"));
  EXPECT_EQ(message, "cuda: cannot allocate 1 B for one more byte: 0 B of 64.0 MiB left");
  // A size whose rounding to granules would wrap (a corrupt size) is refused, not wrapped to 0.
  message = errorText(device_->allocate(UINT64_MAX, "a corrupt size"));
  EXPECT_NE(message.find("cannot allocate"), std::string::npos) << message;
  EXPECT_EQ(device_->bytesInUse(), 64 * MiB);

  device_->free(weights);
  device_->free(tiny);
  device_->free(rest);
  device_->free(nullptr);
  int notOurs = 0;
  device_->free(&notOurs);
  EXPECT_EQ(device_->bytesInUse(), 0u);
  EXPECT_EQ(device_->peakBytesInUse(), 64 * MiB);
  ASSERT_VALUE(again, device_->allocate(64 * MiB, "everything"));
  device_->free(again);
}

TEST_F(CudaDeviceTest, SyncCopiesRoundTripAndAreCounted) {
  const size_t bytes = 1 * MiB + 3;
  std::vector<char> data(bytes);
  std::mt19937 rng(7);
  for (char &c : data)
    c = char(rng());
  ASSERT_VALUE(p, device_->allocate(bytes, "copy test"));
  DeviceCounters before = device_->counters();
  ASSERT_OK(device_->copyToDevice(p, data.data(), bytes, Stream::compute, false));
  std::vector<char> back(bytes, 0);
  ASSERT_OK(device_->copyToHost(back.data(), p, bytes, Stream::copy, false));
  EXPECT_EQ(back, data);
  DeviceCounters d = device_->counters() - before;
  EXPECT_EQ(d.hostToDeviceBytes, bytes);
  EXPECT_EQ(d.deviceToHostBytes, bytes);
  EXPECT_EQ(d.hostToDeviceTransfers, 1u);
  EXPECT_EQ(d.deviceToHostTransfers, 1u);
  device_->free(p);
}

TEST_F(CudaDeviceTest, AsyncCopiesFromPinnedMemoryAreOrderedByEvents) {
  const size_t chunk = 4 * MiB, chunks = 4, bytes = chunk * chunks;
  ASSERT_VALUE(in, device_->allocateHost(bytes));
  ASSERT_VALUE(out, device_->allocateHost(bytes));
  auto *src = static_cast<uint32_t *>(in);
  for (size_t i = 0; i < bytes / 4; ++i)
    src[i] = uint32_t(i * 2654435761u);
  std::memset(out, 0, bytes);
  ASSERT_VALUE(p, device_->allocate(bytes, "async copy test"));
  DeviceCounters before = device_->counters();

  // Upload in chunks on the copy stream; the compute stream downloads after the event.
  for (size_t c = 0; c < chunks; ++c)
    ASSERT_OK(device_->copyToDevice(static_cast<char *>(p) + c * chunk,
                                    static_cast<char *>(in) + c * chunk, chunk, Stream::copy,
                                    true));
  ASSERT_VALUE(uploaded, device_->createEvent());
  ASSERT_OK(device_->recordEvent(uploaded, Stream::copy));
  ASSERT_OK(device_->streamWaitEvent(Stream::compute, uploaded));
  ASSERT_OK(device_->copyToHost(out, p, bytes, Stream::compute, true));
  ASSERT_VALUE(downloaded, device_->createEvent());
  ASSERT_OK(device_->recordEvent(downloaded, Stream::compute));
  ASSERT_OK(device_->synchronizeEvent(downloaded));
  EXPECT_EQ(std::memcmp(in, out, bytes), 0);

  DeviceCounters d = device_->counters() - before;
  EXPECT_EQ(d.hostToDeviceBytes, bytes);
  EXPECT_EQ(d.deviceToHostBytes, bytes);
  EXPECT_EQ(d.hostToDeviceTransfers, chunks);
  EXPECT_EQ(d.deviceToHostTransfers, 1u);

  device_->destroyEvent(uploaded);
  device_->destroyEvent(downloaded);
  std::string message = errorText(device_->recordEvent(uploaded, Stream::copy));
  EXPECT_NE(message.find("unknown event"), std::string::npos) << message;
  ASSERT_OK(device_->synchronizeStream(Stream::copy));
  device_->free(p);
  device_->freeHost(in);
  device_->freeHost(out);
}

// --- Modules and launches ------------------------------------------------------------------------

TEST_F(CudaDeviceTest, BadModuleImagesAreErrors) {
  std::string message = errorText(device_->loadModule({}));
  EXPECT_NE(message.find("empty GPU code image"), std::string::npos) << message;

  const char text[] = "this is not GPU code";
  message = errorText(device_->loadModule(llvm::ArrayRef<char>(text, sizeof text - 1)));
  EXPECT_TRUE(isLoaderError(message)) << message;
  std::printf("bad PTX text: %s\n", message.c_str());

  std::vector<char> fakeElf(4096, 0);
  const char elfMagic[4] = {0x7f, 'E', 'L', 'F'};
  std::memcpy(fakeElf.data(), elfMagic, 4);
  message = errorText(device_->loadModule(fakeElf));
  EXPECT_EQ(message, "cuda: not a 64-bit ELF image (a cubin is ELF64)");
  fakeElf[4] = 2; // ELF64, but no valid header otherwise: the loader's own complaint
  message = errorText(device_->loadModule(fakeElf));
  EXPECT_TRUE(isLoaderError(message)) << message;
  std::printf("bad ELF: %s\n", message.c_str());
  const uint64_t shoff = 8192;
  const uint16_t shentsize = 64, shnum = 2;
  std::memcpy(&fakeElf[0x28], &shoff, 8);
  std::memcpy(&fakeElf[0x3A], &shentsize, 2);
  std::memcpy(&fakeElf[0x3C], &shnum, 2);
  message = errorText(device_->loadModule(fakeElf));
  EXPECT_EQ(message, "cuda: truncated ELF image: it needs 8320 bytes, 4096 given");

  // A truncated fatbin: its header's size is checked before the loader trusts it.
  llvm::ArrayRef<char> image = helm::kernels::cudaKernelImage();
  message = errorText(device_->loadModule(image.take_front(image.size() / 3)));
  EXPECT_EQ(message, "cuda: truncated fatbin image: it needs " + std::to_string(image.size()) +
                         " bytes, " + std::to_string(image.size() / 3) + " given");

  // The device is still usable, and the real image loads.
  ASSERT_VALUE(module, device_->loadModule(image));
  message = errorText(device_->getFunction(module, "no_such_kernel"));
  EXPECT_NE(message.find("cudaLibraryGetKernel(no_such_kernel)"), std::string::npos) << message;
  ASSERT_VALUE(fn, device_->getFunction(module, "helm_cuda_add"));
  device_->unloadModule(module);
  // The module's kernels are gone with it.
  message = errorText(device_->getFunction(module, "helm_cuda_add"));
  EXPECT_NE(message.find("the module is not loaded"), std::string::npos) << message;
  int64_t n = 0;
  void *none = nullptr;
  message = errorText(device_->launchKernel(fn, {1}, {32}, {&none, &none, &none, &n}));
  EXPECT_NE(message.find("cannot launch a kernel that getFunction did not return"),
            std::string::npos)
      << message;
}

TEST_F(CudaKernelTest, LaunchErrorsAreErrorsAndTheDeviceSurvives) {
  ASSERT_VALUE(fn, device_->getFunction(module_, "helm_cuda_add"));
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  void *da = upload(a.data(), 12), *db = upload(b.data(), 12), *dy = deviceBuffer(12);
  int64_t n = 3;

  std::string message = errorText(device_->launchKernel(fn, {1}, {2048}, {&da, &db, &dy, &n}));
  EXPECT_NE(message.find("cudaLaunchKernel(helm_cuda_add, grid 1x1x1, block 2048x1x1"),
            std::string::npos)
      << message;
  std::printf("oversized block: %s\n", message.c_str());

  message = errorText(device_->launchKernel(fn, {1}, {32}, {&da, &db, &dy}));
  EXPECT_EQ(message, "cuda: cannot launch helm_cuda_add: it takes 4 arguments, 3 given");

  ASSERT_OK(device_->launchKernel(fn, {1}, {32}, {&da, &db, &dy, &n}));
  ASSERT_OK(device_->synchronizeStream(Stream::compute));
  std::vector<float> y = decode(kF32, download(dy, 12));
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33}));
}

TEST_F(CudaKernelTest, EventOrdersACopyStreamUploadBeforeAComputeKernel) {
  // 128 MiB on the copy stream, then a kernel on the compute stream that reads all of it: only the
  // event makes the kernel wait for the upload.
  const int64_t n = 32 << 20;
  const size_t bytes = size_t(n) * 4;
  ASSERT_VALUE(pinned, device_->allocateHost(bytes));
  auto *a = static_cast<float *>(pinned);
  for (int64_t i = 0; i < n; ++i)
    a[i] = float(i % 1000003);
  std::vector<float> ones(n, 1.0f);
  void *db = upload(ones.data(), bytes);
  void *da = deviceBuffer(bytes), *dy = deviceBuffer(bytes);

  DeviceCounters before = device_->counters();
  ASSERT_OK(device_->copyToDevice(da, a, bytes, Stream::copy, true));
  ASSERT_VALUE(uploaded, device_->createEvent());
  ASSERT_OK(device_->recordEvent(uploaded, Stream::copy));
  ASSERT_OK(device_->streamWaitEvent(Stream::compute, uploaded));
  ASSERT_VALUE(fn, device_->getFunction(module_, "helm_cuda_add"));
  int64_t count = n;
  ASSERT_OK(device_->launchKernel(fn, {1024}, {256}, {&da, &db, &dy, &count}));
  ASSERT_VALUE(done, device_->createEvent());
  ASSERT_OK(device_->recordEvent(done, Stream::compute));
  ASSERT_OK(device_->synchronizeEvent(done));
  std::vector<float> y(n);
  ASSERT_OK(device_->copyToHost(y.data(), dy, bytes, Stream::copy, false));
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += y[i] != a[i] + 1.0f;
  EXPECT_EQ(wrong, 0);
  DeviceCounters d = device_->counters() - before;
  EXPECT_EQ(d.hostToDeviceBytes, bytes);
  EXPECT_EQ(d.deviceToHostBytes, bytes);
  EXPECT_EQ(d.transfers(), 2u);
  device_->destroyEvent(uploaded);
  device_->destroyEvent(done);
  device_->freeHost(pinned);
}

// --- Kernels against host references -----------------------------------------------------------

TEST_F(CudaKernelTest, RmsNorm) {
  struct Shape {
    int64_t rows;
    int32_t width;
  };
  for (const ElemType &t : kAllTypes) {
    for (Shape s : {Shape{1, 1}, Shape{5, 1000}, Shape{3, 4096}, Shape{70, 128}}) {
      for (bool inPlace : {false, true}) {
        std::string what = std::string("rms_norm") + t.suffix + " " + std::to_string(s.rows) + "x" +
                           std::to_string(s.width) + (inPlace ? " in place" : "");
        const size_t n = size_t(s.rows) * s.width;
        std::vector<float> x = roundTo(t, randomFloats(n, -3, 3, 1 + s.width));
        std::vector<float> w = roundTo(t, randomFloats(s.width, 0.5f, 1.5f, 2));
        const float eps = 1e-6f;
        std::vector<double> want(n);
        for (int64_t r = 0; r < s.rows; ++r) {
          double squares = 0;
          for (int32_t i = 0; i < s.width; ++i)
            squares += double(x[r * s.width + i]) * x[r * s.width + i];
          double scale = 1.0 / std::sqrt(squares / s.width + eps);
          for (int32_t i = 0; i < s.width; ++i)
            want[r * s.width + i] = x[r * s.width + i] * scale * w[i];
        }
        void *dx = upload(encode(t, x)), *dw = upload(encode(t, w));
        void *dy = inPlace ? dx : deviceBuffer(n * t.size);
        int64_t rows = s.rows;
        int32_t width = s.width;
        float epsArg = eps;
        launch(std::string("helm_cuda_rms_norm") + t.suffix, {uint32_t(s.rows)}, {256},
               {&dx, &dw, &dy, &rows, &width, &epsArg});
        expectClose(decode(t, download(dy, n * t.size)), want, absOf(want), t.tolerance, t.slack,
                    what);
      }
    }
  }
}

TEST_F(CudaKernelTest, AddAndSwiglu) {
  for (const ElemType &t : kAllTypes) {
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1000003)}) {
      std::vector<float> a = roundTo(t, randomFloats(n, -10, 10, 3));
      std::vector<float> b = roundTo(t, randomFloats(n, -10, 10, 4));
      std::vector<double> sum(n), sumScale(n), glu(n), gluScale(n);
      for (int64_t i = 0; i < n; ++i) {
        sum[i] = double(a[i]) + b[i];
        sumScale[i] = std::fabs(a[i]) + std::fabs(b[i]);
        double silu = a[i] / (1.0 + std::exp(-double(a[i])));
        glu[i] = silu * b[i];
        gluScale[i] = std::fabs(glu[i]);
      }
      void *da = upload(encode(t, a)), *db = upload(encode(t, b));
      void *dy = deviceBuffer(n * t.size);
      int64_t count = n;
      uint32_t grid = uint32_t(std::min<int64_t>((n + 255) / 256, 512));
      launch(std::string("helm_cuda_add") + t.suffix, {grid}, {256}, {&da, &db, &dy, &count});
      expectClose(decode(t, download(dy, n * t.size)), sum, sumScale, t.tolerance, t.slack,
                  std::string("add") + t.suffix + " n=" + std::to_string(n));
      launch(std::string("helm_cuda_swiglu") + t.suffix, {grid}, {256}, {&da, &db, &dy, &count});
      expectClose(decode(t, download(dy, n * t.size)), glu, gluScale, t.tolerance, t.slack,
                  std::string("swiglu") + t.suffix + " n=" + std::to_string(n));
    }
  }
}

TEST_F(CudaKernelTest, RopeNeoxAndInterleaved) {
  struct Case {
    int32_t heads, headDim, rotaryDim;
    double theta;
    bool interleaved;
  };
  const std::vector<int64_t> positions = {0, 1, 17, 4095, 40000, 131071};
  const int64_t rows = int64_t(positions.size());
  void *dpos = upload(positions.data(), positions.size() * 8);
  for (const ElemType &t : kAllTypes) {
    for (Case c : {Case{4, 64, 64, 10000.0, false}, Case{3, 128, 32, 1e6, false},
                   Case{2, 80, 40, 500000.0, false}, Case{2, 64, 64, 10000.0, true},
                   Case{3, 96, 48, 10000.0, true}}) {
      for (bool inPlace : {false, true}) {
        std::string what = std::string("rope") + t.suffix + " heads=" + std::to_string(c.heads) +
                           " head_dim=" + std::to_string(c.headDim) +
                           " rotary_dim=" + std::to_string(c.rotaryDim) +
                           (c.interleaved ? " interleaved" : "") + (inPlace ? " in place" : "");
        const size_t width = size_t(c.heads) * c.headDim, n = rows * width;
        std::vector<float> x = roundTo(t, randomFloats(n, -2, 2, 5 + c.headDim));
        std::vector<double> want(n), scale(n);
        const int32_t half = c.rotaryDim / 2;
        // The kernel's steps (runtime/device/DeviceOps.h): f32 angle from an f64 power, cos and sin
        // rounded to the type, each product rounded to the type.
        auto round1 = [&](float v) { return roundTo(t, std::vector<float>{v})[0]; };
        for (int64_t r = 0; r < rows; ++r) {
          for (int32_t h = 0; h < c.heads; ++h) {
            const size_t base = r * width + size_t(h) * c.headDim;
            for (int32_t i = 0; i < c.headDim; ++i) {
              want[base + i] = x[base + i];
              scale[base + i] = std::fabs(x[base + i]);
            }
            for (int32_t i = 0; i < half; ++i) {
              const float freq =
                  float(1.0 / std::pow(c.theta, double(float(2 * i) / float(c.rotaryDim))));
              const float angle = float(positions[r]) * freq;
              const float co = round1(float(std::cos(double(angle))));
              const float si = round1(float(std::sin(double(angle))));
              const size_t i0 = base + (c.interleaved ? 2 * i : i);
              const size_t i1 = base + (c.interleaved ? 2 * i + 1 : i + half);
              const float x0 = x[i0], x1 = x[i1];
              want[i0] = double(round1(x0 * co)) - double(round1(x1 * si));
              want[i1] = double(round1(x1 * co)) + double(round1(x0 * si));
              scale[i0] = scale[i1] = std::fabs(x0) + std::fabs(x1);
            }
          }
        }
        void *dx = upload(encode(t, x));
        void *dy = inPlace ? dx : deviceBuffer(n * t.size);
        int64_t rowsArg = rows;
        int32_t heads = c.heads, headDim = c.headDim, rotaryDim = c.rotaryDim;
        double theta = c.theta;
        const float *factors = nullptr; // no frequency divisors (CudaDeviceOpsTest has them)
        int32_t interleaved = c.interleaved ? 1 : 0;
        launch(std::string("helm_cuda_rope") + t.suffix, {uint32_t(rows)}, {64},
               {&dx, &dy, &dpos, &rowsArg, &heads, &headDim, &rotaryDim, &theta, &factors,
                &interleaved});
        expectClose(decode(t, download(dy, n * t.size)), want, scale, t.tolerance, t.slack, what);
      }
    }
  }
}

TEST_F(CudaKernelTest, EmbedGathersRowsAndClampsBadIds) {
  const int64_t vocab = 37;
  const int32_t width = 300;
  const std::vector<int64_t> ids = {0, 36, 5, -1, 37, 5, 1 << 20};
  const int64_t rows = int64_t(ids.size());
  void *dids = upload(ids.data(), ids.size() * 8);
  for (const ElemType &t : kAllTypes) {
    std::vector<float> table = roundTo(t, randomFloats(vocab * width, -1, 1, 6));
    std::vector<double> want(rows * width, 0.0), scale(rows * width, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t id = std::clamp<int64_t>(ids[r], 0, vocab - 1);
      for (int32_t i = 0; i < width; ++i)
        want[r * width + i] = table[id * width + i];
    }
    void *dtable = upload(encode(t, table));
    // Start from garbage so that every row is seen to be written.
    std::vector<float> garbage(rows * width, 7.0f);
    void *dy = upload(encode(t, garbage));
    int64_t rowsArg = rows, vocabArg = vocab;
    int32_t widthArg = width;
    launch(std::string("helm_cuda_embed") + t.suffix, {uint32_t(rows)}, {128},
           {&dtable, &dids, &dy, &rowsArg, &vocabArg, &widthArg});
    // A gather copies bits: exact.
    expectClose(decode(t, download(dy, rows * width * t.size)), want, scale, 0.0, 0.0,
                std::string("embed") + t.suffix);
  }
}

// --- cuBLAS
// ---------------------------------------------------------------------------------------

TEST_F(CudaDeviceTest, CublasSgemmRowMajorMatchesDoubleReference) {
  struct Shape {
    int m, n, k;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{7, 13, 5}, Shape{64, 48, 96}, Shape{33, 257, 1000}}) {
    // Row-major C[m, n] = A[m, k] B[k, n] is column-major C^T = B^T A^T.
    std::vector<float> a = randomFloats(size_t(s.m) * s.k, -1, 1, 8);
    std::vector<float> b = randomFloats(size_t(s.k) * s.n, -1, 1, 9);
    std::vector<double> want(size_t(s.m) * s.n), scale(size_t(s.m) * s.n);
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) {
        double acc = 0, mag = 0;
        for (int p = 0; p < s.k; ++p) {
          acc += double(a[i * s.k + p]) * b[p * s.n + j];
          mag += std::fabs(double(a[i * s.k + p]) * b[p * s.n + j]);
        }
        want[i * s.n + j] = acc;
        scale[i * s.n + j] = mag;
      }
    void *da = upload(a.data(), a.size() * 4), *db = upload(b.data(), b.size() * 4);
    void *dc = deviceBuffer(want.size() * 4);
    const float one = 1, zero = 0;
    ASSERT_EQ(blas().sgemm(device_->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &one,
                          static_cast<float *>(db), s.n, static_cast<float *>(da), s.k, &zero,
                          static_cast<float *>(dc), s.n),
              CUBLAS_STATUS_SUCCESS);
    expectClose(decode(kF32, download(dc, want.size() * 4)), want, scale, 1e-5, 1e-30,
                "sgemm " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                    std::to_string(s.k));
  }
}

TEST_F(CudaDeviceTest, CublasSgemvTransposedWeightMatchesDoubleReference) {
  struct Shape {
    int n, k;
  };
  for (Shape s : {Shape{1, 1}, Shape{1000, 512}, Shape{4097, 333}}) {
    // y[n] = W[n, k] x[k] with W row-major (the Hugging Face [out, in] layout): column-major W is
    // [k, n], so y = (W_col)^T x.
    std::vector<float> w = randomFloats(size_t(s.n) * s.k, -1, 1, 10);
    std::vector<float> x = randomFloats(s.k, -1, 1, 11);
    std::vector<double> want(s.n), scale(s.n);
    for (int i = 0; i < s.n; ++i)
      for (int p = 0; p < s.k; ++p) {
        want[i] += double(w[size_t(i) * s.k + p]) * x[p];
        scale[i] += std::fabs(double(w[size_t(i) * s.k + p]) * x[p]);
      }
    void *dw = upload(w.data(), w.size() * 4), *dx = upload(x.data(), x.size() * 4);
    void *dy = deviceBuffer(size_t(s.n) * 4);
    const float one = 1, zero = 0;
    ASSERT_EQ(blas().sgemv(device_->cublas(), CUBLAS_OP_T, s.k, s.n, &one, static_cast<float *>(dw),
                          s.k, static_cast<float *>(dx), 1, &zero, static_cast<float *>(dy), 1),
              CUBLAS_STATUS_SUCCESS);
    expectClose(decode(kF32, download(dy, size_t(s.n) * 4)), want, scale, 1e-5, 1e-30,
                "sgemv " + std::to_string(s.n) + "x" + std::to_string(s.k));
  }
}

} // namespace
