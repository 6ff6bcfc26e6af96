//===- CostModel.cpp - roofline cost of a CPU/GPU split (thesis eq. 4.7-4.16) ---===//
#include "passes/plan/CostModel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace helm {

namespace {
double msForBytes(double bytes, double gbs) { return bytes / (gbs * 1e6); }
double msForFlops(double flops, double gflops) { return flops / (gflops * 1e6); }

/// Bytes for a message: GB for model-sized numbers, smaller units below.
std::string gb(double bytes) {
  if (std::fabs(bytes) >= 1e9)
    return llvm::formatv("{0:f3} GB", bytes / 1e9).str();
  if (std::fabs(bytes) >= 1e6)
    return llvm::formatv("{0:f3} MB", bytes / 1e6).str();
  return llvm::formatv("{0:f0} B", bytes).str();
}

/// KV bytes of units [lo, hi) for `tokens` positions of each of `batch` sequences.
double kvBytes(const std::vector<UnitCost> &units, size_t lo, size_t hi, double tokens, int64_t batch) {
  double bytes = 0;
  for (size_t u = lo; u < hi; ++u)
    bytes += double(units[u].kvBytesPerToken) * tokens * double(batch);
  return bytes;
}

/// Time of one stage (eq. 4.8 with 4.10, 4.13, 4.14 and the per-unit overhead δ).
double stageMs(const std::vector<UnitCost> &units, size_t lo, size_t hi, bool onGpu,
               const TargetProfile &t, const PlanOptions &o) {
  if (lo >= hi)
    return 0;
  bool prefill = o.objective == Objective::prefill;
  double tokens = prefill ? double(o.promptLen) : double(o.context);
  double bw = onGpu ? t.gpu->memBwGbs : t.cpu.dramBwGbs;
  double rate = onGpu ? (prefill ? t.gpu->pPreGflops : t.gpu->pDecGflops)
                      : (prefill ? t.cpu.pPreGflops : t.cpu.pDecGflops);
  double delta = onGpu ? t.gpu->overheadMsPerBlock : t.cpu.overheadMsPerBlock;
  // Eq. 4.14: the share of this stage's KV bytes that fits in L3 streams at L3 bandwidth (CPU only).
  double kvStage = kvBytes(units, lo, hi, tokens, o.batch);
  double alpha = onGpu ? 0.0 : kvStage > 0 ? std::min(1.0, t.cpu.l3Bytes / kvStage) : 1.0;
  double kvBw = onGpu ? bw : alpha * t.cpu.l3BwGbs + (1 - alpha) * bw;
  double total = 0;
  for (size_t u = lo; u < hi; ++u) {
    const UnitCost &c = units[u];
    double projFlops = prefill ? c.projFlopsPrefill : c.projFlopsDecode;
    double bytes = double(prefill ? c.prefillParamBytes : c.paramBytes);
    double tProj = std::max(msForFlops(projFlops, rate * t.etaC), msForBytes(bytes, bw * t.etaM));
    double attnFlops = prefill ? c.attnFlopsPrefill : c.attnFlopsPerToken * tokens;
    double kvUnit = double(c.kvBytesPerToken) * tokens * double(o.batch);
    double tAttn = c.kvBytesPerToken == 0
                       ? 0.0
                       : std::max(msForFlops(attnFlops, rate * t.etaC), msForBytes(kvUnit, kvBw * t.etaM));
    total += tProj + tAttn + delta;
  }
  return total;
}

/// Bytes of the distinct weights of units [lo, hi) (a tied table counts once per device).
double residentBytes(const std::vector<UnitCost> &units, size_t lo, size_t hi) {
  std::set<std::string> seen;
  double bytes = 0;
  for (size_t u = lo; u < hi; ++u) {
    if (units[u].tensors.empty()) {
      bytes += double(units[u].residentBytes);
      continue;
    }
    for (const auto &[name, size] : units[u].tensors)
      if (seen.insert(name).second)
        bytes += double(size);
  }
  return bytes;
}
} // namespace

llvm::Expected<Plan> planPartition(const std::vector<UnitCost> &units, const TargetProfile &t,
                                   const PlanOptions &o) {
  Plan plan;
  const size_t n = units.size();
  if (n == 0)
    return llvm::createStringError("the model has no partition units");
  double avail = 0;
  if (t.gpu)
    avail = t.gpu->vramBytes - (o.vramReserve ? *o.vramReserve : t.gpu->reservedBytes);
  bool prefill = o.objective == Objective::prefill;
  for (size_t k = 0; k <= n; ++k) {
    Candidate c;
    c.k = int64_t(k);
    double gpuKv = kvBytes(units, k, n, double(o.context), o.batch);
    c.gpuBytes = residentBytes(units, k, n) + (o.kvOffload ? 0.0 : gpuKv);
    c.hostBytes = residentBytes(units, 0, k) + kvBytes(units, 0, k, double(o.context), o.batch) +
                  (o.kvOffload ? gpuKv : 0.0);
    if (k < n && !t.gpu) {
      c.reason = "target has no GPU";
    } else if (k < n && c.gpuBytes > avail) {
      c.reason = "GPU needs " + gb(c.gpuBytes) + ", " + gb(avail) + " available";
    } else if (c.hostBytes > t.cpu.ramBytes) {
      c.reason = "host needs " + gb(c.hostBytes) + ", " + gb(t.cpu.ramBytes) + " RAM";
    } else {
      c.feasible = true;
    }
    c.tCpuMs = stageMs(units, 0, k, /*onGpu=*/false, t, o);
    c.tGpuMs = t.gpu ? stageMs(units, k, n, /*onGpu=*/true, t, o) : 0.0;
    if (k > 0 && k < n && t.gpu) {
      double boundary = double(prefill ? units[k - 1].prefillActBytes : units[k - 1].actBytes);
      c.tCommMs = t.link.latencyUs / 1000.0 + msForBytes(boundary, t.link.bwGbs);
    }
    c.tPlanMs = c.tCpuMs + c.tGpuMs + c.tCommMs;
    plan.candidates.push_back(c);
  }
  if (o.forceSplit) {
    int64_t k = *o.forceSplit;
    if (k < 0 || k > int64_t(n))
      return llvm::createStringError("--force-split=" + std::to_string(k) +
                                     " is out of range (0.." + std::to_string(n) + " for " +
                                     std::to_string(n) + " units)");
    const Candidate &c = plan.candidates[size_t(k)];
    if (!c.feasible)
      return llvm::createStringError("--force-split=" + std::to_string(k) +
                                     " is infeasible: " + c.reason);
    plan.chosenK = k;
  } else {
    for (const Candidate &c : plan.candidates) // strict <: ties keep the smaller k
      if (c.feasible && (plan.chosenK < 0 || c.tPlanMs < plan.candidates[size_t(plan.chosenK)].tPlanMs))
        plan.chosenK = c.k;
  }
  if (plan.chosenK < 0) {
    const Candidate &allCpu = plan.candidates.back();
    return llvm::createStringError("no feasible plan: even all on the CPU the model needs " +
                                   gb(allCpu.hostBytes) + " of host RAM and the target has " +
                                   gb(t.cpu.ramBytes) + " (" +
                                   gb(allCpu.hostBytes - t.cpu.ramBytes) + " missing)");
  }
  plan.predictedMsPerToken = plan.candidates[size_t(plan.chosenK)].tPlanMs;
  return plan;
}

} // namespace helm
