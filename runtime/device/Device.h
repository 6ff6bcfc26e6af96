//===- Device.h - the runtime's device layer: memory, copies, streams, stage launch -===//
//
// One interface over the three devices a package's stages run on:
//   cpu  - host memory, no link; runs CPU stages.
//   emu  - an emulated GPU: a host arena capped at the target's VRAM minus its reserve, with its
//          own allocator; every byte and transfer across the (pretend) link is counted, and copies
//          can be throttled to the profile's link bandwidth and latency. A test and research
//          device: it proves the plan, the split and the link traffic, not GPU speed.
//   cuda - a real NVIDIA GPU through the CUDA runtime/driver API.
// This layer knows none of them but the cpu device: each backend (runtime/backends/host: cpu and
// emu; runtime/backends/cuda) registers its devices' factories with the registry of Backend.h,
// and createStageBackend picks a stage's device by DeviceKind there.
//
// Every device has exactly two streams, compute and copy. Work on one stream runs in order;
// events order work across streams and against the host. On cpu and emu every operation
// completes before it returns (an "async" copy is a finished copy with a completed event), which
// is a valid schedule of the same program.
//
// Stage code is host code (the CPU stage, or an emu device stage compiled for the host): it runs
// on the calling thread through `runHostStage`, which makes this device the one the stage's
// buffer allocations (the `_mlir_memref_to_llvm_*` functions) are served from.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_DEVICE_DEVICE_H
#define HELM_RUNTIME_DEVICE_DEVICE_H

#include "contract/helm_contract.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace helm::rt {

/// The device kinds are the contract's (HELM_DEVICE_CPU, HELM_DEVICE_EMU, HELM_DEVICE_CUDA): one
/// enum from the compiler's target to the runtime's backend registry.
using DeviceKind = helm_device_kind;
/// "cpu", "emu" or "cuda": the manifest's spelling (helm_device_kind_name).
llvm::StringRef deviceKindName(DeviceKind kind);

enum class Stream { compute, copy };

/// What a device did, counted by every device: the link traffic in each direction (emu and
/// cuda; cpu has no link), the blocks it allocated from its memory, and the times the host waited
/// for it (a stream or event synchronisation, or a copy that is not asynchronous). A decode step
/// in steady state allocates nothing and waits once, for its logits.
struct DeviceCounters {
  uint64_t hostToDeviceBytes = 0, deviceToHostBytes = 0;
  uint64_t hostToDeviceTransfers = 0, deviceToHostTransfers = 0;
  uint64_t allocations = 0, hostSynchronizations = 0;
  uint64_t bytes() const { return hostToDeviceBytes + deviceToHostBytes; }
  uint64_t transfers() const { return hostToDeviceTransfers + deviceToHostTransfers; }
  DeviceCounters operator-(const DeviceCounters &o) const {
    return {hostToDeviceBytes - o.hostToDeviceBytes, deviceToHostBytes - o.deviceToHostBytes,
            hostToDeviceTransfers - o.hostToDeviceTransfers,
            deviceToHostTransfers - o.deviceToHostTransfers, allocations - o.allocations,
            hostSynchronizations - o.hostSynchronizations};
  }
  DeviceCounters operator+(const DeviceCounters &o) const {
    return {hostToDeviceBytes + o.hostToDeviceBytes, deviceToHostBytes + o.deviceToHostBytes,
            hostToDeviceTransfers + o.hostToDeviceTransfers,
            deviceToHostTransfers + o.deviceToHostTransfers, allocations + o.allocations,
            hostSynchronizations + o.hostSynchronizations};
  }
};

/// A point in a stream's work; created by the device, recorded on a stream, waited for.
using EventId = int64_t;

class Device {
public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  /// One line for logs and --info: "emu (rtx4060-laptop): 7.00 GiB arena, link 16 GB/s".
  virtual std::string describe() const = 0;

  // --- Memory with a byte budget ---------------------------------------------------------
  /// Bytes this device may hand out in total (the VRAM budget on emu and cuda).
  virtual uint64_t capacity() const = 0;
  /// Bytes held now, stage buffers kept for reuse included.
  virtual uint64_t bytesInUse() const = 0;
  virtual uint64_t peakBytesInUse() const = 0;
  /// What an allocation could get now: the capacity less what is held, counting the stage
  /// buffers kept for reuse as free (allocate releases them when it needs their memory).
  uint64_t availableBytes() const;
  /// `bytes` of device memory, 256-byte aligned. Past the budget (after releasing the stage
  /// buffers kept for reuse): one line naming the device, the request, `what` and what is left
  /// ("emu (emu:rtx4060-laptop): cannot allocate 512.0 MiB (536870912 bytes) for the weights of
  /// the GPU stage (units 8..29): 300.0 MiB of the 1.00 GiB arena free"). Counted.
  llvm::Expected<void *> allocate(uint64_t bytes, llvm::StringRef what);
  /// Frees memory from `allocate` (nullptr is ignored).
  void free(void *p);
  /// Host memory that copies to and from this device can use asynchronously (pinned on cuda).
  virtual llvm::Expected<void *> allocateHost(uint64_t bytes) = 0;
  virtual void freeHost(void *p) = 0;

