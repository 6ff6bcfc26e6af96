//===- DeviceCalls.cpp - the device-kernel calls kernel-form device stages make (helm_dev_*) ===//
//
// The runtime's definitions of contract/helm_contract.h's helm_dev_* functions (included below, so
// the compiler checks each definition against its declaration). helm-lower-to-device-calls turns
// every op of a device stage into one `helm_dev_*` call; each forwards to the DeviceOps of the
// stage's context (CUDA kernels on a GPU, host implementations on emu). A refused call records a
// helm_status and its message in the context (the first refusal wins) and later calls of the same
// stage run do nothing, so the runtime reports the first problem and discards the outputs.
//
//===----------------------------------------------------------------------===//
#include "contract/helm_contract.h"

#include "runtime/abi/StageContext.h"
#include "runtime/device/Device.h"
#include "runtime/device/DeviceOps.h"
#include "kernels/quant/BlockFormats.h"

#include <cmath>
#include <cstring>

using namespace helm::kernels;
using helm::rt::StageContext;

namespace {

/// The context when the call may run: no earlier failure in this stage run and an ops table.
StageContext *live(void *ctx) {
  auto *c = static_cast<StageContext *>(ctx);
  if (c->failed())
    return nullptr;
  if (!c->ops) {
    c->refuse(HELM_STATUS_NO_DEVICE_KERNELS,
              "a device-kernel stage ran on a device without device kernels");
    return nullptr;
  }
  // A buffer the device could not give is host memory: no kernel may see it (the runtime reports
  // the allocation failure itself).
  if (helm::rt::stageAllocationFailed()) {
    c->refuse(HELM_STATUS_DEVICE, "a buffer of the stage could not be allocated on its device");
    return nullptr;
  }
  return c;
}

/// Records the first failure of the stage run (the message lives in the context).
void refuse(StageContext *c, llvm::Error e) {
  if (!e)
    return;
  c->refuse(HELM_STATUS_DEVICE, llvm::toString(std::move(e)));
}

bool dtypes(StageContext *c, std::initializer_list<int32_t> codes) {
  for (int32_t code : codes)
    if (!isDType(code)) {
      c->refuse(HELM_STATUS_BAD_ARGUMENT, "a device-kernel call has a bad dtype code");
      return false;
    }
  return true;
}

bool blockDtype(StageContext *c, int32_t code) {
  if (helm::quant::blockFormatOfDtype(code))
    return true;
  c->refuse(HELM_STATUS_BAD_ARGUMENT, "a device-kernel call has a bad block dtype code");
  return false;
}

} // namespace

extern "C" {

void helm_dev_embed(void *ctx, const int64_t *ids, const void *table, void *out, int32_t dtype,
                    int64_t rows, int64_t vocab, int64_t width) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->embed(ids, table, out, DType(dtype), rows, vocab, width));
}

void helm_dev_rms_norm(void *ctx, const void *x, const void *gamma, void *y, int32_t dtype,
                       int64_t groups, int64_t group, float eps) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->rmsNorm(x, gamma, y, DType(dtype), groups, group, eps));
}

void helm_dev_embed_blocks(void *ctx, const int64_t *ids, const void *table, int32_t table_dtype,
                           void *out, int32_t out_dtype, int64_t rows, int64_t vocab,
                           int64_t width) {
  if (StageContext *c = live(ctx); c && blockDtype(c, table_dtype) && dtypes(c, {out_dtype}))
    refuse(c, c->ops->embedBlocks(ids, table, table_dtype, out, DType(out_dtype), rows, vocab,
                                  width));
}

void helm_dev_linear(void *ctx, const void *x, int32_t xdtype, const void *w, int32_t wdtype,
                     int32_t transposed, const void *bias, void *y, int32_t ydtype, int64_t m,
                     int64_t k, int64_t n) {
  StageContext *c = live(ctx);
  if (!c)
    return;
  if (helm::quant::blockFormatOfDtype(wdtype)) {
    if (dtypes(c, {xdtype, ydtype}))
      refuse(c, c->ops->linearBlocks(x, DType(xdtype), w, wdtype, bias, y, DType(ydtype), m, k, n));
    return;
  }
  if (dtypes(c, {xdtype, wdtype, ydtype}))
    refuse(c, c->ops->linear(x, DType(xdtype), w, DType(wdtype), transposed != 0, bias, y,
                             DType(ydtype), m, k, n));
}

void helm_dev_copy_columns(void *ctx, const void *x, void *y, int32_t dtype, int64_t rows,
                           int64_t width, int64_t offset, int64_t count) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->copyColumns(x, y, DType(dtype), rows, width, offset, count));
}

void helm_dev_rope(void *ctx, const void *x, const int64_t *positions, void *y, int32_t dtype,
                   int64_t rows, int64_t heads, int64_t headDim, int64_t rotaryDim, double theta,
                   const float *freqFactors, int32_t interleaved) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->rope(x, positions, y, DType(dtype), rows, heads, headDim, rotaryDim, theta,
                           freqFactors, interleaved != 0));
}

