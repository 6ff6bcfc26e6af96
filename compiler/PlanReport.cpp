//===- PlanReport.cpp - the partition plan as a table, JSON and SVG -------------===//
#include "compiler/PlanReport.h"

#include "passes/plan/UnitCosts.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace helm {

namespace {
struct Row {
  int64_t k;
  bool feasible;
  std::string reason;
  double tCpu, tGpu, tComm, tPlan;
  double tDecode, tPrefill;
  bool streamPossible, streamFits;
  std::string streamReason;
  double tStream, slotBytes, streamedBytes;
  int64_t crossover;
  int64_t cpuAttentionBlocks;
  double spillBytes;
  int64_t bestCpuAttentionBlocks;
  double bestCpuAttentionMs;
};

struct PlanView {
  int64_t chosenK = -1;
  double predicted = 0;
  std::string objective;
  bool kvOffload = true;
  bool streamPrefill = false;
  bool cpuAttention = false;
  SlicedFfnAttr sliced;
  int64_t batch = 1, context = 0, promptLen = 0;
  std::vector<Row> rows;
};

PlanView readPlan(ModuleOp module) {
  PlanView v;
  MLIRContext *ctx = module.getContext();
  PlanAttr plan = HelmDialect::PlanAttrHelper(ctx).getAttr(module);
  CostOptionsAttr options = HelmDialect::CostOptionsAttrHelper(ctx).getAttr(module);
  if (!plan || !options)
    return v;
  v.chosenK = plan.getChosenK();
  v.predicted = plan.getPredictedMsPerToken();
  v.objective = plan.getObjective().str();
  v.kvOffload = plan.getKvOffload();
  v.streamPrefill = plan.getStreamPrefill();
  v.cpuAttention = plan.getCpuAttention();
  v.sliced = plan.getSliced();
  v.batch = options.getBatch();
  v.context = options.getContextTokens();
  v.promptLen = options.getPromptLen();
  for (PlanCandidateAttr c : plan.getCandidates())
    v.rows.push_back({c.getK(), c.getFeasible(), c.getReason().str(), c.getTCpuMs(), c.getTGpuMs(),
                      c.getTCommMs(), c.getTPlanMs(), c.getTDecodeMs(), c.getTPrefillMs(),
                      c.getStreamPossible(), c.getStreamFits(), c.getStreamReason().str(),
                      c.getTStreamMs(), c.getStreamSlotBytes(), c.getStreamedBytes(),
                      c.getStreamCrossover(), c.getCpuAttentionBlocks(), c.getSpillBytes(),
                      c.getBestCpuAttentionBlocks(), c.getBestCpuAttentionDecodeMs()});
  return v;
}
/// The longest context (positions per sequence) whose KV cache fits host RAM at split k: the
/// host holds the CPU units' weights and KV, plus the GPU units' KV when it may be offloaded
/// (pages spill there). -1 when no KV lives on the host (unbounded by host RAM), 0 when the
/// weights alone do not fit.
int64_t hostContextLimit(ModuleOp module, const TargetProfile &target, int64_t k, int64_t batch,
                         bool kvOffload) {
  double resident = 0, kvPerToken = 0;
  int64_t index = 0;
  for (UnitOp unit : unitsOf(module)) {
    UnitCost c;
    if (readUnitCost(unit, c)) {
      bool onCpu = index < k;
      if (onCpu)
        resident += double(c.residentBytes);
      if (onCpu || kvOffload)
        kvPerToken += double(c.kvBytesPerToken);
    }
    ++index;
  }
  if (kvPerToken <= 0)
    return -1;
  double left = target.cpu.ramBytes - resident;
  if (left <= 0)
    return 0;
  return int64_t(std::floor(left / (kvPerToken * double(std::max<int64_t>(batch, 1)))));
}
} // namespace

std::string splitName(int64_t k, int64_t n) {
  if (k == 0)
    return "cuda(" + std::to_string(n) + ")";
  if (k == n)
    return "cpu(" + std::to_string(n) + ")";
  return "cpu(" + std::to_string(k) + ")->cuda(" + std::to_string(n - k) + ")";
}

