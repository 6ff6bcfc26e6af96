//===- HelmDialect.cpp - the HELM dialect ---------------------------------------===//
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "contract/helm_contract.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mlir;
using namespace helm;

#include "dialects/helm/HelmDialect.cpp.inc"
#include "dialects/helm/HelmEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/helm/HelmAttrs.cpp.inc"

FailureOr<F64> helm::parseF64(AsmParser &parser) {
  double value = 0;
  if (failed(parser.parseFloat(value)))
    return failure();
  return F64(value);
}

void helm::printF64(AsmPrinter &printer, F64 value) {
  if (!std::isfinite(value.value)) {
    printer.printFloat(APFloat(value.value)); // a bit pattern MLIR reads back
    return;
  }
  // The fewest significant digits that read back to the same double (at most 17).
  char text[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value.value);
    if (std::strtod(text, nullptr) == value.value)
      break;
  }
  std::string out = text;
  if (out.find('.') == std::string::npos) {
    size_t exponent = out.find('e');
    out.insert(exponent == std::string::npos ? out.size() : exponent, ".0");
  }
  printer << out;
}

static_assert(int(GpuBackend::emu) == HELM_DEVICE_EMU && int(GpuBackend::cuda) == HELM_DEVICE_CUDA,
              "GpuBackend codes are the contract's helm_device_kind codes");

static_assert(int(BlockFormat::q8_0) == HELM_DTYPE_Q8_0 && int(BlockFormat::q4_0) == HELM_DTYPE_Q4_0 &&
                  int(BlockFormat::q4_1) == HELM_DTYPE_Q4_1 && int(BlockFormat::q4_k) == HELM_DTYPE_Q4_K &&
                  int(BlockFormat::q5_k) == HELM_DTYPE_Q5_K && int(BlockFormat::q6_k) == HELM_DTYPE_Q6_K &&
                  int(BlockFormat::q5_0) == HELM_DTYPE_Q5_0 && int(BlockFormat::q5_1) == HELM_DTYPE_Q5_1 &&
                  int(BlockFormat::iq4_nl) == HELM_DTYPE_IQ4_NL && int(BlockFormat::iq4_xs) == HELM_DTYPE_IQ4_XS &&
                  int(BlockFormat::q2_k) == HELM_DTYPE_Q2_K && int(BlockFormat::q3_k) == HELM_DTYPE_Q3_K &&
                  int(BlockFormat::iq2_xxs) == HELM_DTYPE_IQ2_XXS && int(BlockFormat::iq2_xs) == HELM_DTYPE_IQ2_XS &&
                  int(BlockFormat::iq2_s) == HELM_DTYPE_IQ2_S && int(BlockFormat::iq3_xxs) == HELM_DTYPE_IQ3_XXS &&
                  int(BlockFormat::iq3_s) == HELM_DTYPE_IQ3_S &&
                  getMaxEnumValForBlockFormat() == HELM_DTYPE_IQ3_S,
              "BlockFormat codes are the contract's helm_dtype codes");

void HelmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/helm/HelmOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/helm/HelmAttrs.cpp.inc"
      >();
}

Operation *HelmDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  if (auto elements = dyn_cast<ElementsAttr>(value))
    return ConstantOp::create(builder, loc, type, elements);
  return nullptr;
}

LogicalResult HelmDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "'" << name << "' must be " << what << ", got " << value;
  };
  auto nonNegative = [](Attribute a) {
    auto i = dyn_cast<IntegerAttr>(a);
    return i && i.getType().isSignlessInteger() && i.getInt() >= 0;
  };
  if (name == StageAttrHelper::getNameStr()) {
    auto side = dyn_cast<StringAttr>(value);
    return expect(side && (side.getValue() == "cpu" || side.getValue() == "gpu"),
                  "\"cpu\" or \"gpu\"");
  }
  if (name == DeviceAttrHelper::getNameStr())
    return expect(isa<DeviceAttr>(value), "a device (0 = cpu, 1 = gpu)");
  if (name == KvLayerAttrHelper::getNameStr() || name == KvLayersAttrHelper::getNameStr() ||
      name == TensorIdAttrHelper::getNameStr())
    return expect(nonNegative(value), "a non-negative integer");
  if (name == UnitsAttrHelper::getNameStr()) {
    auto range = dyn_cast<DenseI64ArrayAttr>(value);
    return expect(range && range.size() == 2 && range[0] >= 0 && range[0] <= range[1],
                  "[first, last] unit indices");
  }
  if (name == TargetAttrHelper::getNameStr())
    return expect(isa<TargetAttr>(value), "a #helm.target");
  if (name == CostOptionsAttrHelper::getNameStr())
    return expect(isa<CostOptionsAttr>(value), "a #helm.cost_options");
  if (name == CostAttrHelper::getNameStr())
    return expect(isa<UnitCostAttr>(value) && isa<UnitOp>(op), "a #helm.unit_cost on a helm.unit");
  if (name == PlanAttrHelper::getNameStr())
    return expect(isa<PlanAttr>(value), "a #helm.plan");
  if (name == SourceAttrHelper::getNameStr() || name == ProducerAttrHelper::getNameStr() ||
      name == NameAttrHelper::getNameStr())
    return expect(isa<StringAttr>(value), "a string");
  if (name == OpsetAttrHelper::getNameStr())
    return expect(nonNegative(value), "an opset version");
  if (name == DimsAttrHelper::getNameStr())
    return expect(isa<ArrayAttr>(value), "an array");
  if (name == UnitFunctionAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(value) && isa<FunctionOpInterface>(op), "a unit attribute on a function");
  if (name == KvLayerBaseAttrHelper::getNameStr() || name == WeightBlocksAttrHelper::getNameStr())
    return op->emitError() << "'" << name << "' belongs on a function argument";
  if (name == DeviceCallsAttrHelper::getNameStr() || name == HasSubgraphAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(value), "a unit attribute");
  return op->emitError() << "unknown HELM attribute '" << name << "'";
}

