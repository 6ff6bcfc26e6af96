//===- BackendTest.cpp - the backend registry: DeviceKind -> a stage's device and ops --===//
#include "runtime/device/Backend.h"

#include "runtime/backends/host/HostBackend.h"

#include "contract/manifest_schema.h"

#include "gtest/gtest.h"

#include <cstring>
#include <string>

using namespace helm::rt;

namespace {

TEST(Backend, ParsesTheManifestsDeviceNames) {
  EXPECT_EQ(parseTargetDevice(HELM_MANIFEST_DEVICE_EMU), HELM_DEVICE_EMU);
  EXPECT_EQ(parseTargetDevice(HELM_MANIFEST_DEVICE_CUDA), HELM_DEVICE_CUDA);
  // A GPU stage never runs on "cpu"; anything else is unknown.
  for (const char *name : {"cpu", "gpu", "", "CUDA", "emu:rtx4060"})
    EXPECT_FALSE(parseTargetDevice(name).has_value()) << name;
}

TEST(Backend, HostKindsGetHostOps) {
  BackendOptions options;
  options.targetName = "test";
  options.memoryBytes = 1 << 20;
  options.deviceOps = true;
  for (DeviceKind kind : {HELM_DEVICE_CPU, HELM_DEVICE_EMU}) {
    SCOPED_TRACE(deviceKindName(kind).str());
    auto backend = createStageBackend(kind, options);
    ASSERT_TRUE(bool(backend)) << llvm::toString(backend.takeError());
    ASSERT_NE(backend->device, nullptr);
    EXPECT_EQ(backend->device->kind(), kind);
    ASSERT_NE(backend->ops, nullptr);
    // The host ops work on the device's memory: a residual add in the arena.
    auto buffer = backend->device->allocate(3 * sizeof(float), "test");
    ASSERT_TRUE(bool(buffer)) << llvm::toString(buffer.takeError());
    float *x = static_cast<float *>(*buffer);
    const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    ASSERT_FALSE(bool(backend->ops->add(a, b, x, helm::kernels::DType::f32, 3)));
    EXPECT_EQ(x[0], 11.0f);
    EXPECT_EQ(x[2], 33.0f);
    backend->device->free(*buffer);
  }
  // Without device calls the stage gets its device only.
  options.deviceOps = false;
  auto plain = createStageBackend(HELM_DEVICE_EMU, options);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->device->kind(), HELM_DEVICE_EMU);
  EXPECT_EQ(plain->ops, nullptr);
}

TEST(Backend, EmuArenaFailureIsTheDevicesError) {
  BackendOptions options;
  options.memoryBytes = uint64_t(1) << 62; // no machine reserves this
  auto backend = createStageBackend(HELM_DEVICE_EMU, options);
  ASSERT_FALSE(bool(backend));
  EXPECT_FALSE(llvm::toString(backend.takeError()).empty());
}

// Without --gpu-memory the emulated GPU's arena is the target's VRAM less its reserve.
TEST(Backend, EmuArenaIsTheTargetsVramLessItsReserve) {
  BackendOptions options;
  options.vramBytes = 3 << 20;
  options.reservedBytes = 1 << 20;
  auto backend = createStageBackend(HELM_DEVICE_EMU, options);
  ASSERT_TRUE(bool(backend)) << llvm::toString(backend.takeError());
  auto fits = backend->device->allocate(2 << 20, "fits");
  ASSERT_TRUE(bool(fits)) << llvm::toString(fits.takeError());
  auto over = backend->device->allocate(1 << 20, "over");
  EXPECT_FALSE(bool(over));
  llvm::consumeError(over.takeError());
  backend->device->free(*fits);
}