void helm_dev_swiglu(void *ctx, const void *gate, const void *up, void *y, int32_t dtype,
                     int64_t n) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->swiglu(gate, up, y, DType(dtype), n));
}

void helm_dev_geglu(void *ctx, const void *gate, const void *up, void *y, int32_t dtype,
                    int64_t n) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->geglu(gate, up, y, DType(dtype), n));
}

void helm_dev_add(void *ctx, const void *a, const void *b, void *y, int32_t dtype, int64_t n) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->add(a, b, y, DType(dtype), n));
}

void helm_dev_scale(void *ctx, const void *x, void *y, int32_t dtype, int64_t n, float factor) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->scale(x, y, DType(dtype), n, factor));
}

void helm_dev_softcap(void *ctx, const void *x, void *y, int32_t dtype, int64_t n, float cap) {
  if (StageContext *c = live(ctx); c && dtypes(c, {dtype}))
    refuse(c, c->ops->softcap(x, y, DType(dtype), n, cap));
}

void helm_dev_convert(void *ctx, const void *x, int32_t xdtype, void *y, int32_t ydtype,
                      int64_t n) {
  if (StageContext *c = live(ctx); c && dtypes(c, {xdtype, ydtype}))
    refuse(c, c->ops->convert(x, DType(xdtype), y, DType(ydtype), n));
}

void helm_dev_attention(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                        void *out, int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                        int64_t kvHeads, int64_t headDim, float scale, int64_t window) {
  helm_dev_attention_capped(ctx, layer, q, k, v, out, dtype, batch, seq, heads, kvHeads, headDim, scale, window,
                            0.0f);
}

void helm_dev_attention_capped(void *ctx, int64_t layer, const void *q, const void *k,
                               const void *v, void *out, int32_t dtype, int64_t batch, int64_t seq,
                               int64_t heads, int64_t kvHeads, int64_t headDim, float scale,
                               int64_t window, float softcap) {
  StageContext *c = live(ctx);
  if (!c || !dtypes(c, {dtype}))
    return;
  if (!(softcap >= 0.0f) || !std::isfinite(softcap)) {
    c->refuse(HELM_STATUS_BAD_ARGUMENT, "the stage's attention call has a bad soft cap");
    return;
  }
  // The cache was sized from the manifest; code that disagrees must not write past it.
  if (layer < 0 || layer >= c->kv->layers() || kvHeads <= 0 || heads <= 0 ||
      heads % kvHeads != 0 || kvHeads * headDim != c->kv->rowWidth()) {
    c->refuse(HELM_STATUS_KV_GEOMETRY, "the stage's attention does not match the package's KV "
                                       "geometry (kv.layers, kv.kv_heads, kv.head_dim)");
    return;
  }
  helm::rt::DeviceAttentionCall call;
  call.layer = layer;
  call.q = q;
  call.k = k;
  call.v = v;
  call.out = out;
  call.dtype = DType(dtype);
  call.batch = batch;
  call.seq = seq;
  call.heads = heads;
  call.kvHeads = kvHeads;
  call.headDim = headDim;
  call.scale = scale;
  call.window = window;
  call.softcap = softcap;
  call.sequence = c->sequence;
  call.past = c->past;
  refuse(c, c->ops->attention(call, *c->kv));
}

const void *helm_dev_constant(void *ctx, const void *host, int64_t bytes) {
  StageContext *c = live(ctx);
  if (!c)
    return host;
  if (bytes < 0) {
    c->refuse(HELM_STATUS_BAD_ARGUMENT,
              "a device-kernel stage asked for a constant of negative size");
    return host;
  }
  auto p = c->ops->constant(host, bytes);
  if (!p) {
    refuse(c, p.takeError());
    return host;
  }
  return *p;
}

} // extern "C"

namespace helm::rt {
const void *const *deviceAbiSymbols() {
  static const void *const symbols[] = {
      reinterpret_cast<const void *>(&helm_dev_embed),
      reinterpret_cast<const void *>(&helm_dev_embed_blocks),
      reinterpret_cast<const void *>(&helm_dev_rms_norm),
      reinterpret_cast<const void *>(&helm_dev_linear),
      reinterpret_cast<const void *>(&helm_dev_copy_columns),
      reinterpret_cast<const void *>(&helm_dev_rope),
      reinterpret_cast<const void *>(&helm_dev_swiglu),
      reinterpret_cast<const void *>(&helm_dev_geglu),
      reinterpret_cast<const void *>(&helm_dev_add),
      reinterpret_cast<const void *>(&helm_dev_scale),
      reinterpret_cast<const void *>(&helm_dev_softcap),
      reinterpret_cast<const void *>(&helm_dev_convert),
      reinterpret_cast<const void *>(&helm_dev_attention),
      reinterpret_cast<const void *>(&helm_dev_attention_capped),
      reinterpret_cast<const void *>(&helm_dev_constant),
      nullptr};
  return symbols;
}
} // namespace helm::rt