LogicalResult HelmDialect::verifyRegionArgAttribute(Operation *op, unsigned region, unsigned index,
                                                   NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  auto function = dyn_cast<FunctionOpInterface>(op);
  Type type = function && index < function.getNumArguments() ? function.getArgumentTypes()[index]
                                                              : Type();
  if (name == NameAttrHelper::getNameStr() || name == DimsAttrHelper::getNameStr())
    return success(); // checked where the importer and the stage split read them
  if (name == KvLayerBaseAttrHelper::getNameStr()) {
    if (isa<UnitAttr>(value) && type && type.isSignlessInteger(64))
      return success();
    return op->emitError() << "'" << name << "' must be a unit attribute on an i64 argument";
  }
  if (name == WeightBlocksAttrHelper::getNameStr()) {
    auto tensor = dyn_cast_if_present<RankedTensorType>(type);
    if (isa<BlocksAttr>(value) && tensor && tensor.getRank() == 2 && tensor.hasStaticShape())
      return success();
    return op->emitError() << "'" << name
                           << "' must be a #helm.blocks on a static rank-2 tensor argument";
  }
  return op->emitError() << "unknown HELM argument attribute '" << name << "'";
}

//===----------------------------------------------------------------------===//
// Planning attributes. The rules are those of the target-profile JSON (docs/target-profile.md):
// rates, bandwidths and memory sizes positive, overheads, cache sizes and latencies non-negative,
// every number finite.
//===----------------------------------------------------------------------===//

namespace {
using EmitError = llvm::function_ref<InFlightDiagnostic()>;

/// `value` as the profile JSON's messages print it ("-1", "2.5e+09").
std::string shortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// Checks each (field, value) pair: `positive` ones must be > 0, the others >= 0, all finite.
LogicalResult checkNumbers(EmitError emitError, StringRef what,
                           std::initializer_list<std::tuple<StringRef, double, bool>> fields) {
  for (const auto &[field, value, positive] : fields) {
    if (!std::isfinite(value) || (positive ? !(value > 0) : !(value >= 0)))
      return emitError() << what << "." << field << " must be "
                         << (std::isfinite(value) ? (positive ? "positive" : "non-negative") : "finite")
                         << ", got " << shortNumber(value);
  }
  return success();
}
} // namespace

LogicalResult CpuProfileAttr::verify(EmitError emitError, StringRef, F64 dramBw, F64 l3Bytes, F64 l3Bw,
                                     F64 pDec, F64 pPre, F64 ramBytes, F64 overheadMs, int64_t cores,
                                     F64 pAttn) {
  if (cores < 0)
    return emitError() << "cpu.cores must be non-negative, got " << cores;
  return checkNumbers(emitError, "cpu",
                      {{"dram_bw_gbs", dramBw, true}, {"l3_bytes", l3Bytes, false},
                       {"l3_bw_gbs", l3Bw, true}, {"p_dec_gflops", pDec, true},
                       {"p_pre_gflops", pPre, true}, {"ram_bytes", ramBytes, true},
                       {"overhead_ms_per_block", overheadMs, false},
                       {"p_attn_gflops", pAttn, false}});
}

LogicalResult GpuProfileAttr::verify(EmitError emitError, StringRef, GpuBackend, F64 vramBytes,
                                     F64 reservedBytes, F64 memBw, F64 pDec, F64 pPre, F64 overheadMs) {
  if (failed(checkNumbers(emitError, "gpu",
                          {{"vram_bytes", vramBytes, true}, {"reserved_bytes", reservedBytes, false},
                           {"mem_bw_gbs", memBw, true}, {"p_dec_gflops", pDec, true},
                           {"p_pre_gflops", pPre, true}, {"overhead_ms_per_block", overheadMs, false}})))
    return failure();
  if (reservedBytes.value >= vramBytes.value)
    return emitError() << "gpu.reserved_bytes must be below gpu.vram_bytes";
  return success();
}

