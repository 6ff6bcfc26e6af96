//===- CostModel.cpp - roofline cost of a CPU/GPU split (thesis eq. 4.7-4.16) ---===//
#include "passes/plan/CostModel.h"
#include "passes/plan/SlicedFfn.h"

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
  // Causal: Σ_{t=1..S} of the per-position cost, S (S + 1) / 2 of it.
  double annotated = double(std::max<int64_t>(o.promptLen, 1));
  w.attnFlops = c.attnFlopsPrefill * (s * (s + 1)) / (annotated * (annotated + 1));
  w.paramBytes = c.kind == "embedding" ? double(c.prefillParamBytes) * scale : double(c.prefillParamBytes);
  w.actBytes = double(c.prefillActBytes) * scale;
  return w;
}

/// One device's rates for a phase; kvBw blends L3 over `kvWorkingSet` bytes (eq. 4.14, CPU only).
struct Rates {
  double bw = 0, rate = 0, attnRate = 0, delta = 0, kvBw = 0;
};
Rates ratesOf(const TargetProfile &t, bool onGpu, Phase phase, double kvWorkingSet) {
  Rates r;
  bool prefill = phase == Phase::prefill;
  r.bw = onGpu ? t.gpu->memBwGbs : t.cpu.dramBwGbs;
  r.rate = onGpu ? (prefill ? t.gpu->pPreGflops : t.gpu->pDecGflops)
                 : (prefill ? t.cpu.pPreGflops : t.cpu.pDecGflops);
  // Decode attention on the CPU computes at its own rate when the profile measured one (§11.2).
  r.attnRate = !onGpu && !prefill ? t.cpu.attentionGflops() : r.rate;
  r.delta = onGpu ? t.gpu->overheadMsPerBlock : t.cpu.overheadMsPerBlock;
  double alpha = onGpu ? 0.0 : kvWorkingSet > 0 ? std::min(1.0, t.cpu.l3Bytes / kvWorkingSet) : 1.0;
  r.kvBw = onGpu ? r.bw : alpha * t.cpu.l3BwGbs + (1 - alpha) * r.bw;
  return r;
}
/// Eq. 4.10: the projections (and, for the embedding and head, their table reads).
double projMs(const UnitWork &w, const Rates &r, const TargetProfile &t) {
  return std::max(msForFlops(w.projFlops, r.rate * t.etaC), msForBytes(w.paramBytes, r.bw * t.etaM));
}
/// Eq. 4.13: the attention core over the KV cache (0 for a unit without one).
double attnMs(const UnitCost &c, const UnitWork &w, const Rates &r, const TargetProfile &t) {
  if (c.kvBytesPerToken == 0)
    return 0;
  return std::max(msForFlops(w.attnFlops, r.attnRate * t.etaC), msForBytes(w.kvBytes, r.kvBw * t.etaM));
}
} // namespace

