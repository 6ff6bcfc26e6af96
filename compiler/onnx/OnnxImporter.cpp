//===- OnnxImporter.cpp - ONNX ModelProto to the HELM dialect --------------------===//
#include "compiler/onnx/OnnxImporter.h"

#include "dialects/helm/HelmDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#define ONNX_ML 1
#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <limits>

using namespace mlir;

namespace helm {

namespace {
bool readTensorBytes(const onnx::TensorProto &tensor, const std::string &baseDir,
                     std::vector<char> &bytes, std::string &error);
} // namespace

/// The weights of an ONNX model: inline initializers in the parsed ModelProto (kept alive here),
/// external data read from its files one tensor at a time.
class OnnxWeightSource : public WeightSource {
public:
  std::unique_ptr<onnx::ModelProto> model;
  std::string modelPath;
  std::string baseDir;

  /// The initializer (or Constant node value) named `onnxName`, or nullptr.
  const onnx::TensorProto *find(llvm::StringRef onnxName) const {
    for (const auto &init : model->graph().initializer())
      if (init.name() == onnxName)
        return &init;
    for (const auto &node : model->graph().node())
      if (node.op_type() == "Constant" && node.output_size() == 1 && node.output(0) == onnxName)
        for (const auto &a : node.attribute())
          if (a.name() == "value" && a.has_t())
            return &a.t();
    return nullptr;
  }

  /// Bytes of the initializer (or Constant node value) named `onnxName`, little-endian.
  bool read(llvm::StringRef onnxName, std::vector<char> &bytes) const {
    std::string error;
    const onnx::TensorProto *tensor = find(onnxName);
    return tensor && readTensorBytes(*tensor, baseDir, bytes, error);
  }

  llvm::Expected<llvm::ArrayRef<char>> bytes(llvm::StringRef onnxName,
                                             std::vector<char> &storage) const override;
};

namespace {

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 23;

std::string shapeString(llvm::ArrayRef<int64_t> dims, llvm::StringRef dtype) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << dtype << "[";
  for (size_t i = 0; i < dims.size(); ++i)
    os << (i ? "," : "") << dims[i];
  os << "]";
  return s;
}

// ONNX's 4-bit integer types (onnx.proto's DataType UINT4 = 21, INT4 = 22, IR version 10). The
// protobuf schema HELM builds against predates them, so the values are spelled here.
constexpr int kOnnxUint4 = 21, kOnnxInt4 = 22;

const char *dtypeName(int dt) {
  switch (dt) {
  case onnx::TensorProto::FLOAT: return "float32";
  case onnx::TensorProto::FLOAT16: return "float16";
  case onnx::TensorProto::BFLOAT16: return "bfloat16";
  case onnx::TensorProto::DOUBLE: return "float64";
  case onnx::TensorProto::INT64: return "int64";
  case onnx::TensorProto::INT32: return "int32";
  case onnx::TensorProto::INT16: return "int16";
  case onnx::TensorProto::INT8: return "int8";
  case onnx::TensorProto::UINT8: return "uint8";
  case onnx::TensorProto::BOOL: return "bool";
  case kOnnxInt4: return "int4";
  case kOnnxUint4: return "uint4";
  case onnx::TensorProto::STRING: return "string";
  default: return "unknown";
  }
}

/// Bytes per element of the ONNX data types HELM reads, 0 for the ones it does not. The 4-bit
/// types count 1 here (an upper bound, for the size checks); storageBytes gives their packed size.
int64_t dtypeBytes(int dt) {
  switch (dt) {
  case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: return 4;
  case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16: case onnx::TensorProto::INT16: return 2;
  case onnx::TensorProto::DOUBLE: case onnx::TensorProto::INT64: return 8;
  case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL: return 1;
  case kOnnxInt4: case kOnnxUint4: return 1;
  default: return 0;
  }
}

/// INT4 / UINT4: two values per byte, the first in the low nibble (ONNX's packing).
bool isPacked4(int dt) { return dt == kOnnxInt4 || dt == kOnnxUint4; }

/// Bytes of numel elements of dt as stored (raw data, external data).
int64_t storageBytes(int dt, int64_t numel) { return isPacked4(dt) ? (numel + 1) / 2 : numel * dtypeBytes(dt); }

Type mlirElementType(MLIRContext &ctx, int dt) {
  switch (dt) {
  case onnx::TensorProto::FLOAT: return Float32Type::get(&ctx);
  case onnx::TensorProto::FLOAT16: return Float16Type::get(&ctx);
  case onnx::TensorProto::BFLOAT16: return BFloat16Type::get(&ctx);
  case onnx::TensorProto::DOUBLE: return Float64Type::get(&ctx);
  case onnx::TensorProto::INT64: return IntegerType::get(&ctx, 64);
  case onnx::TensorProto::INT32: return IntegerType::get(&ctx, 32);
  case onnx::TensorProto::INT16: return IntegerType::get(&ctx, 16);
  case onnx::TensorProto::INT8: return IntegerType::get(&ctx, 8);
  case onnx::TensorProto::UINT8: return IntegerType::get(&ctx, 8, IntegerType::Unsigned);
  case onnx::TensorProto::BOOL: return IntegerType::get(&ctx, 1);
  case kOnnxInt4: return IntegerType::get(&ctx, 4);
  case kOnnxUint4: return IntegerType::get(&ctx, 4, IntegerType::Unsigned);
  default: return {};
  }
}

/// Values a tensor holds in its typed field (float_data, double_data, int64_data, or int32_data,
/// which carries every narrower type's bit patterns).
int64_t typedValueCount(const onnx::TensorProto &tensor) {
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT: return tensor.float_data_size();
  case onnx::TensorProto::DOUBLE: return tensor.double_data_size();
  case onnx::TensorProto::INT64: return tensor.int64_data_size();
  default: return tensor.int32_data_size();
  }
}

