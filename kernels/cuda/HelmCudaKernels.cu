//===- HelmCudaKernels.cu - the one translation unit nvcc builds into the fatbin ----===//
//
// nvcc -fatbin takes one source file, so the kernel files are included here (they share
// Common.cuh). Add a new kernel file to this list and to KERNEL_SOURCES in CMakeLists.txt.
//
//===----------------------------------------------------------------------===//
#include "Attention.cu"
#include "Elementwise.cu"
#include "Embed.cu"
#include "QuantBlocks.cu"
#include "RmsNorm.cu"
#include "Rope.cu"