double stageMs(const std::vector<UnitCost> &units, size_t lo, size_t hi, bool onGpu,
               const TargetProfile &t, const PlanOptions &o, Phase phase, int64_t tokens) {
  if (lo >= hi || (onGpu && !t.gpu))
    return 0;
  Rates r = ratesOf(t, onGpu, phase, kvBytes(units, lo, hi, double(tokens), o.batch));
  double total = 0;
  for (size_t u = lo; u < hi; ++u) {
    UnitWork w = workOf(units[u], o, phase, tokens);
    total += projMs(w, r, t) + attnMs(units[u], w, r, t) + r.delta;
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

double linkMs(const TargetProfile &t, double bytes) {
  return t.link.latencyUs / 1000.0 + msForBytes(bytes, t.link.bwGbs);
}

/// The GPU memory a plan may fill: VRAM less the reserve (0 without a GPU).
double gpuAvailable(const TargetProfile &t, const PlanOptions &o) {
  return t.gpu ? t.gpu->vramBytes - (o.vramReserve ? *o.vramReserve : t.gpu->reservedBytes) : 0.0;
}

/// §11.1: the KV bytes a decode step streams back, the GPU pages (f32 rows) of `units` that keep
/// their attention beyond the watermark of `gpuFree`; 0 with kv-offload off (the KV must fit).
double spilledKvBytes(const std::vector<UnitCost> &units, const std::vector<bool> &keeps,
                      const PlanOptions &o, double gpuFree) {
  if (!o.kvOffload)
    return 0;
  double pages = 0;
  for (size_t u = 0; u < units.size(); ++u)
    if (keeps[u])
      pages += units[u].deviceKvBytesPerToken() * double(o.context) * double(o.batch);
  return std::max(0.0, pages - o.kvWatermark * std::max(0.0, gpuFree));
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

/// GPU blocks of split k whose attention core runs on the CPU when `count` of them do (LIA): the
/// first `count` GPU units with a KV cache.
std::vector<bool> cpuAttentionUnits(const std::vector<UnitCost> &units, size_t k, int64_t count) {
  std::vector<bool> moved(units.size(), false);
  for (size_t u = k; u < units.size() && count > 0; ++u)
    if (units[u].kvBytesPerToken > 0) {
      moved[u] = true;
      --count;
    }
  return moved;
}

int64_t gpuAttentionBlocks(const std::vector<UnitCost> &units, size_t k) {
  int64_t blocks = 0;
  for (size_t u = k; u < units.size(); ++u)
    blocks += units[u].kvBytesPerToken > 0;
  return blocks;
}

/// One decode step of split k at the options' context, `cpuAttention` GPU blocks having their
/// attention core on the CPU beside their KV in host RAM (§11). `gpuFree` is the GPU memory left
/// after the resident units (and staging slots): KV pages take `kvWatermark` of it, and with
/// kv-offload the GPU blocks' KV beyond that streams back over the link every step.
struct DecodeStep {
  double cpuMs = 0, gpuMs = 0, commMs = 0, spillBytes = 0;
  double total() const { return cpuMs + gpuMs + commMs; }
};
DecodeStep decodeStep(const std::vector<UnitCost> &units, size_t k, int64_t cpuAttention,
                      const TargetProfile &t, const PlanOptions &o, double gpuFree) {
  DecodeStep r;
  const size_t n = units.size();
  const int64_t c = o.context;
  std::vector<bool> moved = cpuAttentionUnits(units, k, cpuAttention);
  // The moved blocks' KV in host rows (the model's width); the rest in the GPU's pages.
  double movedKv = 0, gpuKv = 0;
  std::vector<bool> keeps(n, false);
  for (size_t u = k; u < n; ++u) {
    (moved[u] ? movedKv : gpuKv) += double(units[u].kvBytesPerToken) * double(c) * double(o.batch);
    keeps[u] = !moved[u];
  }
  // The CPU: its units, then the moved attention cores, all over one KV working set.
  Rates cpu = ratesOf(t, /*onGpu=*/false, Phase::decode, kvBytes(units, 0, k, double(c), o.batch) + movedKv);
  for (size_t u = 0; u < k; ++u) {
    UnitWork w = workOf(units[u], o, Phase::decode, c);
    r.cpuMs += projMs(w, cpu, t) + attnMs(units[u], w, cpu, t) + cpu.delta;
  }
  r.commMs = boundaryMs(units, k, t, o, Phase::decode, c);
  if (!t.gpu || k >= n)
    return r;
  Rates gpu = ratesOf(t, /*onGpu=*/true, Phase::decode, gpuKv);
  for (size_t u = k; u < n; ++u) {
    UnitWork w = workOf(units[u], o, Phase::decode, c);
    r.gpuMs += projMs(w, gpu, t) + (moved[u] ? 0.0 : attnMs(units[u], w, gpu, t)) + gpu.delta;
    if (moved[u]) {
      r.cpuMs += attnMs(units[u], w, cpu, t);
      // q, k and v to the host, the output back: two crossings.
      r.commMs += linkMs(t, double(units[u].attnIoBytes)) + t.link.latencyUs / 1000.0;
    }
  }
  r.spillBytes = spilledKvBytes(units, keeps, o, gpuFree);
  if (r.spillBytes > 0)
    r.commMs += msForBytes(r.spillBytes, t.link.bwGbs);
  return r;
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
  // The head projects the prompt's last position only: cheaper on the CPU than its table's copy,
  // so with k = N it stays there and the last hidden state comes back.
  size_t end = k;
  if (k == n && n > 0 && units[n - 1].kind == "head")
    end = n - 1;
  if (!t.gpu) {
    r.reason = "target has no GPU";
    return r;
  }
  if (first >= end) {
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
  for (size_t u = first; u < end; ++u)
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
  for (size_t u = first; u < end; ++u) {
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
  double head = end < k ? linkMs(t, double(units[end - 1].actBytes)) +
                              stageMs(units, end, k, /*onGpu=*/false, t, o, Phase::prefill, tokens)
                        : 0.0;
  r.ms = std::max(workEnd + resident, kvBackEnd) + head;
  return r;
}

SlicedFfnPlan slicedFfnPlan(const std::vector<UnitCost> &units, const TargetProfile &t,
                            const PlanOptions &o) {
  SlicedFfnPlan r;
  const size_t n = units.size();
  if (!t.gpu) {
    r.reason = "target has no GPU";
    return r;
  }
  size_t first = firstStreamedUnit(units, n);
  std::vector<size_t> blocks;
  double ffnBytes = 0, ffnElems = 0, gemmBytes = 0;
  for (size_t u = first; u < n; ++u)
    if (units[u].ffnWeightElems > 0) {
      blocks.push_back(u);
      ffnBytes += double(units[u].ffnBytes);
      ffnElems += double(units[u].ffnWeightElems);
      gemmBytes = std::max(gemmBytes, double(units[u].ffnBytes) / 3);
    }
  if (blocks.empty()) {
    r.reason = "the model has no gated FFN";
    return r;
  }
  double avail = gpuAvailable(t, o);
  double gpuKv = kvBytes(units, first, n, double(o.context), o.batch);
  // The GPU holds every unit after the embedding but its FFN weights, two slots for the CG copies
  // (each at most one GEMM's weights) and, with kv-offload off, the KV.
  double fixed = residentBytes(units, first, n) - ffnBytes + 2 * gemmBytes + (o.kvOffload ? 0.0 : gpuKv);
  double budget = avail - fixed;
  if (budget < 0) {
    r.reason = "GPU needs " + gb(fixed) + " for every unit but the embedding and the FFNs, " + gb(avail) +
               " available";
    return r;
  }
  r.possible = true;
  // ScheInfer's models from the roofline profile (seconds): a decode GEMM per weight element at the
  // options' batch, its memory or its FLOPs; a copy per byte with the link's latency as α. No
  // launch or start-up terms (the profile's δ stays per unit).
  double bytesPerElem = ffnBytes / ffnElems, batch = double(o.batch);
  sliced::Rates rates;
  rates.gpu.beta = std::max(bytesPerElem / (t.gpu->memBwGbs * t.etaM * 1e9),
                            2 * batch / (t.gpu->pDecGflops * t.etaC * 1e9));
  rates.cpu.beta = std::max(bytesPerElem / (t.cpu.dramBwGbs * t.etaM * 1e9),
                            2 * batch / (t.cpu.pDecGflops * t.etaC * 1e9));
  rates.copy = {t.link.latencyUs * 1e-6, 1 / (t.link.bwGbs * 1e9)};
  std::vector<sliced::Layer> layers;
  for (size_t u : blocks)
    layers.push_back({3, double(units[u].ffnWeightElems) / 3, double(units[u].ffnBytes) / 3});
  sliced::Assignment a = sliced::assignGpuMemory(rates, layers, budget, /*grid=*/10);
  r.ggBytes = a.bytesUsed;
  r.gpuBytes = fixed + a.bytesUsed;
  // The step: the embedding on the CPU and its rows across, then every other unit on the GPU, each
  // block's FFN as its three slices (its input down to the CPU and the CPU slice's output up when
  // that slice is not empty), and the KV beyond the GPU's free memory streamed back (§11.1).
  Rates gpu = ratesOf(t, /*onGpu=*/true, Phase::decode, gpuKv);
  r.decodeMs = stageMs(units, 0, first, /*onGpu=*/false, t, o, Phase::decode, o.context) +
               boundaryMs(units, first, t, o, Phase::decode, o.context);
  size_t b = 0;
  for (size_t u = first; u < n; ++u) {
    const UnitCost &c = units[u];
    UnitWork w = workOf(c, o, Phase::decode, o.context);
    bool sliced = b < blocks.size() && blocks[b] == u;
    if (sliced) {
      w.projFlops -= 2 * batch * double(c.ffnWeightElems);
      w.paramBytes -= double(c.ffnBytes);
    }
    r.decodeMs += projMs(w, gpu, t) + attnMs(c, w, gpu, t) + gpu.delta;
    if (sliced) {
      const sliced::Split &s = a.splits[b];
      r.rGG.push_back(s.rGG);
      r.rCG.push_back(s.rCG);
      r.decodeMs += s.time * 1e3;
      if (s.rCG + s.rGG < 1)
        r.decodeMs += 2 * linkMs(t, double(c.actBytes));
      ++b;
    }
  }
  std::vector<bool> onGpu(n, false);
  std::fill(onGpu.begin() + long(first), onGpu.end(), true);
  r.decodeMs += msForBytes(spilledKvBytes(units, onGpu, o, budget - a.bytesUsed), t.link.bwGbs);
  return r;
}

llvm::Expected<Plan> planPartition(const std::vector<UnitCost> &units, const TargetProfile &t,
                                   const PlanOptions &o) {
  Plan plan;
  plan.streamPrefill = o.streamPrefill;
  plan.cpuAttention = o.cpuAttention;
  const size_t n = units.size();
  if (n == 0)
    return llvm::createStringError("the model has no partition units");
  double avail = gpuAvailable(t, o);
  bool prefill = o.objective == Objective::prefill;
  // The longest prompt a crossover is searched to.
  int64_t longest = std::max(o.context, o.promptLen);
  for (size_t k = 0; k <= n; ++k) {
    Candidate c;
    c.k = int64_t(k);
    double gpuKv = kvBytes(units, k, n, double(o.context), o.batch);
    double gpuResident = residentBytes(units, k, n);
    c.gpuBytes = gpuResident + (o.kvOffload ? 0.0 : gpuKv);
    c.hostBytes = residentBytes(units, 0, k) + kvBytes(units, 0, k, double(o.context), o.batch) +
                  (o.kvOffload ? gpuKv : 0.0);
    c.stream = streamedPrefill(units, k, t, o, o.promptLen);
    bool slotsPlanned = o.streamPrefill && c.stream.possible;
    if (c.stream.possible) {
      double withSlots = c.gpuBytes + c.stream.slotBytes;
      c.stream.fits = withSlots <= avail;
      if (!c.stream.fits)
        c.stream.reason = "GPU needs " + gb(withSlots) + " with the staging slots, " + gb(avail) +
                          " available";
      if (slotsPlanned)
        c.gpuBytes = withSlots;
    }
    if (k < n && !t.gpu) {
      c.reason = "target has no GPU";
    } else if ((k < n || slotsPlanned) && c.gpuBytes > avail) {
      c.reason = "GPU needs " + gb(c.gpuBytes) + (slotsPlanned ? " with the staging slots" : "") + ", " +
                 gb(avail) + " available";
    } else if (c.hostBytes > t.cpu.ramBytes) {
      c.reason = "host needs " + gb(c.hostBytes) + ", " + gb(t.cpu.ramBytes) + " RAM";
    } else {
      c.feasible = true;
    }
    // Decode: the GPU's free memory after its weights (and slots) holds KV pages up to the
    // watermark. LIA's policy moves the attention cores of the first j GPU blocks to the CPU; with
    // kv-offload off the GPU holds its blocks' KV and no attention moves.
    double gpuFree = avail - gpuResident - (slotsPlanned ? c.stream.slotBytes : 0.0);
    int64_t movable = o.kvOffload && t.gpu ? gpuAttentionBlocks(units, k) : 0;
    const DecodeStep kept = decodeStep(units, k, 0, t, o, gpuFree);
    DecodeStep best = kept;
    for (int64_t j = 1; j <= movable; ++j) {
      DecodeStep step = decodeStep(units, k, j, t, o, gpuFree);
      if (step.total() < best.total()) {
        best = step;
        c.bestCpuAttentionBlocks = j;
      }
    }
    c.bestCpuAttentionDecodeMs = best.total();
    c.cpuAttentionBlocks = o.cpuAttention ? c.bestCpuAttentionBlocks : 0;
    const DecodeStep &decode = o.cpuAttention ? best : kept;
    c.spillBytes = decode.spillBytes;
    c.decodeMs = decode.total();
    // Prefill: a block whose decode attention runs on the CPU still prefills on the GPU; its
    // prompt KV then goes to host RAM.
    double movedKvMs = 0;
    std::vector<bool> moved = cpuAttentionUnits(units, k, c.cpuAttentionBlocks);
    for (size_t u = k; u < n; ++u)
      if (moved[u])
        movedKvMs += linkMs(t, workOf(units[u], o, Phase::prefill, o.promptLen).kvBytes);
    c.prefillMs = splitPrefillMs(units, k, t, o, o.promptLen) + movedKvMs;
    if (c.stream.possible)
      c.stream.ms += movedKvMs;
    if (prefill) {
      c.tCpuMs = stageMs(units, 0, k, /*onGpu=*/false, t, o, Phase::prefill, o.promptLen);
      c.tGpuMs = stageMs(units, k, n, /*onGpu=*/true, t, o, Phase::prefill, o.promptLen);
      c.tCommMs = boundaryMs(units, k, t, o, Phase::prefill, o.promptLen) + movedKvMs;
      c.tPlanMs = c.prefillMs;
      if (slotsPlanned && c.prefillStreamed())
        c.tPlanMs = c.stream.ms; // the prompt's time is the streamed one's
    } else {
      c.tCpuMs = decode.cpuMs;
      c.tGpuMs = decode.gpuMs;
      c.tCommMs = decode.commMs;
      c.tPlanMs = c.decodeMs;
    }
    if (c.stream.possible) {
      // The shortest prompt that streams faster: doubling, then bisection (the split's prefill grows
      // faster per prompt position than the streamed one's, whose weight copies are fixed).
      auto faster = [&](int64_t s) {
        return streamedPrefill(units, k, t, o, s).ms < splitPrefillMs(units, k, t, o, s);
      };
      int64_t lo = 0, hi = 1;
      while (hi < longest && !faster(hi)) {
        lo = hi;
        hi = hi > longest / 2 ? longest : hi * 2;
      }
      if (faster(hi)) {
        while (hi - lo > 1) {
          int64_t mid = lo + (hi - lo) / 2;
          (faster(mid) ? hi : lo) = mid;
        }
        c.stream.crossover = hi;
      }
    }
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
  plan.sliced = slicedFfnPlan(units, t, o);
  return plan;
}

} // namespace helm