/// Collects a small tensor's bytes, little-endian, from raw_data, the typed fields or its external file.
/// Checks the tensor against itself (shape, byte and value counts) before touching any buffer: callers
/// validate too, but this is the one place that copies, so it must be safe on its own.
bool readTensorBytes(const onnx::TensorProto &tensor, const std::string &baseDir,
                     std::vector<char> &bytes, std::string &error) {
  int64_t width = dtypeBytes(tensor.data_type());
  if (width == 0) {
    error = "tensor '" + tensor.name() + "' has data type " + dtypeName(tensor.data_type()) +
            ", which HELM cannot read";
    return false;
  }
  int64_t numel = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0 || (d != 0 && numel > std::numeric_limits<int64_t>::max() / width / d)) {
      error = "tensor '" + tensor.name() + "' has an invalid or too large shape";
      return false;
    }
    numel *= d;
  }
  bytes.assign(size_t(storageBytes(tensor.data_type(), numel)), 0);
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0;
    for (const auto &kv : tensor.external_data())
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::atoll(kv.value().c_str());
    if (bytes.empty())
      return true; // nothing to read, whatever the file holds
    llvm::SmallString<256> path(baseDir);
    llvm::sys::path::append(path, location);
    std::ifstream in(std::string(path), std::ios::binary);
    if (offset < 0 || !in.seekg(offset) || !in.read(bytes.data(), std::streamsize(bytes.size()))) {
      error = "cannot read " + std::to_string(bytes.size()) + " bytes of '" + tensor.name() +
              "' from external data file '" + location + "'";
      return false;
    }
    return true;
  }
  if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != bytes.size()) {
      error = "tensor '" + tensor.name() + "' has " + std::to_string(tensor.raw_data().size()) +
              " raw bytes but its shape needs " + std::to_string(bytes.size());
      return false;
    }
    // A zero-size tensor's raw data may be an empty string whose data() is null: copy nothing.
    if (!bytes.empty())
      std::memcpy(bytes.data(), tensor.raw_data().data(), bytes.size());
    return true;
  }
  if (isPacked4(tensor.data_type())) {
    error = "tensor '" + tensor.name() + "' of " + dtypeName(tensor.data_type()) +
            " keeps its values in int32_data; HELM reads 4-bit tensors from raw or external data";
    return false;
  }
  int64_t have = typedValueCount(tensor);
  if (have != numel) {
    error = "tensor '" + tensor.name() + "' has " + std::to_string(have) + " typed values for " +
            std::to_string(numel) + " elements";
    return false;
  }
  auto put = [&](int64_t i, uint64_t v) { std::memcpy(&bytes[size_t(i * width)], &v, size_t(width)); };
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    for (int64_t i = 0; i < numel; ++i)
    {
      float f = tensor.float_data(int(i));
      std::memcpy(&bytes[size_t(i * 4)], &f, 4);
    }
    return true;
  case onnx::TensorProto::DOUBLE:
    for (int64_t i = 0; i < numel; ++i)
    {
      double d = tensor.double_data(int(i));
      std::memcpy(&bytes[size_t(i * 8)], &d, 8);
    }
    return true;
  case onnx::TensorProto::INT64:
    for (int64_t i = 0; i < numel; ++i)
      put(i, uint64_t(tensor.int64_data(int(i))));
    return true;
  default: // int32, int16, int8, uint8, bool, float16 and bfloat16 bit patterns live in int32_data.
    for (int64_t i = 0; i < numel; ++i)
      put(i, uint64_t(uint32_t(tensor.int32_data(int(i)))));
    return true;
  }
}

