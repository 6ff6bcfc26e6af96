//===- helm-profile.cpp - measure this machine for the cost model ----------------===//
//
//   helm-profile -o host.json      CPU measured; GPU and link too where CUDA and a device exist
//
//===----------------------------------------------------------------------===//
#include "passes/plan/HostProfiler.h"
#include "passes/plan/TargetProfile.h"

#if HELM_HAVE_CUDA
#include "tools/helm-profile/cuda/CudaProbe.h"
#endif

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace llvm;

static cl::OptionCategory category("helm-profile options");
static cl::opt<std::string> outputPath("o", cl::desc("Write the profile JSON here (default: stdout)"),
                                       cl::value_desc("file"), cl::init("-"), cl::cat(category));
static cl::opt<bool> quick("quick", cl::desc("Fewer repetitions (seconds instead of tens of seconds)"),
                           cl::cat(category));
static cl::opt<int> gemmHidden("gemm-hidden", cl::desc("H of the (128,H)x(H,H) GPU GEMM probe"),
                               cl::init(4096), cl::cat(category));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "helm-profile: measure this machine for helmc --target=FILE\n");
  if (gemmHidden < 64 || gemmHidden > 16384) {
    errs() << "helm-profile: error: --gemm-hidden must be in [64, 16384]\n";
    return 1;
  }
  // Opened before measuring, so an unwritable -o fails at once (removed again unless kept).
  std::error_code ec;
  ToolOutputFile out(outputPath, ec, sys::fs::OF_None);
  if (ec) {
    errs() << "helm-profile: error: " << outputPath << ": " << ec.message() << "\n";
    return 1;
  }
  auto progress = [](const std::string &s) { errs() << "helm-profile: " << s << "...\n"; };
  helm::TargetProfile profile = helm::measureHost(quick, progress);
#if HELM_HAVE_CUDA
  progress("CUDA device, pinned host<->device copies, cuBLAS GEMM/GEMV");
  helm::CudaMeasurement gpu = helm::measureCuda(gemmHidden);
  if (gpu.ok) {
    helm::GpuProfile g;
    g.name = gpu.name;
    g.vramBytes = gpu.vramBytes;
    g.reservedBytes = 1024.0 * 1024 * 1024; // runtime, activations and fragmentation headroom
    g.memBwGbs = gpu.memBwGbs;
    g.pDecGflops = gpu.gemvGflops;
    g.pPreGflops = gpu.gemmGflops;
    profile.gpu = g;
    profile.link.bwGbs = std::min(gpu.h2dGbs, gpu.d2hGbs);
    profile.link.latencyUs = gpu.latencyUs;
    profile.source += "; GPU and link measured with CUDA";
  } else {
    errs() << "helm-profile: " << gpu.message << "; writing the CPU part only\n";
  }
#else
  errs() << "helm-profile: built without CUDA; writing the CPU part only\n";
#endif
  out.os() << helm::targetProfileToJson(profile) << "\n";
  out.keep();
  errs() << formatv("helm-profile: DRAM {0:f1} GB/s, L3 {1:f1} GB/s, GEMV {2:f1} GFLOP/s, GEMM {3:f1} "
                    "GFLOP/s, {4} threads\n",
                    profile.cpu.dramBwGbs, profile.cpu.l3BwGbs, profile.cpu.pDecGflops,
                    profile.cpu.pPreGflops, profile.cpu.cores);
  return 0;
}