  // --- Stage buffers, kept for reuse ----------------------------------------------------
  // The buffers a stage's code allocates and frees in every step (activations, scratch) come
  // from here: a freed buffer is kept, not returned to the device, and the next request of its
  // size class (granules up to 4 KiB, then eight classes per power of two) takes it. Every step
  // of a decode at one batch size asks for the same sizes in the same order, so after the first
  // one a step allocates nothing (no cudaMalloc, and no cudaFree, which waits for the whole
  // device). Reuse is safe without waiting because everything that uses stage buffers runs in
  // order on the compute stream.
  llvm::Expected<void *> allocateStageBuffer(uint64_t bytes, llvm::StringRef what);
  /// Keeps a buffer from allocateStageBuffer for reuse (nullptr is ignored; memory from
  /// `allocate` is freed).
  void freeStageBuffer(void *p);
  /// Returns the kept buffers' memory to the device.
  void releaseKeptStageBuffers();
  uint64_t keptStageBytes() const;

  // --- Copies across the link (counted) --------------------------------------------------
  /// Host -> device. `async`: enqueued on `stream`, may return before the copy is done (the host
  /// buffer must stay valid until an event recorded after it completes). Otherwise the host
  /// waits for `stream` (counted as a host synchronisation).
  llvm::Error copyToDevice(void *dst, const void *src, uint64_t bytes, Stream stream, bool async);
  /// Device -> host.
  llvm::Error copyToHost(void *dst, const void *src, uint64_t bytes, Stream stream, bool async);

  // --- Streams and events ------------------------------------------------------------------
  virtual llvm::Expected<EventId> createEvent() = 0;
  virtual void destroyEvent(EventId event) = 0;
  /// Marks the point after all work enqueued on `stream` so far.
  virtual llvm::Error recordEvent(EventId event, Stream stream) = 0;
  /// Later work on `stream` waits for `event` (the host does not block).
  virtual llvm::Error streamWaitEvent(Stream stream, EventId event) = 0;
  /// The host blocks until `event` has happened (counted).
  llvm::Error synchronizeEvent(EventId event);
  /// The host blocks until all work on `stream` is done (counted).
  llvm::Error synchronizeStream(Stream stream);

  // --- Stage launch ----------------------------------------------------------------------
  /// What the host code of a stage does with its buffers.
  enum class StageCode {
    /// Reads and writes them itself (a stage compiled for the host, run on emu): it must first
    /// wait for the compute stream's work.
    touchesBuffers,
    /// Only hands them to device kernels (helm_dev_* calls), which the device orders after the
    /// compute stream's work: no wait.
    enqueuesKernels,
  };
  /// Runs host stage code on the calling thread with this device serving the stage's buffer
  /// allocations (kept for reuse: allocateStageBuffer). Returns `body`'s error, or an allocation
  /// failure that happened inside the stage (then the stage's outputs are undefined).
  llvm::Error runHostStage(StageCode code, llvm::function_ref<llvm::Error()> body);

  /// Totals since the device was created. Not synchronised: read them from the thread that
  /// issues the device's work (the runtime's token loop).
  const DeviceCounters &counters() const { return counters_; }

protected:
  // What each device implements; the public calls above add the counting and the reuse.
  virtual llvm::Expected<void *> allocateImpl(uint64_t bytes, llvm::StringRef what) = 0;
  virtual void freeImpl(void *p) = 0;
  virtual llvm::Error copyToDeviceImpl(void *dst, const void *src, uint64_t bytes, Stream stream,
                                       bool async) = 0;
  virtual llvm::Error copyToHostImpl(void *dst, const void *src, uint64_t bytes, Stream stream,
                                     bool async) = 0;
  virtual llvm::Error synchronizeEventImpl(EventId event) = 0;
  virtual llvm::Error synchronizeStreamImpl(Stream stream) = 0;

  DeviceCounters counters_;

private:
  mutable std::mutex stageBuffersMutex_;
  struct StageBuffer {
    uint64_t size = 0;
    bool kept = false; // freed by the stage, waiting in keptStageBuffers_
  };
  std::unordered_map<void *, StageBuffer> stageBuffers_; // every block allocateStageBuffer made
  std::multimap<uint64_t, void *> keptStageBuffers_;     // size -> block, free for reuse
  uint64_t keptStageBytes_ = 0;
};

/// Devices hand out memory in granules of this many bytes (and align blocks to it).
inline constexpr uint64_t kDeviceGranule = 256;
/// `bytes` (at least 1) rounded up to whole granules; UINT64_MAX when that overflows, so a budget
/// check refuses it instead of seeing a wrapped small size.
uint64_t granuleBytes(uint64_t bytes);
/// "1.50 GiB", "12.0 MiB", "3.5 KiB" or "200 B", for device messages.
std::string formatBytes(uint64_t bytes);

/// A device on which every operation has completed when it returns (cpu, emu): an "async" copy
/// is a finished copy, events are always reached, streams are always idle. A valid schedule of
/// any program the interface allows.
class SynchronousDevice : public Device {
public:
  llvm::Expected<EventId> createEvent() override { return nextEvent_++; }
  void destroyEvent(EventId) override {}
  llvm::Error recordEvent(EventId, Stream) override { return llvm::Error::success(); }
  llvm::Error streamWaitEvent(Stream, EventId) override { return llvm::Error::success(); }

protected:
  llvm::Error synchronizeEventImpl(EventId) override { return llvm::Error::success(); }
  llvm::Error synchronizeStreamImpl(Stream) override { return llvm::Error::success(); }

private:
  EventId nextEvent_ = 1;
};

/// The device whose memory stage code allocates from right now (set by runHostStage); nullptr
/// means the C heap.
Device *currentStageDevice();

/// Whether a buffer allocation of the stage running now (runHostStage) failed. Its code then got
/// host memory instead, so that it can finish and the failure be reported; kernels of a device
/// must not be given such a buffer.
bool stageAllocationFailed();

/// Host memory, no budget beyond the machine's, nothing counted.
std::unique_ptr<Device> createCpuDevice();

} // namespace helm::rt

#endif