/// A small tensor's little-endian bytes (one byte per bool) as a dense attribute; booleans are
/// bit-packed in MLIR's raw buffers, so they go through ArrayRef<bool>.
DenseElementsAttr denseFromBytes(RankedTensorType type, const std::vector<char> &raw) {
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : raw)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(bits));
  }
  return DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(raw));
}

class Importer {
public:
  Importer(MLIRContext &ctx, const ImportOptions &options, std::string display, std::string baseDir,
           std::string &error)
      : ctx(ctx), options(options), display(std::move(display)), baseDir(std::move(baseDir)),
        error(error), builder(&ctx) {}

  ImportedModel run(const void *data, size_t size);

private:
  bool fail(const llvm::Twine &msg) {
    if (error.empty())
      error = (display + ": " + msg).str();
    return false;
  }
  bool checkOpsets();
  bool importInitializer(const onnx::TensorProto &tensor, bool fromConstantNode);
  /// Initializers imported as weights whatever their size (read by name later).
  llvm::StringSet<> keepAsWeight;
  bool tensorBytes(const onnx::TensorProto &tensor, std::vector<char> &bytes) {
    std::string why;
    return readTensorBytes(tensor, baseDir, bytes, why) || fail(why);
  }
  bool importNode(const onnx::NodeProto &node);
  bool convertAttribute(const onnx::NodeProto &node, const onnx::AttributeProto &attr,
                        NamedAttrList &out);
  Type tensorTypeOf(const onnx::TypeProto &type, llvm::StringRef what);
  Type inferResultType(const onnx::NodeProto &node, ArrayRef<Value> inputs);
  std::string symbolFor(llvm::StringRef name);
  std::string nodeLabel(const onnx::NodeProto &node) {
    return "node '" + node.name() + "' (" + node.op_type() + ")";
  }
  Location locFor(llvm::StringRef name) {
    return NameLoc::get(StringAttr::get(&ctx, name), FileLineColLoc::get(&ctx, display, 0, 0));
  }

  MLIRContext &ctx;
  const ImportOptions &options;
  std::string display, baseDir;
  std::string &error;
  OpBuilder builder;
  ModuleOp module;
  std::unique_ptr<onnx::ModelProto> model;
  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TypeProto *> declaredTypes;
  llvm::StringSet<> symbols;
  llvm::StringSet<> usedDomains;
  int64_t defaultOpset = 0;
};

