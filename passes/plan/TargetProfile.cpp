//===- TargetProfile.cpp - device profiles and the built-in catalogue -----------===//
#include "passes/plan/TargetProfile.h"

#include <climits>
#include <cmath>

#include "contract/format/JsonDepth.h"

#include "passes/plan/HostProfiler.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace mlir;

namespace helm {

namespace {
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
constexpr double MiB = 1024.0 * 1024.0;

CpuProfile cpu(const char *name, int cores, double l3, double dram, double l3bw, double pDec,
               double pPre, double ram, double delta) {
  CpuProfile c;
  c.name = name;
  c.cores = cores;
  c.l3Bytes = l3;
  c.dramBwGbs = dram;
  c.l3BwGbs = l3bw;
  c.pDecGflops = pDec;
  c.pPreGflops = pPre;
  c.ramBytes = ram;
  c.overheadMsPerBlock = delta;
  return c;
}

GpuProfile gpu(const char *name, double vram, double reserved, double bw, double tflops, double delta) {
  GpuProfile g;
  g.name = name;
  g.vramBytes = vram;
  g.reservedBytes = reserved;
  g.memBwGbs = bw;
  g.pDecGflops = tflops * 1000.0;
  g.pPreGflops = tflops * 1000.0;
  g.overheadMsPerBlock = delta;
  return g;
}

TargetProfile target(const char *name, const char *source, CpuProfile c, GpuProfile g, double linkBw,
                     double latencyUs) {
  TargetProfile t;
  t.name = name;
  t.source = source;
  t.cpu = std::move(c);
  t.gpu = std::move(g);
  t.link = {linkBw, latencyUs};
  return t;
}
} // namespace

const std::vector<TargetProfile> &targetCatalogue() {
  // Numbers and sources: docs/cost-model.md §8 (T = thesis, V = vendor spec, D = derived from the
  // thesis' tables, A = assumed typical host). Bandwidths are sustained values (0.85 x spec for GPU
  // memory where the thesis measured nothing), compute rates are BF16 dense tensor rates.
  static const std::vector<TargetProfile> catalogue = {
      target("rtx4060-laptop",
             "thesis machine: RTX 4060 Laptop 8 GB (GPU 218 GB/s measured, PCIe 16 GB/s measured, "
             "~1 GB reserved, delta 0.14 ms: thesis 4.1.2, 4.1.3, 6.4.4), i7-13700H 16 GB "
             "(DRAM 45 GB/s measured: thesis 4.1.2; 24 MB L3: Intel ARK)",
             cpu("Intel Core i7-13700H", 14, 24 * MiB, 45, 135, 45, 400, 16 * GiB, 0.14),
             gpu("NVIDIA GeForce RTX 4060 Laptop GPU", 8188 * MiB, 1 * GiB, 218, 29.1, 0.14), 16, 5),
      target("rtx4060",
             "RTX 4060 desktop 8 GB, 272 GB/s spec (NVIDIA spec) x 0.85; typical desktop host "
             "(assumed: 8 cores, 2 x DDR5-5600 at 60 GB/s sustained)",
             cpu("typical desktop CPU", 8, 32 * MiB, 60, 180, 60, 600, 32 * GiB, 0),
             gpu("NVIDIA GeForce RTX 4060", 8188 * MiB, 1 * GiB, 231, 30.2, 0), 13, 5),
      target("rtx3090",
             "thesis machine: RTX 3090 24 GB (936 GB/s spec x 0.85, delta 0.79 ms: thesis 5.1, "
             "6.4.4; reserve 2 GiB derived from its plans), EPYC 7H12 125 GB (54 GB/s effective, "
             "derived from thesis Table 6.5)",
             cpu("AMD EPYC 7H12", 64, 256 * MiB, 54, 162, 54, 700, 125e9, 0.79),
             gpu("NVIDIA GeForce RTX 3090", 24576 * MiB, 2 * GiB, 796, 71, 0.79), 25, 5),
      target("l40s",
             "thesis machine: L40S 48 GB ECC (864 GB/s spec x 0.85, delta 1.64 ms: thesis 5.1, "
             "6.4.4; reserve 0.5 GiB derived from its plans), EPYC 7413 60 GB (22 GB/s effective, "
             "derived from thesis Table 6.5)",
             cpu("AMD EPYC 7413", 24, 128 * MiB, 22, 66, 22, 235, 60e9, 1.64),
             gpu("NVIDIA L40S", 46068 * MiB, 0.5 * GiB, 734, 362.05, 1.64), 25, 5),
      target("h100-pcie",
             "H100 PCIe 80 GB, 2000 GB/s spec x 0.85, 756 TFLOP/s BF16 dense (NVIDIA datasheet); "
             "generic server host (assumed)",
             cpu("generic server CPU", 32, 128 * MiB, 150, 450, 150, 1500, 256 * GiB, 0),
             gpu("NVIDIA H100 PCIe", 81559 * MiB, 1 * GiB, 1700, 756, 0), 50, 5),
      target("rtx4090",
             "RTX 4090 24 GB, 1008 GB/s spec x 0.85, 165.2 TFLOP/s BF16 (NVIDIA Ada whitepaper); "
             "high-end desktop host (assumed)",
             cpu("high-end desktop CPU", 16, 64 * MiB, 65, 195, 65, 1000, 64 * GiB, 0),
             gpu("NVIDIA GeForce RTX 4090", 24564 * MiB, 1 * GiB, 857, 165.2, 0), 25, 5),
      target("a100-40gb",
             "A100 40 GB, 1555 GB/s spec x 0.85, 312 TFLOP/s BF16 dense (NVIDIA datasheet); "
             "generic server host (assumed)",
             cpu("generic server CPU", 64, 256 * MiB, 100, 300, 100, 1000, 256 * GiB, 0),
             gpu("NVIDIA A100 40GB", 40960 * MiB, 1 * GiB, 1322, 312, 0), 25, 5),
  };
  return catalogue;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {
struct Reader {
  std::string &error;
  /// "cpu.dram_bw_gbs", or "eta_c" at the top level.
  static std::string fieldName(llvm::StringRef path, llvm::StringRef key) {
    return path.empty() ? key.str() : (path + "." + key).str();
  }
  bool number(const llvm::json::Object &o, llvm::StringRef path, llvm::StringRef key, double &out,
              bool positive = true, bool required = true) {
    const llvm::json::Value *v = o.get(key);
    std::string field = fieldName(path, key);
    if (!v) {
      if (!required)
        return true;
      error = field + " is missing";
      return false;
    }
    auto d = v->getAsNumber();
    if (!d) {
      error = field + " must be a number";
      return false;
    }
    // JSON has no infinity, but a literal too large for a double (1e999) parses to one.
    if (!std::isfinite(*d)) {
      error = field + " must be a finite number";
      return false;
    }
    if (positive ? !(*d > 0) : !(*d >= 0)) {
      error = field + " must be " + (positive ? "positive" : "non-negative") + ", got " +
              llvm::formatv("{0}", llvm::format("%g", *d)).str();
      return false;
    }
    out = *d;
    return true;
  }
  bool string(const llvm::json::Object &o, llvm::StringRef path, llvm::StringRef key, std::string &out) {
    if (const llvm::json::Value *v = o.get(key)) {
      if (auto s = v->getAsString()) {
        out = s->str();
        return true;
      }
      error = fieldName(path, key) + " must be a string";
      return false;
    }
    return true;
  }
};
} // namespace

namespace {
/// parseTargetProfile's body, in the reader's bool + message form.
bool parseProfile(llvm::StringRef text, TargetProfile &out, std::string &error) {
  constexpr unsigned kMaxDepth = 64; // a profile is three levels deep
  if (jsonDepth(text, kMaxDepth) > kMaxDepth) {
    error = "not valid JSON: nested deeper than " + std::to_string(kMaxDepth) + " levels";
    return false;
  }
  auto parsed = llvm::json::parse(text);
  if (!parsed) {
    error = "not valid JSON: " + llvm::toString(parsed.takeError());
    return false;
  }
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root) {
    error = "the profile must be a JSON object";
    return false;
  }
  Reader r{error};
  TargetProfile t;
  if (!r.string(*root, "", "name", t.name) || !r.string(*root, "", "source", t.source))
    return false;
  const llvm::json::Object *c = root->getObject("cpu");
  if (!c) {
    error = "cpu is missing (an object)";
    return false;
  }
  double cores = 0;
  if (!r.string(*c, "cpu", "name", t.cpu.name) || !r.number(*c, "cpu", "dram_bw_gbs", t.cpu.dramBwGbs) ||
      !r.number(*c, "cpu", "l3_bytes", t.cpu.l3Bytes, false) ||
      !r.number(*c, "cpu", "l3_bw_gbs", t.cpu.l3BwGbs) ||
      !r.number(*c, "cpu", "p_dec_gflops", t.cpu.pDecGflops) ||
      !r.number(*c, "cpu", "p_pre_gflops", t.cpu.pPreGflops) ||
      !r.number(*c, "cpu", "ram_bytes", t.cpu.ramBytes) ||
      !r.number(*c, "cpu", "overhead_ms_per_block", t.cpu.overheadMsPerBlock, false) ||
      !r.number(*c, "cpu", "cores", cores, false, false) ||
      !r.number(*c, "cpu", "p_attn_gflops", t.cpu.pAttnGflops, true, false))
    return false;
  // int(cores) is undefined past INT_MAX (and came back negative, failing only inside helm-partition).
  if (cores > double(std::numeric_limits<int>::max())) {
    error = "cpu.cores must be at most " + std::to_string(std::numeric_limits<int>::max()) + ", got " +
            llvm::formatv("{0}", llvm::format("%g", cores)).str();
    return false;
  }
  t.cpu.cores = int(cores);
  if (const llvm::json::Value *g = root->get("gpu"); g && !g->getAsNull()) {
    const llvm::json::Object *go = g->getAsObject();
    if (!go) {
      error = "gpu must be an object or null";
      return false;
    }
    GpuProfile p;
    if (!r.string(*go, "gpu", "name", p.name) || !r.number(*go, "gpu", "vram_bytes", p.vramBytes) ||
        !r.number(*go, "gpu", "reserved_bytes", p.reservedBytes, false) ||
        !r.number(*go, "gpu", "mem_bw_gbs", p.memBwGbs) ||
        !r.number(*go, "gpu", "p_dec_gflops", p.pDecGflops) ||
        !r.number(*go, "gpu", "p_pre_gflops", p.pPreGflops) ||
        !r.number(*go, "gpu", "overhead_ms_per_block", p.overheadMsPerBlock, false))
      return false;
    if (p.reservedBytes >= p.vramBytes) {
      error = "gpu.reserved_bytes must be below gpu.vram_bytes";
      return false;
    }
    t.gpu = p;
    const llvm::json::Object *l = root->getObject("link");
    if (!l) {
      error = "link is missing (an object; required with a gpu)";
      return false;
    }
    if (!r.number(*l, "link", "bw_gbs", t.link.bwGbs) ||
        !r.number(*l, "link", "latency_us", t.link.latencyUs, false))
      return false;
  }
  if (!r.number(*root, "", "eta_c", t.etaC, true, false) ||
      !r.number(*root, "", "eta_m", t.etaM, true, false))
    return false;
  if (t.etaC > 1 || t.etaM > 1) {
    error = "eta_c and eta_m must be in (0, 1]";
    return false;
  }
  out = std::move(t);
  return true;
}
} // namespace

llvm::Expected<TargetProfile> parseTargetProfile(llvm::StringRef json) {
  TargetProfile out;
  std::string error;
  if (!parseProfile(json, out, error))
    return llvm::createStringError(error);
  return out;
}

llvm::json::Value targetProfileToJsonValue(const TargetProfile &t) {
  llvm::json::Object cpu{{"name", t.cpu.name},
                         {"cores", t.cpu.cores},
                         {"dram_bw_gbs", t.cpu.dramBwGbs},
                         {"l3_bytes", t.cpu.l3Bytes},
                         {"l3_bw_gbs", t.cpu.l3BwGbs},
                         {"p_dec_gflops", t.cpu.pDecGflops},
                         {"p_pre_gflops", t.cpu.pPreGflops},
                         {"ram_bytes", t.cpu.ramBytes},
                         {"overhead_ms_per_block", t.cpu.overheadMsPerBlock}};
  if (t.cpu.pAttnGflops > 0)
    cpu["p_attn_gflops"] = t.cpu.pAttnGflops;
  llvm::json::Value gpu = nullptr;
  if (t.gpu)
    gpu = llvm::json::Object{{"name", t.gpu->name},
                             {"vram_bytes", t.gpu->vramBytes},
                             {"reserved_bytes", t.gpu->reservedBytes},
                             {"mem_bw_gbs", t.gpu->memBwGbs},
                             {"p_dec_gflops", t.gpu->pDecGflops},
                             {"p_pre_gflops", t.gpu->pPreGflops},
                             {"overhead_ms_per_block", t.gpu->overheadMsPerBlock}};
  return llvm::json::Object{{"name", t.name},
                            {"source", t.source},
                            {"cpu", std::move(cpu)},
                            {"gpu", std::move(gpu)},
                            {"link", llvm::json::Object{{"bw_gbs", t.link.bwGbs},
                                                        {"latency_us", t.link.latencyUs}}},
                            {"eta_c", t.etaC},
                            {"eta_m", t.etaM}};
}

std::string targetProfileToJson(const TargetProfile &t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", targetProfileToJsonValue(t));
  return s;
}

llvm::Expected<TargetProfile> resolveTarget(llvm::StringRef spec) {
  bool emu = spec.consume_front("emu:");
  auto emulated = [](TargetProfile t) {
    t.name = "emu:" + t.name;
    t.source += "; run on the emulated device (emu)";
    t.gpuDevice = HELM_DEVICE_EMU;
    return t;
  };
  for (const TargetProfile &t : targetCatalogue())
    if (t.name == spec)
      return emu ? emulated(t) : t;
  if (!emu && spec == "host")
    return measureHost(/*quick=*/true, nullptr);
  if (spec.ends_with(".json") || llvm::sys::fs::exists(spec)) {
    auto buffer = llvm::MemoryBuffer::getFile(spec);
    if (!buffer)
      return llvm::createStringError("target profile " + spec + ": cannot open: " +
                                     buffer.getError().message());
    TargetProfile out;
    std::string error;
    if (!parseProfile((*buffer)->getBuffer(), out, error))
      return llvm::createStringError("target profile " + spec + ": " + error);
    if (out.name.empty())
      out.name = spec.str();
    if (!emu)
      return out;
    // A profile file is how a user or a test gives the emulated GPU any VRAM size.
    if (!out.gpu)
      return llvm::createStringError("target profile " + spec +
                                     ": emu needs a profile with a 'gpu' section");
    return emulated(out);
  }
  std::string known;
  for (const TargetProfile &t : targetCatalogue())
    known += (known.empty() ? "" : ", ") + t.name;
  return llvm::createStringError(llvm::Twine("unknown target '") + (emu ? "emu:" : "") + spec +
                                 "' (known: " + known + ", host, emu:<name>, or a profile .json file)");
}

TargetAttr targetToAttr(MLIRContext *ctx, const TargetProfile &t) {
  auto cpu = CpuProfileAttr::get(ctx, t.cpu.name, t.cpu.dramBwGbs, t.cpu.l3Bytes, t.cpu.l3BwGbs,
                                 t.cpu.pDecGflops, t.cpu.pPreGflops, t.cpu.ramBytes,
                                 t.cpu.overheadMsPerBlock, t.cpu.cores, t.cpu.pAttnGflops);
  GpuProfileAttr gpu;
  LinkProfileAttr link;
  if (t.gpu) {
    gpu = GpuProfileAttr::get(ctx, t.gpu->name, GpuBackend(t.gpuDevice), t.gpu->vramBytes,
                              t.gpu->reservedBytes, t.gpu->memBwGbs, t.gpu->pDecGflops,
                              t.gpu->pPreGflops, t.gpu->overheadMsPerBlock);
    link = LinkProfileAttr::get(ctx, t.link.bwGbs, t.link.latencyUs);
  }
  return TargetAttr::get(ctx, t.name, t.source, cpu, gpu, link, t.etaC, t.etaM);
}

llvm::Expected<TargetProfile> targetFromAttr(TargetAttr attr) {
  if (!attr)
    return llvm::createStringError("module has no helm.target = #helm.target<...> attribute");
  // The attribute's verifier has checked every number with the JSON reader's rules.
  TargetProfile t;
  t.name = attr.getName().str();
  t.source = attr.getSource().str();
  CpuProfileAttr cpu = attr.getCpu();
  t.cpu = CpuProfile{cpu.getName().str(), cpu.getDramBwGbs(), cpu.getL3Bytes(), cpu.getL3BwGbs(),
                     cpu.getPDecGflops(), cpu.getPPreGflops(), cpu.getRamBytes(),
                     cpu.getOverheadMsPerBlock(), int(std::min<int64_t>(cpu.getCores(), INT_MAX)),
                     cpu.getPAttnGflops()};
  if (GpuProfileAttr gpu = attr.getGpu()) {
    t.gpu = GpuProfile{gpu.getName().str(), gpu.getVramBytes(), gpu.getReservedBytes(), gpu.getMemBwGbs(),
                       gpu.getPDecGflops(), gpu.getPPreGflops(), gpu.getOverheadMsPerBlock()};
    t.gpuDevice = helm_device_kind(gpu.getBackend());
    t.link = LinkProfile{attr.getLink().getBwGbs(), attr.getLink().getLatencyUs()};
  }
  t.etaC = attr.getEtaC();
  t.etaM = attr.getEtaM();
  return t;
}

} // namespace helm
