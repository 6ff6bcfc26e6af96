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
}

class Helm_Op<string mnemonic, list<Trait> traits = []> :
    Op<Helm_Dialect, mnemonic, traits>;

#endif // HELM_DIALECT_TD