std::string planTable(ModuleOp module, const TargetProfile &target, const ModelConfig &config) {
  PlanView v = readPlan(module);
  int64_t n = int64_t(v.rows.size()) - 1;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "target  " << target.name << ": " << target.source << "\n";
  os << "model   " << config.architecture << ", " << config.numLayers << " layers, hidden "
     << config.hiddenSize << ", " << config.dtype << ", " << n << " units\n";
  os << "options objective " << v.objective << ", batch " << v.batch << ", context " << v.context
     << ", prompt " << v.promptLen << ", kv-offload " << (v.kvOffload ? "on" : "off") << "\n\n";
  os << llvm::formatv("  {0,4}  {1,-20} {2,10} {3,10} {4,10} {5,10} {6,10} {7,8} {8,10} {9,10} {10,11} "
                      "{11,7}  {12}\n",
                      "k", "split", "T_cpu ms", "T_gpu ms", "T_comm ms", "T_plan ms", "decode ms",
                      "attn@cpu", "that ms", "prefill ms", "streamed ms", "from S", "feasible");
  for (const Row &r : v.rows) {
    std::string streamed = !r.streamPossible ? "-"
                           : r.streamFits    ? llvm::formatv("{0:f2}", r.tStream).str()
                                             : "no room";
    std::string from = r.streamPossible && r.crossover > 0 ? std::to_string(r.crossover) : "-";
    bool moves = r.bestCpuAttentionBlocks > 0;
    std::string blocks = moves ? std::to_string(r.bestCpuAttentionBlocks) : "-";
    std::string thatMs = moves ? llvm::formatv("{0:f2}", r.bestCpuAttentionMs).str() : "-";
    os << llvm::formatv("{0} {1,4}  {2,-20} {3,10:f2} {4,10:f2} {5,10:f3} {6,10:f2} {7,10:f2} {8,8} "
                        "{9,10} {10,10:f2} {11,11} {12,7}  {13}\n",
                        r.k == v.chosenK ? '*' : ' ', r.k, splitName(r.k, n), r.tCpu, r.tGpu, r.tComm,
                        r.tPlan, r.tDecode, blocks, thatMs, r.tPrefill, streamed, from,
                        r.feasible ? std::string("yes") : "no: " + r.reason);
  }
  os << "\nchosen  k = " << v.chosenK << ", " << splitName(v.chosenK, n)
     << llvm::formatv(", predicted {0:f2} ms per {1} ({2:f2} tokens/s)\n", v.predicted,
                      v.objective == "prefill" ? "prompt" : "token",
                      v.objective == "prefill" ? 1000.0 * double(v.batch * v.promptLen) / v.predicted
                                               : 1000.0 * double(v.batch) / v.predicted);
  if (v.chosenK >= 0) {
    const Row &c = v.rows[size_t(v.chosenK)];
    os << "decode  ";
    if (c.spillBytes > 0)
      os << llvm::formatv("{0:f1} MB of the GPU blocks' KV streams back from host RAM each step; ",
                          c.spillBytes / 1e6);
    if (c.bestCpuAttentionBlocks == 0)
      os << "no GPU block's attention is faster on the CPU\n";
    else if (v.cpuAttention)
      os << llvm::formatv("the attention of {0} GPU block{1} runs on the CPU beside its KV in host RAM "
                          "(planned, --cpu-attention=on)\n",
                          c.cpuAttentionBlocks, c.cpuAttentionBlocks == 1 ? "" : "s");
    else
      os << llvm::formatv("with the attention of {0} GPU block{1} on the CPU beside its KV in host RAM "
                          "a step would take {2:f2} ms (not planned: --cpu-attention=on plans it; helm-rt "
                          "does not run it yet)\n",
                          c.bestCpuAttentionBlocks, c.bestCpuAttentionBlocks == 1 ? "" : "s",
                          c.bestCpuAttentionMs);
    if (v.sliced) {
      os << "sliced  ScheInfer's sliced FFNs (every unit but the embedding on the GPU, each FFN split CPU / "
            "streamed / GPU): ";
      if (!v.sliced.getPossible()) {
        os << "not possible: " << v.sliced.getReason() << "\n";
      } else {
        ArrayRef<double> rGG = v.sliced.getRGg().asArrayRef(), rCG = v.sliced.getRCg().asArrayRef();
        double meanGG = 0, meanCG = 0;
        for (size_t i = 0; i < rGG.size(); ++i) {
          meanGG += rGG[i] / double(rGG.size());
          meanCG += rCG[i] / double(rCG.size());
        }
        os << llvm::formatv("decode {0:f2} ms per token, GPU {1:f3} GB ({2:f3} GB of FFN slices), mean "
                            "r_GG {3:f2}, r_CG {4:f2} (priced only: the planner does not choose it and "
                            "helm-rt does not run it)\n",
                            double(v.sliced.getTDecodeMs()), double(v.sliced.getGpuBytes()) / 1e9,
                            double(v.sliced.getGgBytes()) / 1e9, meanGG, meanCG);
      }
    }
    os << "prefill ";
    if (!c.streamPossible) {
      os << "the " << v.promptLen << "-token prompt runs on the split's devices (streaming: "
         << c.streamReason << ")\n";
    } else {
      os << llvm::formatv("the {0}-token prompt: {1:f2} ms on the split's devices, {2:f2} ms with the CPU "
                          "units' weights streamed ({3:f3} GB over the link, slots {4:f1} MiB); "
                          "streaming is faster from {5}",
                          v.promptLen, c.tPrefill, c.tStream, c.streamedBytes / 1e9,
                          c.slotBytes / double(1 << 20),
                          c.crossover > 0 ? std::to_string(c.crossover) + (c.crossover == 1 ? " token" : " tokens")
                                     : std::string("no length up to the context and prompt"));
      if (!c.streamFits)
        os << "; " << c.streamReason;
      else if (v.streamPrefill)
        os << "; planned (--stream-prefill=on)";
      else
        os << "; not planned (--stream-prefill=on plans it; helm-rt does not run it yet)";
      os << "\n";
    }
  }
  if (v.chosenK >= 0) {
    int64_t limit = hostContextLimit(module, target, v.chosenK, v.batch, v.kvOffload);
    os << "context ";
    if (limit < 0)
      os << "no KV cache in host RAM at this split";
    else
      os << llvm::formatv("host RAM ({0:f2} GB) holds the KV cache of at most {1} tokens per "
                          "sequence (batch {2}; {3})",
                          target.cpu.ramBytes / 1e9, limit, v.batch,
                          v.kvOffload ? "with kv-offload the GPU units' KV pages spill there too"
                                      : "the CPU units' KV only");
    os << "\n";
  }
  return s;
}

