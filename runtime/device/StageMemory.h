//===- StageMemory.h - buffer allocation entry points of generated stage code -------===//
//
// Stage code compiled with finalize-memref-to-llvm{use-generic-functions} allocates its buffers
// through these instead of malloc/free. The runtime serves them from the device the stage runs on
// (Device::runHostStage): on emu that is the capped arena, so a device stage's activations count
// against the emulated VRAM like its weights and KV cache do.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_DEVICE_STAGEMEMORY_H
#define HELM_RUNTIME_DEVICE_STAGEMEMORY_H

#include <cstddef>

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t bytes);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes);
void _mlir_memref_to_llvm_free(void *p);
}

#endif
