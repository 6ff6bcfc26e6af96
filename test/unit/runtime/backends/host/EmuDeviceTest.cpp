//===- EmuDeviceTest.cpp - the emulated GPU: arena, link counters, throttle, stages -===//
#include "runtime/backends/host/HostBackend.h"
#include "runtime/device/StageMemory.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

using namespace helm::rt;

namespace {

std::unique_ptr<Device> emu(uint64_t arena, bool throttle = false, double gbs = 16,
                            double latencyUs = 10) {
  EmuOptions o;
  o.targetName = "test";
  o.arenaBytes = arena;
  o.linkGbs = gbs;
  o.linkLatencyUs = latencyUs;
  o.throttle = throttle;
  auto d = createEmuDevice(o);
  EXPECT_TRUE(bool(d)) << (d ? "" : llvm::toString(d.takeError()));
  return d ? std::move(*d) : nullptr;
}

TEST(EmuDevice, BudgetIsTheArena) {
  auto d = emu(1 << 20);
  EXPECT_EQ(d->capacity(), uint64_t(1) << 20);
  auto a = d->allocate(600 << 10, "a");
  ASSERT_TRUE(bool(a));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  EXPECT_EQ(d->bytesInUse(), uint64_t(600) << 10);
  // The second 600 KiB does not fit in the 424 KiB left: a one-line error with both sizes.
  auto b = d->allocate(600 << 10, "the second block");
  ASSERT_FALSE(bool(b));
  std::string message = llvm::toString(b.takeError());
  EXPECT_NE(message.find("cannot allocate 600.0 KiB (614400 bytes) for the second block"), std::string::npos)
      << message;
  EXPECT_NE(message.find("424.0 KiB of the 1.0 MiB arena free"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  d->free(*a);
  EXPECT_EQ(d->bytesInUse(), 0u);
  EXPECT_EQ(d->peakBytesInUse(), uint64_t(600) << 10);
  // A size whose rounding to granules would wrap (a corrupt size) is refused, not wrapped to a
  // zero-byte block that the next allocation would alias.
  auto huge = d->allocate(UINT64_MAX, "a corrupt size");
  ASSERT_FALSE(bool(huge));
  llvm::consumeError(huge.takeError());
  EXPECT_EQ(d->bytesInUse(), 0u);
  // After the free the whole arena is one block again.
  auto c = d->allocate(1 << 20, "everything");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  d->free(*c);
}

TEST(EmuDevice, FreeCoalescesAndReportsFragmentation) {
  auto d = emu(4096);
  std::vector<void *> blocks;
  for (int i = 0; i < 16; ++i) {
    auto p = d->allocate(256, "granule");
    ASSERT_TRUE(bool(p));
    blocks.push_back(*p);
  }
  EXPECT_FALSE(bool(d->allocate(1, "one more"))) << "the arena is full";
  // Free every other granule: 2 KiB free but no two adjacent.
  for (int i = 0; i < 16; i += 2)
    d->free(blocks[size_t(i)]);
  auto big = d->allocate(512, "two granules");
  ASSERT_FALSE(bool(big));
  EXPECT_NE(llvm::toString(big.takeError()).find("fragmented"), std::string::npos);
  // Freeing the rest in any order coalesces back to one 4 KiB block.
  for (int i = 15; i >= 1; i -= 2)
    d->free(blocks[size_t(i)]);
  auto all = d->allocate(4096, "all");
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
}

TEST(EmuDevice, RandomAllocationsNeverOverlap) {
  auto d = emu(1 << 20);
  std::mt19937 rng(7);
  struct Block {
    char *p;
    uint64_t n;
    char tag;
  };
  std::vector<Block> live;
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && (rng() % 3 == 0 || live.size() > 40)) {
      size_t i = rng() % live.size();
      for (uint64_t j = 0; j < live[i].n; ++j)
        ASSERT_EQ(live[i].p[j], live[i].tag) << "a block was overwritten";
      d->free(live[i].p);
      live.erase(live.begin() + long(i));
      continue;
    }
    uint64_t n = 1 + rng() % 40000;
    auto p = d->allocate(n, "random");
    if (!p) {
      llvm::consumeError(p.takeError());
      continue;
    }
    char tag = char(step);
    std::memset(*p, tag, n);
    live.push_back({static_cast<char *>(*p), n, tag});
  }
  uint64_t sum = 0;
  for (const Block &b : live)
    sum += (b.n + 255) / 256 * 256;
  EXPECT_EQ(d->bytesInUse(), sum);
}

TEST(EmuDevice, CopiesAreCountedPerDirection) {
  auto d = emu(1 << 16);
  auto dev = d->allocate(1000, "buffer");
  ASSERT_TRUE(bool(dev));
  std::vector<char> in(1000), out(1000);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = char(i * 7);
  ASSERT_FALSE(bool(d->copyToDevice(*dev, in.data(), 1000, Stream::copy, true)));
  ASSERT_FALSE(bool(d->copyToHost(out.data(), *dev, 600, Stream::compute, false)));
  ASSERT_FALSE(bool(d->copyToHost(out.data() + 600, static_cast<char *>(*dev) + 600, 400,
                                  Stream::compute, false)));
  EXPECT_EQ(in, out);
  DeviceCounters c = d->counters();
  EXPECT_EQ(c.hostToDeviceBytes, 1000u);
  EXPECT_EQ(c.hostToDeviceTransfers, 1u);
  EXPECT_EQ(c.deviceToHostBytes, 1000u);
  EXPECT_EQ(c.deviceToHostTransfers, 2u);
  EXPECT_EQ(c.bytes(), 2000u);
  EXPECT_EQ(c.transfers(), 3u);
}

TEST(EmuDevice, CopiesOutsideAllocatedMemoryFail) {
  auto d = emu(1 << 16);
  auto dev = d->allocate(256, "buffer");
  ASSERT_TRUE(bool(dev));
  std::vector<char> host(1024);
  // Past the end of the block, a host pointer as the device side, and a freed block.
  llvm::Error e1 = d->copyToDevice(*dev, host.data(), 512, Stream::copy, false);
  EXPECT_TRUE(bool(e1));
  llvm::consumeError(std::move(e1));
  llvm::Error e2 = d->copyToHost(host.data(), host.data() + 512, 16, Stream::copy, false);
  EXPECT_TRUE(bool(e2));
  llvm::consumeError(std::move(e2));
  d->free(*dev);
  llvm::Error e3 = d->copyToDevice(*dev, host.data(), 16, Stream::copy, false);
  EXPECT_TRUE(bool(e3));
  llvm::consumeError(std::move(e3));
  EXPECT_EQ(d->counters().transfers(), 0u) << "refused copies are not counted";
}

TEST(EmuDevice, ThrottleTakesLatencyPlusBytesOverBandwidth) {
  // 1 GB/s and 2 ms per transfer: 4 MB takes 2 ms + 4 ms.
  uint64_t n = 4'000'000;
  std::vector<char> host(n, 1);
  auto timeThrottledCopy = [&] {
    auto d = emu(8 << 20, /*throttle=*/true, /*gbs=*/1, /*latencyUs=*/2000);
    auto dev = d->allocate(n, "buffer");
    EXPECT_TRUE(bool(dev));
    auto t0 = std::chrono::steady_clock::now();
    llvm::Error e = d->copyToDevice(*dev, host.data(), n, Stream::copy, false);
    EXPECT_FALSE(bool(e));
    llvm::consumeError(std::move(e));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  double throttled = timeThrottledCopy();
  EXPECT_GE(throttled, 6.0);
  EXPECT_LT(throttled, 1000.0) << "the delay should be close to 6 ms";
}

TEST(EmuDevice, EventsAndStreamsCompleteInOrder) {
  auto d = emu(1 << 16);
  auto ev = d->createEvent();
  ASSERT_TRUE(bool(ev));
  EXPECT_FALSE(bool(d->recordEvent(*ev, Stream::copy)));
  EXPECT_FALSE(bool(d->streamWaitEvent(Stream::compute, *ev)));
  EXPECT_FALSE(bool(d->synchronizeEvent(*ev)));
  EXPECT_FALSE(bool(d->synchronizeStream(Stream::compute)));
  d->destroyEvent(*ev);
}

TEST(EmuDevice, StageBuffersComeFromTheArena) {
  auto d = emu(1 << 16);
  void *outside = _mlir_memref_to_llvm_alloc(1 << 20); // no stage: the C heap
  ASSERT_NE(outside, nullptr);
  _mlir_memref_to_llvm_free(outside);
  uint64_t inside = 0;
  llvm::Error e = d->runHostStage(Device::StageCode::touchesBuffers, [&]() -> llvm::Error {
    EXPECT_EQ(currentStageDevice(), d.get());
    void *p = _mlir_memref_to_llvm_alloc(1000);
    inside = d->bytesInUse();
    _mlir_memref_to_llvm_free(p);
    return llvm::Error::success();
  });
  EXPECT_FALSE(bool(e));
  EXPECT_EQ(inside, 1024u);
  // Kept for the next step: held, but available to any allocation.
  EXPECT_EQ(d->bytesInUse(), 1024u);
  EXPECT_EQ(d->keptStageBytes(), 1024u);
  EXPECT_EQ(d->availableBytes(), d->capacity());
  d->releaseKeptStageBuffers();
  EXPECT_EQ(d->bytesInUse(), 0u);
  EXPECT_EQ(currentStageDevice(), nullptr);
}

// A decode step's buffers: the same sizes in the same order every step, some alive together.
std::vector<void *> runStep(Device &d, llvm::ArrayRef<size_t> sizes) {
  std::vector<void *> seen;
  llvm::Error e = d.runHostStage(Device::StageCode::enqueuesKernels, [&]() -> llvm::Error {
    void *held = nullptr;
    for (size_t bytes : sizes) {
      void *p = _mlir_memref_to_llvm_alloc(bytes);
      seen.push_back(p);
      _mlir_memref_to_llvm_free(held); // the previous one dies once this one exists
      held = p;
    }
    _mlir_memref_to_llvm_free(held);
    return llvm::Error::success();
  });
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  return seen;
}

TEST(EmuDevice, LaterStepsReuseTheKeptStageBuffers) {
  auto d = emu(1 << 20);
  const std::vector<size_t> sizes = {4096, 1000, 4096, 20000, 300, 1000, 4096};
  runStep(*d, sizes);
  uint64_t allocations = d->counters().allocations;
  // At most two live at once, and a freed one serves a later request of its size.
  EXPECT_GT(allocations, 0u);
  EXPECT_LT(allocations, sizes.size());
  uint64_t held = d->bytesInUse();
  for (int step = 0; step < 5; ++step)
    runStep(*d, sizes);
  EXPECT_EQ(d->counters().allocations, allocations) << "a later step allocated";
  EXPECT_EQ(d->bytesInUse(), held) << "a later step grew the memory held";
}

TEST(EmuDevice, KeptStageBuffersServeTheirSizeClass) {
  auto d = emu(1 << 20);
  runStep(*d, {59 << 10}); // held as 60 KiB: eight classes per power of two above 4 KiB
  EXPECT_EQ(d->keptStageBytes(), uint64_t(60 << 10));
  uint64_t allocations = d->counters().allocations;
  runStep(*d, {57 << 10}); // the same class (56..60 KiB): reused
  EXPECT_EQ(d->counters().allocations, allocations);
  runStep(*d, {1 << 10}); // another class: a block of its own
  runStep(*d, {1000});    // granules below 4 KiB: 1000 bytes are the 1 KiB class
  EXPECT_EQ(d->counters().allocations, allocations + 1);
  runStep(*d, {65 << 10}); // just past the class: the next one (72 KiB)
  EXPECT_EQ(d->counters().allocations, allocations + 2);
  EXPECT_EQ(d->keptStageBytes(), uint64_t((60 << 10) + (1 << 10) + (72 << 10)));
}

TEST(EmuDevice, AStageBufferFreedTwiceIsKeptOnce) {
  auto d = emu(1 << 20);
  void *first = nullptr, *second = nullptr, *third = nullptr;
  llvm::Error e = d->runHostStage(Device::StageCode::touchesBuffers, [&]() -> llvm::Error {
    first = _mlir_memref_to_llvm_alloc(1000);
    _mlir_memref_to_llvm_free(first);
    _mlir_memref_to_llvm_free(first); // must neither return it to the arena nor keep it twice
    second = _mlir_memref_to_llvm_alloc(1000);
    third = _mlir_memref_to_llvm_alloc(1000);
    return llvm::Error::success();
  });
  ASSERT_FALSE(bool(e));
  EXPECT_EQ(second, first) << "the kept buffer serves the next request";
  EXPECT_NE(third, first) << "a buffer in use was handed out again";
  EXPECT_EQ(d->bytesInUse(), 2048u);
  EXPECT_EQ(d->keptStageBytes(), 0u);
  d->freeStageBuffer(second);
  d->freeStageBuffer(third);
  EXPECT_EQ(d->keptStageBytes(), 2048u);
}

TEST(EmuDevice, AStageBufferGivenToFreeLeavesTheKeptList) {
  auto d = emu(1 << 20);
  auto p = d->allocateStageBuffer(1000, "x");
  ASSERT_TRUE(bool(p));
  d->freeStageBuffer(*p);
  ASSERT_EQ(d->keptStageBytes(), 1024u);
  d->free(*p); // back to the arena: it must not be handed out as a kept buffer any more
  EXPECT_EQ(d->keptStageBytes(), 0u);
  EXPECT_EQ(d->bytesInUse(), 0u);
  auto q = d->allocateStageBuffer(1000, "y");
  ASSERT_TRUE(bool(q));
  EXPECT_EQ(d->bytesInUse(), 1024u);
  d->freeStageBuffer(*q);
}

TEST(EmuDevice, AStageBufferNearTheBudgetGetsItsOwnSizeWhenItsClassDoesNotFit) {
  auto d = emu(63 << 10);
  // 60 KiB + 1 byte is in the 64 KiB class, which the 63 KiB arena cannot hold; its own granules can.
  auto p = d->allocateStageBuffer((60 << 10) + 1, "big");
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(d->bytesInUse(), uint64_t((60 << 10) + 256));
  d->freeStageBuffer(*p);
  EXPECT_EQ(d->keptStageBytes(), uint64_t((60 << 10) + 256));
}

TEST(EmuDevice, AllocationsTakeBackTheKeptStageBuffersWhenTheArenaIsFull) {
  auto d = emu(64 << 10);
  runStep(*d, {48 << 10});
  ASSERT_EQ(d->keptStageBytes(), uint64_t(48 << 10));
  // 32 KiB fit only once the kept 48 KiB are returned to the arena.
  auto page = d->allocate(32 << 10, "a KV page");
  ASSERT_TRUE(bool(page)) << llvm::toString(page.takeError());
  EXPECT_EQ(d->keptStageBytes(), 0u);
  EXPECT_EQ(d->bytesInUse(), uint64_t(32 << 10));
  d->free(*page);
  // Nothing kept and still too large: the arena's own message.
  auto huge = d->allocate(128 << 10, "too much");
  ASSERT_FALSE(bool(huge));
  EXPECT_NE(llvm::toString(huge.takeError()).find("cannot allocate 128.0 KiB"), std::string::npos);
}

TEST(EmuDevice, HostWaitsAreCounted) {
  auto d = emu(1 << 16);
  auto p = d->allocate(256, "x");
  ASSERT_TRUE(bool(p));
  std::vector<char> host(256);
  auto waits = [&] { return d->counters().hostSynchronizations; };
  EXPECT_FALSE(bool(d->copyToDevice(*p, host.data(), 256, Stream::compute, /*async=*/true)));
  EXPECT_EQ(waits(), 0u);
  EXPECT_FALSE(bool(d->copyToHost(host.data(), *p, 256, Stream::compute, /*async=*/false)));
  EXPECT_EQ(waits(), 1u);
  EXPECT_FALSE(bool(d->synchronizeStream(Stream::copy)));
  EXPECT_EQ(waits(), 2u);
  auto ev = d->createEvent();
  ASSERT_TRUE(bool(ev));
  EXPECT_FALSE(bool(d->synchronizeEvent(*ev)));
  EXPECT_EQ(waits(), 3u);
  // Host code that reads its buffers waits for the device first; kernel-form stage code does not.
  EXPECT_FALSE(bool(d->runHostStage(Device::StageCode::touchesBuffers, [] { return llvm::Error::success(); })));
  EXPECT_EQ(waits(), 4u);
  EXPECT_FALSE(bool(d->runHostStage(Device::StageCode::enqueuesKernels, [] { return llvm::Error::success(); })));
  EXPECT_EQ(waits(), 4u);
  EXPECT_EQ(d->counters().allocations, 1u);
  d->destroyEvent(*ev);
  d->free(*p);
}

TEST(EmuDevice, StageThatOverrunsTheArenaFailsWithoutCrashing) {
  auto d = emu(1 << 16);
  llvm::Error e = d->runHostStage(Device::StageCode::touchesBuffers, [&]() -> llvm::Error {
    // More than the arena: the stage still gets writable memory (its result is discarded).
    char *p = static_cast<char *>(_mlir_memref_to_llvm_alloc(1 << 20));
    std::memset(p, 0, 1 << 20);
    _mlir_memref_to_llvm_free(p);
    return llvm::Error::success();
  });
  ASSERT_TRUE(bool(e));
  std::string message = llvm::toString(std::move(e));
  EXPECT_NE(message.find("cannot allocate 1.0 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("a buffer of the stage's code"), std::string::npos) << message;
  // The next stage starts clean.
  EXPECT_FALSE(bool(d->runHostStage(Device::StageCode::touchesBuffers,
                                    [] { return llvm::Error::success(); })));
}

TEST(EmuDevice, EmptyArenaIsAnError) {
  EmuOptions o;
  o.arenaBytes = 100; // less than one 256-byte granule
  auto d = createEmuDevice(o);
  ASSERT_FALSE(bool(d));
  EXPECT_NE(llvm::toString(d.takeError()).find("no device memory"), std::string::npos);
}

TEST(CpuDevice, HostMemoryAndNoLink) {
  auto d = createCpuDevice();
  auto p = d->allocate(100, "x");
  ASSERT_TRUE(bool(p));
  std::vector<char> in(100, 3), out(100);
  EXPECT_FALSE(bool(d->copyToDevice(*p, in.data(), 100, Stream::compute, false)));
  EXPECT_FALSE(bool(d->copyToHost(out.data(), *p, 100, Stream::compute, false)));
  EXPECT_EQ(in, out);
  EXPECT_EQ(d->counters().transfers(), 0u);
  d->free(*p);
  EXPECT_EQ(d->bytesInUse(), 0u);
}

} // namespace