/// ScheInfer's plan as priced: null when the plan has none.
static llvm::json::Value slicedJson(SlicedFfnAttr s) {
  if (!s)
    return nullptr;
  llvm::json::Object o{{"possible", s.getPossible()}, {"reason", s.getReason()}};
  if (s.getPossible()) {
    o["t_decode_ms"] = double(s.getTDecodeMs());
    o["gpu_bytes"] = double(s.getGpuBytes());
    o["gg_bytes"] = double(s.getGgBytes());
    o["r_gg"] = llvm::json::Array(s.getRGg().asArrayRef());
    o["r_cg"] = llvm::json::Array(s.getRCg().asArrayRef());
  }
  return o;
}

/// A candidate's streamed prefill: null when the split has nothing to stream.
static llvm::json::Value streamJson(const Row &r) {
  if (!r.streamPossible)
    return nullptr;
  return llvm::json::Object{{"fits", r.streamFits},
                            {"reason", r.streamReason},
                            {"t_prefill_ms", r.tStream},
                            {"slot_bytes", r.slotBytes},
                            {"streamed_bytes", r.streamedBytes},
                            {"crossover_tokens", r.crossover}};
}

llvm::json::Value planJsonValue(ModuleOp module, const TargetProfile &target, const ModelConfig &config) {
  PlanView v = readPlan(module);
  llvm::json::Object targetJson = *targetProfileToJsonValue(target).getAsObject();
  targetJson.erase("source");
  llvm::json::Array units;
  for (UnitOp unit : unitsOf(module)) {
    UnitCost c;
    readUnitCost(unit, c);
    units.push_back(llvm::json::Object{{"name", c.name},
                                       {"kind", c.kind},
                                       {"param_bytes", c.paramBytes},
                                       {"resident_bytes", c.residentBytes},
                                       {"act_bytes", c.actBytes},
                                       {"kv_bytes_per_token", c.kvBytesPerToken},
                                       {"flops_decode", c.flopsDecode},
                                       {"flops_prefill", c.flopsPrefill}});
  }
  llvm::json::Array candidates;
  for (const Row &r : v.rows)
    candidates.push_back(llvm::json::Object{{"k", r.k},
                                            {"feasible", r.feasible},
                                            {"reason", r.reason},
                                            {"t_cpu_ms", r.tCpu},
                                            {"t_gpu_ms", r.tGpu},
                                            {"t_comm_ms", r.tComm},
                                            {"t_plan_ms", r.tPlan},
                                            {"t_decode_ms", r.tDecode},
                                            {"decode_spill_bytes", r.spillBytes},
                                            {"cpu_attention_blocks", r.cpuAttentionBlocks},
                                            {"best_cpu_attention",
                                             llvm::json::Object{{"blocks", r.bestCpuAttentionBlocks},
                                                                {"t_decode_ms", r.bestCpuAttentionMs}}},
                                            {"t_prefill_ms", r.tPrefill},
                                            {"stream", streamJson(r)}});
  llvm::json::Value model = modelConfigJson(config);
  llvm::json::Object root{
      {"target", std::move(targetJson)},
      {"model", std::move(model)},
      {"options", llvm::json::Object{{"batch", v.batch},
                                     {"context", v.context},
                                     {"prompt_len", v.promptLen},
                                     {"objective", v.objective},
                                     {"kv_offload", v.kvOffload},
                                     {"stream_prefill", v.streamPrefill},
                                     {"cpu_attention", v.cpuAttention}}},
      {"units", std::move(units)},
      {"candidates", std::move(candidates)},
      {"chosen_k", v.chosenK},
      {"sliced_ffn", slicedJson(v.sliced)},
      {"predicted_ms_per_token", v.predicted},
      {"max_context_host_ram",
       v.chosenK >= 0 ? hostContextLimit(module, target, v.chosenK, v.batch, v.kvOffload) : 0},
  };
  return root;
}

