//===- Embed.cu - helm_cuda_embed: embedding rows gathered by token id --------------===//
//
// Math (runtime/device/DeviceOps.h, embed): y[r, :] = table[clamp(ids[r], 0, vocab - 1), :] for r
// in [0, rows), table [vocab, width] (vocab >= 1). An id outside the table reads its nearest
// row, as the CPU lowering does (the importer's graphs never produce one; the clamp keeps a bad
// id from reading outside the table). A gather: the bits are copied.
//
// Launch: any grid (rows are grid-strided; `rows` blocks is natural), any blockDim.x (threads
// stride over the width), no dynamic shared memory.
//
// helm_cuda_embed(const T *table, const int64_t *ids, T *y, int64_t rows, int64_t vocab,
//                 int32_t width)
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16 for table and y.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace helm_cuda {

template <typename T>
__device__ void embed(const T *table, const int64_t *ids, T *y, int64_t rows, int64_t vocab,
                      int32_t width) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t id = min(max(ids[row], int64_t(0)), vocab - 1);
    T *yr = y + row * width;
    const T *src = table + id * width;
    for (int32_t i = threadIdx.x; i < width; i += blockDim.x)
      yr[i] = src[i];
  }
}

} // namespace helm_cuda

#define HELM_EMBED_PARAMS(T)                                                                       \
  (const T *table, const int64_t *ids, T *y, int64_t rows, int64_t vocab, int32_t width)
HELM_CUDA_TYPED_KERNELS(helm_cuda_embed, helm_cuda::embed, HELM_EMBED_PARAMS,
                        (table, ids, y, rows, vocab, width))