LogicalResult LinkProfileAttr::verify(EmitError emitError, F64 bw, F64 latencyUs) {
  return checkNumbers(emitError, "link", {{"bw_gbs", bw, true}, {"latency_us", latencyUs, false}});
}

LogicalResult TargetAttr::verify(EmitError emitError, StringRef, StringRef, CpuProfileAttr cpu,
                                 GpuProfileAttr gpu, LinkProfileAttr link, F64 etaC, F64 etaM) {
  if (!cpu)
    return emitError() << "a target needs a cpu";
  if (bool(gpu) != bool(link))
    return emitError() << (gpu ? "a target with a gpu needs a link" : "a link without a gpu");
  if (!(etaC.value > 0 && etaC.value <= 1) || !(etaM.value > 0 && etaM.value <= 1))
    return emitError() << "eta_c and eta_m must be in (0, 1]";
  return success();
}

LogicalResult CostOptionsAttr::verify(EmitError emitError, int64_t batch, int64_t context,
                                      int64_t promptLen) {
  if (batch < 1 || context < 0 || promptLen < 1)
    return emitError() << "cost options must have batch >= 1, context >= 0, prompt_len >= 1";
  return success();
}

LogicalResult UnitCostAttr::verify(EmitError emitError, int64_t paramBytes, int64_t residentBytes,
                                   int64_t actBytes, int64_t kvBytesPerToken, int64_t flopsDecode,
                                   int64_t flopsPrefill, F64 projDecode, F64 attnPerToken,
                                   F64 projPrefill, F64 attnPrefill, int64_t prefillParamBytes,
                                   int64_t prefillActBytes, int64_t attnIoBytes, int64_t ffnBytes,
                                   int64_t ffnWeightElems, int64_t kvElemsPerToken) {
  for (int64_t v : {paramBytes, residentBytes, actBytes, kvBytesPerToken, flopsDecode, flopsPrefill,
                    prefillParamBytes, prefillActBytes, attnIoBytes, ffnBytes, ffnWeightElems,
                    kvElemsPerToken})
    if (v < 0)
      return emitError() << "unit costs must be non-negative, got " << v;
  return checkNumbers(emitError, "unit_cost",
                      {{"proj_flops_decode", projDecode, false},
                       {"attn_flops_per_token", attnPerToken, false},
                       {"proj_flops_prefill", projPrefill, false},
                       {"attn_flops_prefill", attnPrefill, false}});
}

LogicalResult SlicedFfnAttr::verify(EmitError emitError, bool possible, StringRef, F64 decodeMs,
                                    F64 gpuBytes, F64 ggBytes, DenseF64ArrayAttr rGG,
                                    DenseF64ArrayAttr rCG) {
  if (failed(checkNumbers(emitError, "sliced_ffn",
                          {{"t_decode_ms", decodeMs, false},
                           {"gpu_bytes", gpuBytes, false},
                           {"gg_bytes", ggBytes, false}})))
    return failure();
  if (!possible)
    return success();
  if (!rGG || !rCG || rGG.size() != rCG.size())
    return emitError() << "a possible sliced_ffn plan needs r_gg and r_cg of one length per block";
  for (auto [gg, cg] : llvm::zip(rGG.asArrayRef(), rCG.asArrayRef()))
    if (!(gg >= 0 && cg >= 0 && gg + cg <= 1 + 1e-9))
      return emitError() << "sliced_ffn rates must be r_gg, r_cg >= 0 with r_gg + r_cg <= 1, got "
                         << shortNumber(gg) << " and " << shortNumber(cg);
  return success();
}

LogicalResult PlanAttr::verify(EmitError emitError, int64_t chosenK, F64 predictedMs,
                               StringRef objective, bool, bool streamPrefill, bool cpuAttention,
                               SlicedFfnAttr, ArrayRef<PlanCandidateAttr> candidates) {
  if (objective != "decode" && objective != "prefill")
    return emitError() << "plan objective must be decode or prefill, got '" << objective << "'";
  for (auto [i, candidate] : llvm::enumerate(candidates))
    if (!candidate || candidate.getK() != int64_t(i))
      return emitError() << "plan candidates must be k = 0, 1, ... in order";
  if (chosenK < 0 || chosenK >= int64_t(candidates.size()))
    return emitError() << "plan chosen_k " << chosenK << " is not one of its " << candidates.size()
                       << " candidates";
  if (!std::isfinite(predictedMs.value))
    return emitError() << "plan predicted_ms_per_token must be finite";
  if (streamPrefill && !candidates[size_t(chosenK)].getStreamFits() &&
      candidates[size_t(chosenK)].getStreamPossible())
    return emitError() << "plan streams prefill at k = " << chosenK << " but its staging slots do not fit";
  for (PlanCandidateAttr candidate : candidates)
    if (candidate.getCpuAttentionBlocks() < 0 || (!cpuAttention && candidate.getCpuAttentionBlocks() > 0))
      return emitError() << "plan candidate k = " << candidate.getK() << " moves "
                         << candidate.getCpuAttentionBlocks()
                         << " attention cores to the CPU; a plan without cpu_attention moves none";
  return success();
}