ImportedModel Importer::run(const void *data, size_t size) {
  ImportedModel result;
  if (size == 0) {
    fail("file is empty, not an ONNX model");
    return result;
  }
  // llama.cpp's format, which users hold often: say so rather than "protobuf parse failed".
  if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0) {
    fail("a GGUF file (llama.cpp's format), not an ONNX model: helmc reads it with its GGUF front end "
         "(docs/gguf.md)");
    return result;
  }
  if (int64_t(size) > options.maxModelBytes) {
    fail("file is " + llvm::Twine(int64_t(size)) + " bytes, over the " +
         llvm::Twine(options.maxModelBytes) + "-byte limit of an ONNX protobuf (use external data)");
    return result;
  }
  model = std::make_unique<onnx::ModelProto>();
  {
    google::protobuf::io::ArrayInputStream stream(data, int(size));
    google::protobuf::io::CodedInputStream coded(&stream);
    coded.SetTotalBytesLimit(INT_MAX);
    coded.SetRecursionLimit(64);
    if (!model->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      fail("not a valid ONNX model: protobuf parse failed (" + llvm::Twine(int64_t(size)) +
           " bytes; truncated or corrupt file?)");
      return result;
    }
  }
  if (!model->has_graph() || model->graph().node_size() == 0) {
    fail("not an ONNX model: no graph with nodes (ir_version " + llvm::Twine(model->ir_version()) + ")");
    return result;
  }
  if (model->ir_version() < 3) {
    fail("unsupported ONNX IR version " + llvm::Twine(model->ir_version()) + " (need >= 3)");
    return result;
  }
  if (!checkOpsets())
    return result;

  const onnx::GraphProto &graph = model->graph();
  module = ModuleOp::create(locFor(display));
  result.module = module;
  module->setAttr(HelmDialect::SourceAttrHelper::getNameStr(), builder.getStringAttr(display));
  module->setAttr(HelmDialect::OpsetAttrHelper::getNameStr(), builder.getI64IntegerAttr(defaultOpset));
  if (!model->producer_name().empty())
    module->setAttr(HelmDialect::ProducerAttrHelper::getNameStr(),
                    builder.getStringAttr(model->producer_name() + " " + model->producer_version()));

  for (const auto &vi : graph.value_info())
    declaredTypes[vi.name()] = &vi.type();
  for (const auto &vi : graph.output())
    declaredTypes[vi.name()] = &vi.type();

  // Function signature: graph inputs that are not initializers (IR < 4 lists both).
  llvm::StringSet<> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  SmallVector<Type> argTypes;
  SmallVector<const onnx::ValueInfoProto *> argInfos;
  for (const auto &in : graph.input()) {
    if (initializerNames.contains(in.name()))
      continue;
    if (in.name().empty()) {
      fail("graph input #" + llvm::Twine(argInfos.size()) + " has no name");
      return {};
    }
    Type t = tensorTypeOf(in.type(), "graph input '" + in.name() + "'");
    if (!t)
      return {};
    argTypes.push_back(t);
    argInfos.push_back(&in);
  }
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    Type t = tensorTypeOf(out.type(), "graph output '" + out.name() + "'");
    if (!t)
      return {};
    resultTypes.push_back(t);
  }
  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, locFor(graph.name()), "main",
                                           builder.getFunctionType(argTypes, resultTypes));
  Block *entry = func.addEntryBlock();
  for (auto [i, info] : llvm::enumerate(argInfos)) {
    SmallVector<Attribute> dims;
    if (info->type().has_tensor_type() && info->type().tensor_type().has_shape())
      for (const auto &d : info->type().tensor_type().shape().dim())
        dims.push_back(builder.getStringAttr(d.has_dim_param() ? d.dim_param() : ""));
    func.setArgAttr(i, HelmDialect::NameAttrHelper::getNameStr(), builder.getStringAttr(info->name()));
    func.setArgAttr(i, HelmDialect::DimsAttrHelper::getNameStr(), builder.getArrayAttr(dims));
    values[info->name()] = entry->getArgument(i);
  }
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, HelmDialect::NameAttrHelper::getNameStr(), builder.getStringAttr(out.name()));

  builder.setInsertionPointToStart(entry);
  // The quantized weight, scales and zero points of a MatMulNBits, GatherBlockQuantized or
  // DequantizeLinear stay weights however small: the package builder reads them by name to repack
  // the blocks (docs/quantization.md).
  for (const auto &node : graph.node())
    if (node.op_type() == "MatMulNBits" && node.domain() == "com.microsoft")
      for (int i = 1; i < std::min(node.input_size(), 4); ++i)
        keepAsWeight.insert(node.input(i));
    else if (node.op_type() == "DequantizeLinear" && (node.domain().empty() || node.domain() == "ai.onnx"))
      for (int i = 0; i < std::min(node.input_size(), 3); ++i)
        keepAsWeight.insert(node.input(i));
    else if (node.op_type() == "GatherBlockQuantized" && node.domain() == "com.microsoft")
      for (int i = 0; i < std::min(node.input_size(), 4); ++i)
        if (i != 1) // the indices are an activation
          keepAsWeight.insert(node.input(i));
  for (const auto &init : graph.initializer())
    if (!importInitializer(init, /*fromConstantNode=*/false))
      return {};
  for (const auto &node : graph.node())
    if (!importNode(node))
      return {};

  SmallVector<Value> returned;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end()) {
      fail("graph output '" + out.name() + "' is not produced by any node");
      return {};
    }
    returned.push_back(it->second);
  }
  // Graph outputs may lack a shape; the producing value's type wins where they differ.
  func.setType(builder.getFunctionType(argTypes, ValueRange(returned).getTypes()));
  func::ReturnOp::create(builder, locFor("return"), returned);

  // Structural checks of every op (ONNX node arities included) before any pass looks at them.
  {
    std::string first;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
      if (first.empty())
        first = diag.str();
      return success();
    });
    if (failed(mlir::verify(module))) {
      fail(first.empty() ? std::string("the imported graph does not verify") : first);
      return {};
    }
  }
  auto source = std::make_shared<OnnxWeightSource>();
  source->model = std::move(model);
  source->modelPath = display;
  source->baseDir = baseDir;
  result.weights = source;
  ctx.getOrLoadDialect<HelmDialect>()->setWeightReader(
      [source](WeightDeclOp decl, std::vector<char> &bytes) {
        return source->read(decl.getOnnxName(), bytes);
      });
  return result;
}

