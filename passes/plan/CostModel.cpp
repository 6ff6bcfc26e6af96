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

/// A unit's FLOPs and bytes for `phase` at `tokens`. The attribute holds the prefill terms at the
/// annotated prompt length (options.promptLen); they scale linearly with the prompt, but for the
/// head, which projects the last position only, and attention, which is Σ_{t=1..S} of its per-token
/// cost.
struct UnitWork {
  double projFlops = 0, attnFlops = 0, paramBytes = 0, kvBytes = 0, actBytes = 0;
};
UnitWork workOf(const UnitCost &c, const PlanOptions &o, Phase phase, int64_t tokens) {
  UnitWork w;
  double s = double(tokens), batch = double(o.batch);
  w.kvBytes = double(c.kvBytesPerToken) * s * batch;
  if (phase == Phase::decode) {
    w.projFlops = c.projFlopsDecode;
    w.attnFlops = c.attnFlopsPerToken * s;
    w.paramBytes = double(c.paramBytes);
    w.actBytes = double(c.actBytes);
    return w;
  }
  double scale = s / double(std::max<int64_t>(o.promptLen, 1));
  bool lastPositionOnly = c.kind == "head";
  w.projFlops = lastPositionOnly ? c.projFlopsPrefill : c.projFlopsPrefill * scale;
  w.attnFlops = c.attnFlopsPerToken / 2 * s * (s + 1);
  w.paramBytes = c.kind == "embedding" ? double(c.prefillParamBytes) * scale : double(c.prefillParamBytes);
  w.actBytes = double(c.prefillActBytes) * scale;
  return w;
}
} // namespace

double stageMs(const std::vector<UnitCost> &units, size_t lo, size_t hi, bool onGpu,
               const TargetProfile &t, const PlanOptions &o, Phase phase, int64_t tokens) {
  if (lo >= hi || (onGpu && !t.gpu))
    return 0;
  bool prefill = phase == Phase::prefill;
  double bw = onGpu ? t.gpu->memBwGbs : t.cpu.dramBwGbs;
  double rate = onGpu ? (prefill ? t.gpu->pPreGflops : t.gpu->pDecGflops)
                      : (prefill ? t.cpu.pPreGflops : t.cpu.pDecGflops);
  double delta = onGpu ? t.gpu->overheadMsPerBlock : t.cpu.overheadMsPerBlock;
  // Eq. 4.14: the share of this stage's KV bytes that fits in L3 streams at L3 bandwidth (CPU only).
  double kvStage = kvBytes(units, lo, hi, double(tokens), o.batch);
  double alpha = onGpu ? 0.0 : kvStage > 0 ? std::min(1.0, t.cpu.l3Bytes / kvStage) : 1.0;
  double kvBw = onGpu ? bw : alpha * t.cpu.l3BwGbs + (1 - alpha) * bw;
  double total = 0;
  for (size_t u = lo; u < hi; ++u) {
    UnitWork w = workOf(units[u], o, phase, tokens);
    double tProj = std::max(msForFlops(w.projFlops, rate * t.etaC), msForBytes(w.paramBytes, bw * t.etaM));
    double tAttn = units[u].kvBytesPerToken == 0
                       ? 0.0
                       : std::max(msForFlops(w.attnFlops, rate * t.etaC), msForBytes(w.kvBytes, kvBw * t.etaM));
    total += tProj + tAttn + delta;
  }
  return total;
}

