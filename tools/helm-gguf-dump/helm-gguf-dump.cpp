//===- helm-gguf-dump.cpp - what a GGUF file holds, as HELM's reader sees it --------===//
//
//   helm-gguf-dump model.gguf            header, metadata (arrays: length and first elements), tensors
//   helm-gguf-dump model.gguf --json     the same as one JSON document
//   helm-gguf-dump model.gguf --json --all-elements   every array element (tokenizer tables included)
//   helm-gguf-dump model.gguf --json --hash           and each tensor's SHA-256 (reads the data)
//   helm-gguf-dump model.gguf --tokenizer-json        the tokenizer.json helmc builds from the metadata
//
// Without --hash it reads only the header and tables (the tensor data is mapped, not read). A file the reader refuses
// gives its one-line error and exit status 1.
//
//===----------------------------------------------------------------------===//
#include "compiler/gguf/GgufFile.h"
#include "compiler/gguf/GgufTokenizer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
namespace g = helm::gguf;

static cl::OptionCategory category("helm-gguf-dump options");
static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.gguf>"), cl::Required, cl::cat(category));
static cl::opt<bool> asJson("json", cl::desc("Print one JSON document"), cl::cat(category));
static cl::opt<bool> hashData("hash", cl::desc("With --json: each tensor's SHA-256 (reads every tensor)"),
                              cl::cat(category));
static cl::opt<bool> tokenizerJson("tokenizer-json",
                                   cl::desc("Print the tokenizer.json helmc builds from the tokenizer metadata"),
                                   cl::cat(category));
static cl::opt<bool> allElements("all-elements", cl::desc("Print every array element (default: the first 8)"),
                                 cl::cat(category));

static json::Value element(const g::Value &v, uint64_t i) {
  if (v.elementType == g::ValueType::String)
    return json::fixUTF8(v.stringAt(i).value_or(""));
  if (v.elementType == g::ValueType::Bool)
    return v.intAt(i).value_or(0) != 0;
  if (v.elementType == g::ValueType::F32 || v.elementType == g::ValueType::F64)
    return v.floatAt(i).value_or(0.0);
  if (std::optional<uint64_t> n = v.u64At(i))
    return *n;
  return v.intAt(i).value_or(0);
}

static json::Value scalar(const g::Value &v) {
  switch (v.type) {
  case g::ValueType::String: return json::fixUTF8(v.asString().value_or(""));
  case g::ValueType::Bool: return v.asBool().value_or(false);
  case g::ValueType::F32: case g::ValueType::F64: return v.asFloat().value_or(0.0);
  case g::ValueType::U64: return v.asU64().value_or(0);
  default: return v.asInt().value_or(0);
  }
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "helm-gguf-dump: the header, metadata and tensors of a GGUF file\n");
  auto file = g::File::open(inputPath);
  if (!file) {
    errs() << "helm-gguf-dump: " << toString(file.takeError()) << "\n";
    return 1;
  }
  const g::File &f = **file;
  if (tokenizerJson) {
    auto json = helm::tokenizerJsonFromGguf(f);
    if (!json) {
      errs() << "helm-gguf-dump: " << toString(json.takeError()) << "\n";
      return 1;
    }
    outs() << *json << "\n";
    return 0;
  }
  const uint64_t shown = allElements ? UINT64_MAX : 8;
  if (asJson) {
    json::Array metadata, tensors;
    for (const auto &[key, v] : f.metadata()) {
      json::Object o{{"key", json::fixUTF8(key)}, {"type", valueTypeName(v.type)}};
      if (v.type == g::ValueType::Array) {
        o["element_type"] = valueTypeName(v.elementType);
        o["count"] = int64_t(v.count);
        json::Array items;
        for (uint64_t i = 0; i < v.count && i < shown; ++i)
          items.push_back(element(v, i));
        o["value"] = std::move(items);
      } else {
        o["value"] = scalar(v);
      }
      metadata.push_back(std::move(o));
    }
    for (const g::TensorInfo &t : f.tensors()) {
      json::Array dims;
      for (uint64_t d : t.dims)
        dims.push_back(int64_t(d));
      json::Object o{{"name", json::fixUTF8(t.name)}, {"dims", std::move(dims)},
                     {"type", t.typeInfo->name},          {"type_id", int64_t(t.type)},
                     {"offset", int64_t(t.offset)},       {"bytes", int64_t(t.bytes)}};
      if (hashData)
        o["sha256"] = toHex(ArrayRef<uint8_t>(SHA256::hash(t.data)), /*LowerCase=*/true);
      tensors.push_back(std::move(o));
    }
    outs() << formatv("{0:2}", json::Value(json::Object{{"version", int64_t(f.version())},
                                                        {"alignment", int64_t(f.alignment())},
                                                        {"data_offset", int64_t(f.dataOffset())},
                                                        {"size", int64_t(f.size())},
                                                        {"metadata", std::move(metadata)},
                                                        {"tensors", std::move(tensors)}}))
           << "\n";
    return 0;
  }
  outs() << formatv("{0}: GGUF version {1}, {2} metadata keys, {3} tensors, alignment {4}, data at byte {5} "
                    "of {6}\n",
                    f.name(), f.version(), f.metadata().size(), f.tensors().size(), f.alignment(), f.dataOffset(),
                    f.size());
  for (const auto &[key, v] : f.metadata()) {
    outs() << "  " << key << " (" << valueTypeName(v.type);
    if (v.type == g::ValueType::Array) {
      outs() << " of " << v.count << " " << valueTypeName(v.elementType) << "): [";
      for (uint64_t i = 0; i < v.count && i < shown; ++i)
        outs() << (i ? ", " : "") << formatv("{0}", element(v, i));
      outs() << (v.count > shown ? ", ...]" : "]") << "\n";
    } else {
      std::string text = formatv("{0}", scalar(v)).str();
      outs() << "): " << (text.size() > 120 ? text.substr(0, 120) + "..." : text) << "\n";
    }
  }
  for (const g::TensorInfo &t : f.tensors()) {
    outs() << "  " << t.name << " " << t.typeInfo->name << " [";
    for (size_t i = 0; i < t.dims.size(); ++i)
      outs() << (i ? ", " : "") << t.dims[i];
    outs() << formatv("] {0} bytes at data offset {1}\n", t.bytes, t.offset);
  }
  return 0;
}