bool Importer::checkOpsets() {
  bool haveDefault = false;
  for (const auto &opset : model->opset_import()) {
    const std::string &domain = opset.domain();
    if (domain.empty() || domain == "ai.onnx") {
      haveDefault = true;
      defaultOpset = opset.version();
      if (opset.version() < kMinOpset || opset.version() > kMaxOpset)
        return fail("unsupported opset ai.onnx version " + llvm::Twine(opset.version()) +
                    " (HELM imports opsets " + llvm::Twine(kMinOpset) + " to " +
                    llvm::Twine(kMaxOpset) + ")");
    }
  }
  if (!haveDefault)
    return fail("model declares no ai.onnx opset import");
  return true;
}

Type Importer::tensorTypeOf(const onnx::TypeProto &type, llvm::StringRef what) {
  if (!type.has_tensor_type()) {
    fail(what + " is not a tensor (sequence, map and optional values are not supported)");
    return {};
  }
  const auto &tt = type.tensor_type();
  Type element = mlirElementType(ctx, tt.elem_type());
  if (!element) {
    fail(what + " has unsupported element type " + dtypeName(tt.elem_type()) + " (" +
         llvm::Twine(tt.elem_type()) + ")");
    return {};
  }
  if (!tt.has_shape())
    return UnrankedTensorType::get(element);
  SmallVector<int64_t> dims;
  for (const auto &d : tt.shape().dim())
    dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : ShapedType::kDynamic);
  return RankedTensorType::get(dims, element);
}

std::string Importer::symbolFor(llvm::StringRef name) {
  std::string sym;
  for (char c : name)
    sym.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (sym.empty() || std::isdigit(static_cast<unsigned char>(sym[0])))
    sym.insert(0, "w_");
  std::string unique = sym;
  for (int i = 1; symbols.contains(unique); ++i)
    unique = sym + "_" + std::to_string(i);
  symbols.insert(unique);
  return unique;
}

