//===- HelmDialect.td - the HELM dialect ------------------------*- tablegen -*-===//
#ifndef HELM_DIALECT_TD
#define HELM_DIALECT_TD

include "mlir/IR/OpBase.td"

def Helm_Dialect : Dialect {
  let name = "helm";
  let summary = "Block-level ops of decoder-only transformers, grouped into partition units";
  let description = [{
    The HELM dialect holds a decoder-only LLM at the granularity the partitioner reasons about:
    embedding lookup, RMSNorm, linear projections, rotary embedding, causal GQA attention with an
    optional KV cache, SwiGLU, residual adds and the LM head, grouped into `helm.unit` regions
    (embedding, one per transformer block, output head).

    Weights never live in the IR as dense attributes: `helm.weight_decl` symbols describe where the
    bytes are (an external-data file, offset and length, or the model file itself) and `helm.weight`
    refers to them by symbol. Before raising, the importer emits one generic `helm.onnx` op per ONNX
    node so that every raising step is an ordinary MLIR pass.
  }];
  let cppNamespace = "::helm";
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Reads a declared weight's bytes (little-endian, as stored). Set by the importer, which knows
    /// where inline initializers live; passes that need a few values (rotary caches) use it.
    using WeightReader = std::function<bool(WeightDeclOp, std::vector<char> &)>;
    void setWeightReader(WeightReader reader) { weightReader = std::move(reader); }
    const WeightReader &getWeightReader() const { return weightReader; }

  private:
    WeightReader weightReader;

  public:
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];

  // Every `helm.*` attribute the compiler puts on ops it does not own (modules, functions, ops of
  // other phases), declared once: code takes the name (and the type) from the generated helper,
  // e.g. `HelmDialect::StageAttrHelper::getNameStr()`, never from a string copy. The ones that
  // carry meaning are checked by verifyOperationAttribute (HelmDialect.cpp).
  let discardableAttrs = (ins
    // Module, set by the importer: the model file, its default opset and producer.
    "::mlir::StringAttr":$source,
    "::mlir::IntegerAttr":$opset,
    "::mlir::StringAttr":$producer,
    // Function arguments and results: the graph's name and symbolic dims of a value.
    "::mlir::StringAttr":$name,
    "::mlir::ArrayAttr":$dims,
    // Inside a helm.onnx op's attribute dictionary: the node had a graph attribute.
    "::mlir::UnitAttr":$has_subgraph,
    // Module: the target profile the plan is for (planning reads it, no hardware needed).
    "::helm::TargetAttr":$target,
    // Module: the workload units are costed for; helm.unit: its costs; module: the plan.
    "::helm::CostOptionsAttr":$cost_options,
    "::helm::UnitCostAttr":$cost,
    "::helm::PlanAttr":$plan,
    // helm.unit: the side the plan puts it on.
    "::helm::DeviceAttr":$device,
    // Stage functions (helm-stage-split): "cpu" or "gpu", their KV layers, their unit range.
    "::mlir::StringAttr":$stage,
    "::mlir::IntegerAttr":$kv_layers,
    "::mlir::DenseI64ArrayAttr":$units,
    // A stage lowered to device-kernel calls (helm-lower-to-device-calls).
    "::mlir::UnitAttr":$device_calls,
    // helm.attention in a stage: its index into the stage's KV cache (in a unit function: its
    // index relative to the argument marked kv_layer_base).
    "::mlir::IntegerAttr":$kv_layer,
    // A private function holding the code that equal units of one stage share
    // (helm-stage-split); one of its arguments carries the first KV layer of the unit a call
    // runs, and each weight argument stored in blocks carries its format.
    "::mlir::UnitAttr":$unit_function,
    "::mlir::UnitAttr":$kv_layer_base,
    "::helm::BlocksAttr":$weight_blocks,
    // helm.weight_decl: its id in the stage's tensor table (helm_rt_weight).
    "::mlir::IntegerAttr":$tensor_id
  );
}

class Helm_Op<string mnemonic, list<Trait> traits = []> :
    Op<Helm_Dialect, mnemonic, traits>;

#endif // HELM_DIALECT_TD
