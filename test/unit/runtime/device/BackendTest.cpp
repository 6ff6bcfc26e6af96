//===- BackendTest.cpp - the backend factory: DeviceKind -> a stage's device and ops ---===//
#include "runtime/device/Backend.h"

#include "contract/manifest_schema.h"

#include "gtest/gtest.h"

#include <cstring>
#include <string>

using namespace helm::rt;

namespace {

TEST(Backend, ParsesTheManifestsDeviceNames) {
  EXPECT_EQ(parseTargetDevice(HELM_MANIFEST_DEVICE_EMU), DeviceKind::emu);
  EXPECT_EQ(parseTargetDevice(HELM_MANIFEST_DEVICE_CUDA), DeviceKind::cuda);
  // A GPU stage never runs on "cpu"; anything else is unknown.
  for (const char *name : {"cpu", "gpu", "", "CUDA", "emu:rtx4060"})
    EXPECT_FALSE(parseTargetDevice(name).has_value()) << name;
}

TEST(Backend, HostKindsGetHostOps) {
  BackendOptions options;
  options.targetName = "test";
  options.emu.targetName = "test";
  options.emu.arenaBytes = 1 << 20;
  options.deviceOps = true;
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::emu}) {
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
  auto plain = createStageBackend(DeviceKind::emu, options);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->device->kind(), DeviceKind::emu);
  EXPECT_EQ(plain->ops, nullptr);
}

TEST(Backend, EmuArenaFailureIsTheDevicesError) {
  BackendOptions options;
  options.emu.arenaBytes = uint64_t(1) << 62; // no machine reserves this
  auto backend = createStageBackend(DeviceKind::emu, options);
  ASSERT_FALSE(bool(backend));
  EXPECT_FALSE(llvm::toString(backend.takeError()).empty());
}

TEST(Backend, CudaWithoutAGpuSaysSo) {
  std::string reason;
  if (cudaAvailable(&reason))
    GTEST_SKIP() << "a CUDA GPU is present";
  BackendOptions options;
  options.targetName = "rtx4060";
  options.deviceOps = true;
  bool asked = false;
  auto backend = createStageBackend(DeviceKind::cuda, options,
                                    [&]() -> llvm::Expected<llvm::ArrayRef<char>> {
                                      asked = true;
                                      return llvm::ArrayRef<char>();
                                    });
  ASSERT_FALSE(bool(backend));
  EXPECT_EQ(llvm::toString(backend.takeError()),
            "the package's GPU stage runs on a CUDA GPU ('rtx4060'), and there is none here: " +
                reason + " (compile with --target=emu:<name> to run it on the emulated GPU)");
  // The kernel image is not asked for when there is no device to load it into.
  EXPECT_FALSE(asked);
}

} // namespace

// --check asks whether a device could be created without creating it: only cuda can be missing,
// and then with the message createStageBackend gives.
TEST(Backend, MissingDeviceOnlyForCudaWithoutAGpu) {
  EXPECT_FALSE(missingDevice(DeviceKind::cpu, "host"));
  EXPECT_FALSE(missingDevice(DeviceKind::emu, "rtx4060-laptop"));
  std::string reason;
  std::optional<std::string> missing = missingDevice(DeviceKind::cuda, "rtx4060");
  if (cudaAvailable(&reason)) {
    EXPECT_FALSE(missing);
    return;
  }
  ASSERT_TRUE(missing);
  EXPECT_EQ(*missing, "the package's GPU stage runs on a CUDA GPU ('rtx4060'), and there is none "
                      "here: " + reason +
                          " (compile with --target=emu:<name> to run it on the emulated GPU)");
  BackendOptions options;
  options.targetName = "rtx4060";
  auto backend = createStageBackend(DeviceKind::cuda, options);
  ASSERT_FALSE(backend);
  EXPECT_EQ(llvm::toString(backend.takeError()), *missing);
}