bool Importer::importInitializer(const onnx::TensorProto &tensor, bool fromConstantNode) {
  const std::string what = (fromConstantNode ? "constant '" : "initializer '") + tensor.name() + "'";
  if (tensor.name().empty())
    return fail("an initializer has no name");
  int64_t width = dtypeBytes(tensor.data_type());
  Type element = mlirElementType(ctx, tensor.data_type());
  if (!element || width == 0)
    return fail(what + " has unsupported data type " + dtypeName(tensor.data_type()) + " (" +
                llvm::Twine(tensor.data_type()) + ")");
  SmallVector<int64_t> dims;
  int64_t numel = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0 || (d > 0 && numel > (int64_t(1) << 50) / d))
      return fail(what + " has an invalid or huge shape");
    dims.push_back(d);
    numel *= d;
  }
  const int64_t bytes = storageBytes(tensor.data_type(), numel);
  const std::string shape = shapeString(dims, dtypeName(tensor.data_type()));

  // Where are the bytes, and are there as many as the shape says?
  std::string location;
  int64_t offset = -1, length = bytes;
  const bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  if (external) {
    offset = 0;
    bool haveLength = false;
    for (const auto &kv : tensor.external_data()) {
      char *end = nullptr;
      if (kv.key() == "location") {
        location = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        long long v = std::strtoll(kv.value().c_str(), &end, 10);
        if (kv.value().empty() || *end != '\0' || v < 0)
          return fail(what + " has a bad external-data " + kv.key() + " '" + kv.value() + "'");
        if (kv.key() == "offset")
          offset = v;
        else {
          length = v;
          haveLength = true;
        }
      }
    }
    if (location.empty())
      return fail(what + " is stored externally but names no location");
    if (llvm::sys::path::is_absolute(location) || llvm::StringRef(location).contains(".."))
      return fail(what + " has external-data location '" + location +
                  "' outside the model's directory");
    if (haveLength && length != bytes)
      return fail(what + " declares " + llvm::Twine(length) + " external bytes but " + shape +
                  " needs " + llvm::Twine(bytes));
    if (options.requireWeightData) {
      llvm::SmallString<256> path(baseDir);
      llvm::sys::path::append(path, location);
      uint64_t fileSize = 0;
      if (llvm::sys::fs::file_size(path, fileSize))
        return fail("external data file '" + location + "' of " + what + " not found (looked for " +
                    path + ")");
      if (int64_t(fileSize) < offset + bytes)
        return fail("external data file '" + location + "' is " + llvm::Twine(fileSize) +
                    " bytes but " + what + " needs bytes [" + llvm::Twine(offset) + ", " +
                    llvm::Twine(offset + bytes) + ")");
    }
  } else if (tensor.has_raw_data()) {
    if (int64_t(tensor.raw_data().size()) != bytes)
      return fail(what + " has " + llvm::Twine(int64_t(tensor.raw_data().size())) +
                  " raw bytes but " + shape + " needs " + llvm::Twine(bytes));
  } else if (isPacked4(tensor.data_type())) {
    return fail(what + " (" + shape + ") keeps its values in int32_data; HELM reads 4-bit tensors from raw or "
                "external data");
  } else {
    int64_t have = typedValueCount(tensor);
    if (have != numel)
      return fail(what + " has " + llvm::Twine(have) + " typed values but " + shape + " has " +
                  llvm::Twine(numel) + " elements");
  }

  auto type = RankedTensorType::get(dims, element);
  Location loc = locFor(tensor.name());
  bool canReadBytes = !external || options.requireWeightData;
  // 4-bit tensors are never inline constants: the dense attribute would not hold their packing.
  if (numel <= options.maxInlineConstantElements && canReadBytes && !isPacked4(tensor.data_type()) &&
      (fromConstantNode || !keepAsWeight.contains(tensor.name()))) {
    std::vector<char> raw;
    if (!tensorBytes(tensor, raw))
      return false;
    values[tensor.name()] = ConstantOp::create(builder, loc, type, denseFromBytes(type, raw));
    return true;
  }
  // A weight: declared at module level, referenced in the function. Bytes stay where they are.
  std::string sym = symbolFor(tensor.name());
  {
    OpBuilder::InsertionGuard guard(builder);
    auto func = *module.getOps<func::FuncOp>().begin();
    builder.setInsertionPoint(func);
    WeightDeclOp::create(builder, loc, builder.getStringAttr(sym), TypeAttr::get(type),
                                 builder.getStringAttr(tensor.name()), builder.getStringAttr(location),
                                 builder.getI64IntegerAttr(offset), builder.getI64IntegerAttr(length),
                                 /*blocks=*/BlocksAttr(), /*onnx_blocks=*/OnnxBlocksAttr());
  }
  values[tensor.name()] = WeightOp::create(builder, loc, type, sym);
  return true;
}