std::string planJson(ModuleOp module, const TargetProfile &target, const ModelConfig &config) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", planJsonValue(module, target, config)) << "\n";
  return s;
}

std::string planSvg(ModuleOp module, const TargetProfile &target, const ModelConfig &config) {
  PlanView v = readPlan(module);
  const double width = 720, height = 400, left = 70, right = 20, top = 40, bottom = 50;
  double maxT = 0;
  for (const Row &r : v.rows)
    maxT = std::max(maxT, r.tPlan);
  maxT = maxT > 0 ? maxT * 1.05 : 1;
  int64_t n = int64_t(v.rows.size()) - 1;
  auto x = [&](double k) { return left + (width - left - right) * k / double(std::max<int64_t>(n, 1)); };
  auto y = [&](double t) { return top + (height - top - bottom) * (1 - t / maxT); };
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                      "font-family=\"sans-serif\" font-size=\"12\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv("<text x=\"{0}\" y=\"20\" font-size=\"14\">T_plan vs split k: {1} {2} layers "
                      "on {3} ({4}, context {5})</text>\n",
                      left, config.architecture, config.numLayers, target.name, v.objective, v.context);
  // Infeasible splits shaded; the feasibility boundary is where shading ends.
  for (const Row &r : v.rows)
    if (!r.feasible)
      os << llvm::formatv("<rect x=\"{0:f1}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" fill=\"#f4d6d6\"/>\n",
                          x(double(r.k) - 0.5), top, x(1) - x(0), height - top - bottom);
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                      height - bottom, width - right);
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left,
                      top, height - bottom);
  for (int i = 0; i <= 4; ++i) {
    double t = maxT * i / 4;
    os << llvm::formatv("<text x=\"{0}\" y=\"{1:f1}\" text-anchor=\"end\">{2:f0}</text>\n", left - 6,
                        y(t) + 4, t);
  }
  for (int64_t k = 0; k <= n; k += std::max<int64_t>(1, n / 10))
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1}\" text-anchor=\"middle\">{2}</text>\n", x(double(k)),
                        height - bottom + 16, k);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">k (units on the CPU)</text>\n",
                      (width + left) / 2, height - 10);
  os << llvm::formatv("<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" "
                      "text-anchor=\"middle\">T_plan (ms)</text>\n",
                      (height) / 2);
  std::string points;
  for (const Row &r : v.rows)
    points += llvm::formatv("{0:f1},{1:f1} ", x(double(r.k)), y(r.tPlan)).str();
  os << "<polyline fill=\"none\" stroke=\"#3060c0\" stroke-width=\"2\" points=\"" << points << "\"/>\n";
  for (const Row &r : v.rows)
    os << llvm::formatv("<circle cx=\"{0:f1}\" cy=\"{1:f1}\" r=\"3\" fill=\"{2}\"/>\n", x(double(r.k)),
                        y(r.tPlan), r.feasible ? "#3060c0" : "#c03030");
  if (v.chosenK >= 0) {
    const Row &c = v.rows[size_t(v.chosenK)];
    os << llvm::formatv("<circle cx=\"{0:f1}\" cy=\"{1:f1}\" r=\"7\" fill=\"none\" stroke=\"#208020\" "
                        "stroke-width=\"2\"/>\n<text x=\"{0:f1}\" y=\"{2:f1}\" text-anchor=\"middle\" "
                        "fill=\"#208020\">k*={3}: {4:f1} ms</text>\n",
                        x(double(c.k)), y(c.tPlan), y(c.tPlan) - 12, c.k, c.tPlan);
  }
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#a04040\">shaded: infeasible (does not fit)"
                      "</text>\n",
                      width - 230, top + 14);
  os << "</svg>\n";
  return s;
}

} // namespace helm