namespace {
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

namespace {
double linkMs(const TargetProfile &t, double bytes) {
  return t.link.latencyUs / 1000.0 + msForBytes(bytes, t.link.bwGbs);
}

/// The boundary activation's crossing after unit k - 1 (eq. 4.15; 0 for a single-device split).
double boundaryMs(const std::vector<UnitCost> &units, size_t k, const TargetProfile &t,
                  const PlanOptions &o, Phase phase, int64_t tokens) {
  if (k == 0 || k >= units.size() || !t.gpu)
    return 0;
  return linkMs(t, workOf(units[k - 1], o, phase, tokens).actBytes);
}

/// The first unit a streamed prefill would stream: the embedding stays on the CPU (its gather reads
/// B·S rows of a table that would cross whole).
size_t firstStreamedUnit(const std::vector<UnitCost> &units, size_t k) {
  size_t first = 0;
  while (first < k && units[first].kind == "embedding")
    ++first;
  return first;
}
} // namespace

double splitPrefillMs(const std::vector<UnitCost> &units, size_t k, const TargetProfile &t,
                      const PlanOptions &o, int64_t tokens) {
  return stageMs(units, 0, k, /*onGpu=*/false, t, o, Phase::prefill, tokens) +
         boundaryMs(units, k, t, o, Phase::prefill, tokens) +
         stageMs(units, k, units.size(), /*onGpu=*/true, t, o, Phase::prefill, tokens);
}

StreamedPrefill streamedPrefill(const std::vector<UnitCost> &units, size_t k, const TargetProfile &t,
                                const PlanOptions &o, int64_t tokens) {
  StreamedPrefill r;
  const size_t n = units.size();
  size_t first = firstStreamedUnit(units, k);
  if (!t.gpu) {
    r.reason = "target has no GPU";
    return r;
  }
  if (first >= k) {
    r.reason = "no CPU unit to stream";
    return r;
  }
  r.possible = true;
  // What each streamed unit copies, tensor by tensor, in the order its ops first use them.
  auto tensorsOf = [&](size_t u) {
    std::vector<double> sizes;
    for (const auto &[name, bytes] : units[u].tensors)
      sizes.push_back(double(bytes));
    if (sizes.empty())
      sizes.push_back(double(units[u].residentBytes));
    return sizes;
  };
  double largest = 0;
  for (size_t u = first; u < k; ++u)
    for (double bytes : tensorsOf(u)) {
      largest = std::max(largest, bytes);
      r.streamedBytes += bytes;
    }
  r.slotBytes = 2 * largest;

  // The CPU gathers the embedding rows and sends them; meanwhile the copy engine fills the slots.
  double ready = stageMs(units, 0, first, /*onGpu=*/false, t, o, Phase::prefill, tokens) +
                 boundaryMs(units, first, t, o, Phase::prefill, tokens);
  // Two slots, one host-to-device copy engine: tensor j's copy starts when the previous copy is done
  // and tensor j - 2 (the slot's last user) has been computed; its share of the unit's work starts
  // when its copy and the previous tensor's work are done. Each unit's prompt KV goes back to the
  // host on the other direction of the link once the unit is done.
  double copyEnd = 0, doneBefore[2] = {0, 0}, workEnd = ready, kvBackEnd = 0;
  size_t j = 0;
  for (size_t u = first; u < k; ++u) {
    double unitWork = stageMs(units, u, u + 1, /*onGpu=*/true, t, o, Phase::prefill, tokens);
    std::vector<double> sizes = tensorsOf(u);
    double unitBytes = 0;
    for (double bytes : sizes)
      unitBytes += bytes;
    for (double bytes : sizes) {
      double share = unitBytes > 0 ? bytes / unitBytes : 1.0 / double(sizes.size());
      double slotFree = doneBefore[j % 2];
      copyEnd = std::max(copyEnd, slotFree) + linkMs(t, bytes);
      workEnd = std::max(copyEnd, workEnd) + unitWork * share;
      doneBefore[j % 2] = workEnd;
      ++j;
    }
    double kv = workOf(units[u], o, Phase::prefill, tokens).kvBytes;
    if (kv > 0)
      kvBackEnd = std::max(kvBackEnd, workEnd) + linkMs(t, kv);
  }
  double resident = stageMs(units, k, n, /*onGpu=*/true, t, o, Phase::prefill, tokens);
  r.ms = std::max(workEnd + resident, kvBackEnd);
  return r;
}

llvm::Expected<Plan> planPartition(const std::vector<UnitCost> &units, const TargetProfile &t,
                                   const PlanOptions &o) {
  Plan plan;
  plan.streamPrefill = o.streamPrefill;
  const size_t n = units.size();
  if (n == 0)
    return llvm::createStringError("the model has no partition units");
  double avail = 0;
  if (t.gpu)
    avail = t.gpu->vramBytes - (o.vramReserve ? *o.vramReserve : t.gpu->reservedBytes);
  bool prefill = o.objective == Objective::prefill;
  Phase phase = prefill ? Phase::prefill : Phase::decode;
  int64_t tokens = prefill ? o.promptLen : o.context;
  // The longest prompt a crossover is searched to.
  int64_t longest = std::max(o.context, o.promptLen);
  for (size_t k = 0; k <= n; ++k) {
    Candidate c;
    c.k = int64_t(k);
    double gpuKv = kvBytes(units, k, n, double(o.context), o.batch);
    c.gpuBytes = residentBytes(units, k, n) + (o.kvOffload ? 0.0 : gpuKv);
    c.hostBytes = residentBytes(units, 0, k) + kvBytes(units, 0, k, double(o.context), o.batch) +
                  (o.kvOffload ? gpuKv : 0.0);
    c.stream = streamedPrefill(units, k, t, o, o.promptLen);
    if (c.stream.possible) {
      double withSlots = c.gpuBytes + c.stream.slotBytes;
      c.stream.fits = withSlots <= avail;
      if (!c.stream.fits)
        c.stream.reason = "GPU needs " + gb(withSlots) + " with the staging slots, " + gb(avail) +
                          " available";
      if (o.streamPrefill)
        c.gpuBytes = withSlots;
    }
    if (k < n && !t.gpu) {
      c.reason = "target has no GPU";
    } else if ((k < n || (o.streamPrefill && c.stream.possible)) && c.gpuBytes > avail) {
      c.reason = "GPU needs " + gb(c.gpuBytes) +
                 (o.streamPrefill && c.stream.possible ? " with the staging slots" : "") + ", " +
                 gb(avail) + " available";
    } else if (c.hostBytes > t.cpu.ramBytes) {
      c.reason = "host needs " + gb(c.hostBytes) + ", " + gb(t.cpu.ramBytes) + " RAM";
    } else {
      c.feasible = true;
    }
    c.tCpuMs = stageMs(units, 0, k, /*onGpu=*/false, t, o, phase, tokens);
    c.tGpuMs = stageMs(units, k, n, /*onGpu=*/true, t, o, phase, tokens);
    c.tCommMs = boundaryMs(units, k, t, o, phase, tokens);
    c.tPlanMs = c.tCpuMs + c.tGpuMs + c.tCommMs;
    c.decodeMs = prefill ? stageMs(units, 0, k, false, t, o, Phase::decode, o.context) +
                               boundaryMs(units, k, t, o, Phase::decode, o.context) +
                               stageMs(units, k, n, true, t, o, Phase::decode, o.context)
                         : c.tPlanMs;
    c.prefillMs = prefill ? c.tPlanMs : splitPrefillMs(units, k, t, o, o.promptLen);
    if (c.stream.possible) {
      // The shortest prompt that streams faster: doubling, then bisection (the split's prefill grows
      // faster per prompt position than the streamed one's, whose weight copies are fixed).
      auto faster = [&](int64_t s) {
        return streamedPrefill(units, k, t, o, s).ms < splitPrefillMs(units, k, t, o, s);
      };
      int64_t lo = 0, hi = 1;
      while (hi < longest && !faster(hi)) {
        lo = hi;
        hi = std::min(hi * 2, longest);
      }
      if (faster(hi)) {
        while (hi - lo > 1) {
          int64_t mid = lo + (hi - lo) / 2;
          (faster(mid) ? hi : lo) = mid;
        }
        c.stream.crossover = hi;
      }
    }
    if (o.streamPrefill && prefill && c.prefillStreamed())
      c.tPlanMs = c.stream.ms; // the prompt's time is the streamed one's
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
    if (allCpu.hostBytes <= t.cpu.ramBytes) // what does not fit is the streamed prefill's slots
      return llvm::createStringError("no feasible plan with streamed prefill: even all on the CPU the " +
                                     allCpu.reason + " (plan without --stream-prefill)");
    return llvm::createStringError("no feasible plan: even all on the CPU the model needs " +
                                   gb(allCpu.hostBytes) + " of host RAM and the target has " +
                                   gb(t.cpu.ramBytes) + " (" +
                                   gb(allCpu.hostBytes - t.cpu.ramBytes) + " missing)");
  }
  plan.predictedMsPerToken = plan.candidates[size_t(plan.chosenK)].tPlanMs;
  return plan;
}

} // namespace helm