bool Importer::convertAttribute(const onnx::NodeProto &node, const onnx::AttributeProto &attr,
                                NamedAttrList &out) {
  auto name = attr.name();
  using A = onnx::AttributeProto;
  auto kind = attr.type();
  if (kind == A::UNDEFINED) { // IR < 4 omits the type; recover it from the field that is set.
    if (attr.has_f()) kind = A::FLOAT;
    else if (attr.has_i()) kind = A::INT;
    else if (attr.has_s()) kind = A::STRING;
    else if (attr.has_t()) kind = A::TENSOR;
    else if (attr.has_g()) kind = A::GRAPH;
    else if (attr.floats_size()) kind = A::FLOATS;
    else if (attr.ints_size()) kind = A::INTS;
    else if (attr.strings_size()) kind = A::STRINGS;
  }
  switch (kind) {
  case A::FLOAT: out.append(name, builder.getF32FloatAttr(attr.f())); return true;
  case A::INT: out.append(name, builder.getI64IntegerAttr(attr.i())); return true;
  case A::STRING: out.append(name, builder.getStringAttr(attr.s())); return true;
  case A::INTS: {
    SmallVector<int64_t> v(attr.ints().begin(), attr.ints().end());
    out.append(name, builder.getDenseI64ArrayAttr(v));
    return true;
  }
  case A::FLOATS: {
    SmallVector<float> v(attr.floats().begin(), attr.floats().end());
    out.append(name, builder.getDenseF32ArrayAttr(v));
    return true;
  }
  case A::STRINGS: {
    SmallVector<Attribute> v;
    for (const auto &s : attr.strings())
      v.push_back(builder.getStringAttr(s));
    out.append(name, builder.getArrayAttr(v));
    return true;
  }
  case A::TENSOR: {
    const auto &t = attr.t();
    Type element = mlirElementType(ctx, t.data_type());
    int64_t numel = 1;
    SmallVector<int64_t> dims;
    for (int64_t d : t.dims()) {
      if (d < 0 || d > (int64_t(1) << 20))
        return fail(nodeLabel(node) + " attribute '" + name + "' has an invalid shape");
      dims.push_back(d);
      numel *= d;
    }
    if (!element || isPacked4(t.data_type()) || numel > options.maxInlineConstantElements ||
        t.data_location() == onnx::TensorProto::EXTERNAL)
      return fail(nodeLabel(node) + " attribute '" + name + "' is a tensor HELM cannot inline (" +
                  shapeString(dims, dtypeName(t.data_type())) + ")");
    int64_t have = t.has_raw_data() ? int64_t(t.raw_data().size()) / std::max<int64_t>(1, dtypeBytes(t.data_type()))
                                    : typedValueCount(t);
    if (have != numel || (t.has_raw_data() && int64_t(t.raw_data().size()) != numel * dtypeBytes(t.data_type())))
      return fail(nodeLabel(node) + " attribute '" + name + "' has " + llvm::Twine(have) +
                  " values for " + llvm::Twine(numel) + " elements");
    std::vector<char> raw;
    if (!tensorBytes(t, raw))
      return false;
    out.append(name, denseFromBytes(RankedTensorType::get(dims, element), raw));
    return true;
  }
  case A::GRAPH:
  case A::GRAPHS:
    // Control flow is not part of any supported decoder pattern; the node stays unraised and the
    // unsupported-op check reports it by name.
    out.append(name, builder.getUnitAttr());
    out.append(HelmDialect::HasSubgraphAttrHelper::getNameStr(), builder.getUnitAttr());
    return true;
  default:
    return fail(nodeLabel(node) + " attribute '" + name + "' has unsupported type " +
                llvm::Twine(int(kind)));
  }
}

Type Importer::inferResultType(const onnx::NodeProto &node, ArrayRef<Value> inputs) {
  llvm::StringRef op = node.op_type();
  auto unranked = [](Type element) -> Type { return UnrankedTensorType::get(element); };
  if (op == "Shape" || op == "Size" || op == "NonZero" || op == "ArgMax" || op == "ArgMin")
    return unranked(IntegerType::get(&ctx, 64));
  if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
      op == "GreaterOrEqual" || op == "Not" || op == "And" || op == "Or" || op == "Xor" ||
      op == "IsNaN" || op == "IsInf")
    return unranked(IntegerType::get(&ctx, 1));
  if (op == "Cast") {
    for (const auto &a : node.attribute())
      if (a.name() == "to")
        if (Type t = mlirElementType(ctx, int(a.i())))
          return unranked(t);
  }
  if (op == "CastLike" && inputs.size() > 1)
    if (auto t = dyn_cast<TensorType>(inputs[1].getType()))
      return unranked(t.getElementType());
  if (op == "ConstantOfShape") {
    for (const auto &a : node.attribute())
      if (a.name() == "value")
        if (Type t = mlirElementType(ctx, a.t().data_type()))
          return unranked(t);
    return unranked(Float32Type::get(&ctx));
  }
  // Everything else HELM meets in decoder graphs keeps the element type of its first tensor input
  // (Where: of its second).
  size_t first = op == "Where" ? 1 : 0;
  for (size_t i = first; i < inputs.size(); ++i)
    if (auto t = dyn_cast<TensorType>(inputs[i].getType()))
      return unranked(t.getElementType());
  return unranked(Float32Type::get(&ctx));
}