// A backend registered for a kind is the one stages of that kind get; the build's own comes back
// when it registers again.
TEST(Backend, RegisteredBackendServesItsKind) {
  static int created = 0;
  registerBackend({HELM_DEVICE_EMU, "a test device", nullptr,
                   [](const BackendOptions &, KernelImageSource) -> llvm::Expected<StageBackend> {
                     ++created;
                     return llvm::createStringError(llvm::inconvertibleErrorCode(), "test backend");
                   }});
  auto backend = createStageBackend(HELM_DEVICE_EMU, BackendOptions());
  ASSERT_FALSE(bool(backend));
  EXPECT_EQ(llvm::toString(backend.takeError()), "test backend");
  EXPECT_EQ(created, 1);
  // A backend that says why it cannot run is refused before it is asked to create anything.
  registerBackend({HELM_DEVICE_EMU, "a test device", [] { return std::optional<std::string>("no test device"); },
                   [](const BackendOptions &, KernelImageSource) -> llvm::Expected<StageBackend> {
                     ++created;
                     return StageBackend();
                   }});
  BackendOptions options;
  options.targetName = "t";
  auto refused = createStageBackend(HELM_DEVICE_EMU, options);
  ASSERT_FALSE(bool(refused));
  EXPECT_EQ(llvm::toString(refused.takeError()),
            "the package's GPU stage runs on a test device ('t'), and there is none here: no test device "
            "(compile with --target=emu:<name> to run it on the emulated GPU)");
  EXPECT_EQ(created, 1);
  registerHostBackend();
  options.memoryBytes = 1 << 20;
  auto restored = createStageBackend(HELM_DEVICE_EMU, options);
  ASSERT_TRUE(bool(restored)) << llvm::toString(restored.takeError());
  EXPECT_EQ(restored->device->kind(), HELM_DEVICE_EMU);
}

TEST(Backend, CudaWithoutAGpuSaysSo) {
  std::optional<std::string> missing = missingDevice(HELM_DEVICE_CUDA, "rtx4060");
  if (!missing)
    GTEST_SKIP() << "a CUDA GPU is present";
  BackendOptions options;
  options.targetName = "rtx4060";
  options.deviceOps = true;
  bool asked = false;
  auto backend = createStageBackend(HELM_DEVICE_CUDA, options,
                                    [&]() -> llvm::Expected<llvm::ArrayRef<char>> {
                                      asked = true;
                                      return llvm::ArrayRef<char>();
                                    });
  ASSERT_FALSE(bool(backend));
  EXPECT_EQ(llvm::toString(backend.takeError()), *missing);
  // The kernel image is not asked for when there is no device to load it into.
  EXPECT_FALSE(asked);
}

} // namespace

// --check asks whether a device could be created without creating it: only cuda can be missing,
// and then with the message createStageBackend gives.
TEST(Backend, MissingDeviceOnlyForCudaWithoutAGpu) {
  EXPECT_FALSE(missingDevice(HELM_DEVICE_CPU, "host"));
  EXPECT_FALSE(missingDevice(HELM_DEVICE_EMU, "rtx4060-laptop"));
  std::optional<std::string> missing = missingDevice(HELM_DEVICE_CUDA, "rtx4060");
  if (!missing)
    return; // a CUDA GPU is present
  llvm::StringRef message(*missing);
  EXPECT_TRUE(message.starts_with("the package's GPU stage runs on a CUDA GPU ('rtx4060'), and there is none here: "))
      << message.str();
  EXPECT_TRUE(message.ends_with(" (compile with --target=emu:<name> to run it on the emulated GPU)")) << message.str();
  // The reason is the backend's: no GPU, or (a build without CUDA) no CUDA support.
#if HELM_HAVE_CUDA
  EXPECT_NE(message.find("no CUDA device found"), llvm::StringRef::npos) << message.str();
#else
  EXPECT_NE(message.find("this build of HELM has no CUDA support (configure with -DHELM_ENABLE_CUDA=ON)"),
            llvm::StringRef::npos)
      << message.str();
#endif
  BackendOptions options;
  options.targetName = "rtx4060";
  auto backend = createStageBackend(HELM_DEVICE_CUDA, options);
  ASSERT_FALSE(backend);
  EXPECT_EQ(llvm::toString(backend.takeError()), *missing);
}