//===----------------------------------------------------------------------===//
// Quantized weights
//===----------------------------------------------------------------------===//

int64_t BlocksAttr::getBlockWeights() const { return helm_dtype_block_weights(int32_t(getFormat())); }
int64_t BlocksAttr::getBlockBytes() const { return helm_dtype_block_bytes(int32_t(getFormat())); }

int64_t BlocksAttr::getStoredBytes(RankedTensorType type) const {
  int64_t rows = type.getDimSize(getRowDim()), columns = type.getDimSize(1 - getRowDim());
  return rows * (columns / getBlockWeights()) * getBlockBytes();
}

LogicalResult OnnxBlocksAttr::verify(EmitError emitError, int64_t bits, int64_t blockSize, StringRef codes,
                                     Type codeType, StringRef scales, Type scaleType, StringRef zeroPoints,
                                     Type zeroPointType, bool kMajor) {
  if (bits != 4 && bits != 8)
    return emitError() << "onnx_blocks bits must be 4 or 8, got " << bits;
  // MatMulNBits and GatherBlockQuantized blocks are powers of 2; a DequantizeLinear block may be
  // any multiple of 32 (a whole row, for per-channel scales).
  const bool powerOfTwo = (blockSize & (blockSize - 1)) == 0;
  if (blockSize < 16 || blockSize > kMaxDim || !(powerOfTwo || blockSize % 32 == 0))
    return emitError() << "onnx_blocks block_size must be a power of 2 or a multiple of 32, from 16 to 2^30, got "
                       << blockSize;
  if (codes.empty() || scales.empty())
    return emitError() << "onnx_blocks needs the names of its codes and scales";
  auto isInt = [](Type t, unsigned width) { return t && t.isInteger(width); };
  const bool byteCodes = codeType && codeType.isUnsignedInteger(8);
  const bool signedBytes = codeType && codeType.isSignlessInteger(8);
  if (!byteCodes && !signedBytes && !isInt(codeType, 4))
    return emitError() << "onnx_blocks code_type must be ui8, i8, i4 or ui4, got " << codeType;
  if (bits == 8 && !byteCodes && !signedBytes)
    return emitError() << "onnx_blocks 8-bit codes must be ui8 or i8, got " << codeType;
  if (bits == 4 && signedBytes)
    return emitError() << "onnx_blocks i8 codes are 8-bit, got bits = 4";
  if (kMajor && byteCodes)
    return emitError() << "onnx_blocks K-major codes are element-typed (i4, ui4 or i8), got ui8";
  if (!scaleType || !(scaleType.isF32() || scaleType.isF16()))
    return emitError() << "onnx_blocks scale_type must be f32 or f16, got " << scaleType;
  if (zeroPoints.empty() != !zeroPointType)
    return emitError() << "onnx_blocks zero_points and zero_point_type go together";
  if (zeroPointType && zeroPointType != scaleType && zeroPointType != codeType)
    return emitError() << "onnx_blocks zero_point_type must be the codes' or the scales' type, got "
                       << zeroPointType;
  return success();
}

int64_t OnnxBlocksAttr::codeBytes(Type codeType, int64_t bits, int64_t blockSize, int64_t n, int64_t k) {
  if (codeType.isUnsignedInteger(8))
    return n * ((k + blockSize - 1) / blockSize) * (blockSize * bits / 8);
  return (n * k * bits + 7) / 8;
}

std::optional<BlockFormat> OnnxBlocksAttr::getStorageFormat() const {
  const bool zeroPoints = !getZeroPoints().empty();
  if (getBits() == 8)
    return zeroPoints ? std::nullopt : std::optional(BlockFormat::q8_0);
  // q4_0 is (nibble - 8) d: byte codes with their default zero point 8, or i4 codes (zero point 0)
  // shifted by 8. A ui4 code's default zero point is 0, which needs q4_1's minimum.
  if (zeroPoints || getCodeType().isUnsignedInteger(4))
    return BlockFormat::q4_1;
  return BlockFormat::q4_0;
}

LogicalResult BlocksAttr::verify(EmitError emitError, BlockFormat, int64_t rowDim) {
  if (rowDim != 0 && rowDim != 1)
    return emitError() << "blocks row_dim must be 0 or 1, got " << rowDim;
  return success();
}