bool Importer::importNode(const onnx::NodeProto &node) {
  const std::string &domain = node.domain();
  if (!(domain.empty() || domain == "ai.onnx" || domain == "com.microsoft"))
    return fail(nodeLabel(node) + " is in unsupported domain '" + domain + "'");

  if (node.op_type() == "Constant" && (domain.empty() || domain == "ai.onnx")) {
    if (node.output_size() != 1)
      return fail(nodeLabel(node) + " must have one output");
    for (const auto &a : node.attribute()) {
      if (a.name() == "value" && a.has_t()) {
        onnx::TensorProto t = a.t();
        t.set_name(node.output(0));
        return importInitializer(t, /*fromConstantNode=*/true);
      }
      onnx::TensorProto t;
      t.set_name(node.output(0));
      if (a.name() == "value_float") {
        t.set_data_type(onnx::TensorProto::FLOAT);
        t.add_float_data(a.f());
      } else if (a.name() == "value_floats") {
        t.set_data_type(onnx::TensorProto::FLOAT);
        t.add_dims(a.floats_size());
        for (float f : a.floats())
          t.add_float_data(f);
      } else if (a.name() == "value_int") {
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_int64_data(a.i());
      } else if (a.name() == "value_ints") {
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_dims(a.ints_size());
        for (int64_t i : a.ints())
          t.add_int64_data(i);
      } else {
        continue;
      }
      return importInitializer(t, /*fromConstantNode=*/true);
    }
    return fail(nodeLabel(node) + " has no supported value attribute");
  }

  SmallVector<Value> inputs;
  for (const auto &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(NoneOp::create(builder, locFor(node.name())));
      continue;
    }
    auto it = values.find(name);
    if (it == values.end())
      return fail(nodeLabel(node) + " reads '" + name +
                  "', which no earlier node, graph input or initializer defines");
    inputs.push_back(it->second);
  }
  NamedAttrList attrs;
  for (const auto &a : node.attribute())
    if (!convertAttribute(node, a, attrs))
      return false;

  SmallVector<Type> resultTypes;
  for (const auto &out : node.output()) {
    auto it = declaredTypes.find(out);
    Type t;
    if (!out.empty() && it != declaredTypes.end() && it->second->has_tensor_type() &&
        mlirElementType(ctx, it->second->tensor_type().elem_type()))
      t = tensorTypeOf(*it->second, "value '" + out + "'");
    if (!t)
      t = inferResultType(node, inputs);
    resultTypes.push_back(t);
  }
  auto op = OnnxNodeOp::create(builder, locFor(node.name()), resultTypes,
                                       builder.getStringAttr(node.op_type()),
                                       builder.getStringAttr(domain == "ai.onnx" ? "" : domain),
                                       builder.getStringAttr(node.name()),
                                       attrs.getDictionary(&ctx), inputs);
  for (auto [i, out] : llvm::enumerate(node.output()))
    if (!out.empty())
      values[out] = op.getResult(i);
  return true;
}

} // namespace

llvm::Expected<ImportedModel> importOnnxBytes(MLIRContext &ctx, const void *data, size_t size,
                                              const std::string &displayName,
                                              const std::string &baseDir,
                                              const ImportOptions &options) {
  ctx.loadDialect<HelmDialect, func::FuncDialect>();
  std::string error;
  Importer importer(ctx, options, displayName, baseDir, error);
  ImportedModel model = importer.run(data, size);
  if (model.module)
    return model;
  // Every failure path sets a message; one that did not is a bug the fuzzer looks for.
  return llvm::createStringError(
      error.empty() ? displayName + ": internal error: the import failed without a reason" : error);
}

llvm::Expected<ImportedModel> importOnnxFile(MLIRContext &ctx, const std::string &path,
                                             const ImportOptions &options) {
  if (llvm::sys::fs::is_directory(path))
    return llvm::createStringError(path + ": is a directory, not an ONNX file");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(path + ": cannot open: " + buffer.getError().message());
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  return importOnnxBytes(ctx, (*buffer)->getBufferStart(), (*buffer)->getBufferSize(), path,
                         std::string(dir), options);
}

llvm::Expected<llvm::ArrayRef<char>> OnnxWeightSource::bytes(llvm::StringRef onnxName,
                                                            std::vector<char> &storage) const {
  const onnx::TensorProto *tensor = find(onnxName);
  if (!tensor)
    return llvm::createStringError("no initializer named '" + onnxName + "'");
  // Inline raw data is already in memory (the parsed model): hand it out as it is.
  if (tensor->data_location() != onnx::TensorProto::EXTERNAL && tensor->has_raw_data())
    return llvm::ArrayRef<char>(tensor->raw_data().data(), tensor->raw_data().size());
  std::string error;
  if (!readTensorBytes(*tensor, baseDir, storage, error))
    return llvm::createStringError(error);
  return llvm::ArrayRef<char>(storage);
}

} // namespace helm
