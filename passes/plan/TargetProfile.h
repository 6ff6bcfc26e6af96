//===- TargetProfile.h - device profiles and the built-in catalogue -------------===//
//
// A target is a CPU host, an optional GPU and the link between them, described by the numbers the
// roofline cost model consumes (docs/cost-model.md §2.2; JSON schema in docs/target-profile.md).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_PLAN_TARGETPROFILE_H
#define HELM_PASSES_PLAN_TARGETPROFILE_H

#include "contract/helm_contract.h"
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace helm {

struct CpuProfile {
  std::string name;
  double dramBwGbs = 0;          // M: sustained DRAM bandwidth, GB/s
  double l3Bytes = 0;            // C_L3
  double l3BwGbs = 0;            // B_L3
  double pDecGflops = 0;         // compute rate at decode (GEMV), GFLOP/s
  double pPreGflops = 0;         // compute rate at prefill (GEMM), GFLOP/s
  double ramBytes = 0;           // host memory available to the model
  double overheadMsPerBlock = 0; // δ_cpu
  int cores = 0;
  /// Decode attention's compute rate, GFLOP/s: the vector rate of work whose operands are in
  /// cache (attention reuses each K and V row for every query head of its group). 0: p_dec, the
  /// thesis' one decode rate.
  double pAttnGflops = 0;
  double attentionGflops() const { return pAttnGflops > 0 ? pAttnGflops : pDecGflops; }
};

struct GpuProfile {
  std::string name;
  double vramBytes = 0;
  double reservedBytes = 0;      // kept free for the runtime, activations and fragmentation
  double memBwGbs = 0;
  double pDecGflops = 0;
  double pPreGflops = 0;
  double overheadMsPerBlock = 0; // δ_gpu
};

struct LinkProfile {
  double bwGbs = 0;
  double latencyUs = 0;
};

struct TargetProfile {
  std::string name;
  std::string source;            // where the numbers come from
  CpuProfile cpu;
  std::optional<GpuProfile> gpu; // absent: a CPU-only target
  LinkProfile link;
  double etaC = 1.0, etaM = 1.0; // compute and memory efficiencies
  /// The device that runs the GPU stage: a CUDA GPU, or the emulated GPU for `emu:` targets (the
  /// plan is the named GPU's; the package's target.device tells helm-rt which backend to stand up).
  helm_device_kind gpuDevice = HELM_DEVICE_CUDA;
  bool emulated() const { return gpuDevice == HELM_DEVICE_EMU; }
};

/// The built-in catalogue (docs/cost-model.md §8), in a fixed order.
const std::vector<TargetProfile> &targetCatalogue();

/// Parses a profile JSON document. The error names the field ("gpu.mem_bw_gbs is missing",
/// "cpu.dram_bw_gbs must be positive, got 0").
llvm::Expected<TargetProfile> parseTargetProfile(llvm::StringRef json);

/// The profile as JSON (the same schema parseTargetProfile reads).
std::string targetProfileToJson(const TargetProfile &target);
llvm::json::Value targetProfileToJsonValue(const TargetProfile &target);

/// Resolves `--target`: a catalogue name, `emu:<catalogue name>` (plan for that GPU, run on the
/// emulated device), a path to a profile JSON file, or `host` (measured now through `measureHost`).
llvm::Expected<TargetProfile> resolveTarget(llvm::StringRef spec);

/// The profile as the module attribute `helm.target`, so passes plan without touching hardware. The
/// round trip is exact: every field, including the GPU stage's backend (cuda or emu), travels.
TargetAttr targetToAttr(mlir::MLIRContext *ctx, const TargetProfile &target);
llvm::Expected<TargetProfile> targetFromAttr(TargetAttr attr);

} // namespace helm

#endif
