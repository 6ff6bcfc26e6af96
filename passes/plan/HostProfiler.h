//===- HostProfiler.h - measure this machine's CPU side for the cost model ------===//
#ifndef HELM_PASSES_PLAN_HOSTPROFILER_H
#define HELM_PASSES_PLAN_HOSTPROFILER_H

#include "passes/plan/TargetProfile.h"

#include <functional>
#include <string>

namespace helm {

/// Measures the CPU part of a profile: multi-threaded DRAM read bandwidth over >= 1 GiB, L3
/// bandwidth over a buffer that fits in L3, fp32 GEMV and GEMM throughput, L3 size from sysfs and
/// physical memory. `quick` runs fewer repetitions (used by `--target=host`). The GPU and link are
/// left empty: the CUDA measurement lives in helm-profile when CUDA is available.
TargetProfile measureHost(bool quick, const std::function<void(const std::string &)> &progress);

} // namespace helm

#endif
