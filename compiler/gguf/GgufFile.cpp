//===- GgufFile.cpp - a bounds-checked, memory-mapped view of a GGUF file -----------===//
#include "compiler/gguf/GgufFile.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>
#include <cstring>
#include <limits>

namespace helm::gguf {

namespace {

// ggml's tensor types (ggml.h's enum ggml_type; ids 4, 5 and 31-33 are retired). Block weights and
// bytes as in ggml's type traits: the plain types are blocks of one element.
constexpr TensorTypeInfo kTensorTypes[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},        {2, "Q4_0", 32, 18},     {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},     {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 40},
    {10, "Q2_K", 256, 84},   {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},  {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50}, {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},  {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},       {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},       {28, "F64", 1, 8},       {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},  {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
};

/// Bytes of one scalar of a fixed-size value type; 0 for strings, arrays and unknown codes.
uint64_t scalarBytes(ValueType type) {
  switch (type) {
  case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
  case ValueType::U16: case ValueType::I16: return 2;
  case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
  case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
  default: return 0;
  }
}

bool knownValueType(uint32_t code) { return code <= uint32_t(ValueType::F64); }

template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// An integer-typed value at p as int64 (nullopt for a u64 above INT64_MAX or a non-integer type).
std::optional<int64_t> loadInt(ValueType type, const uint8_t *p) {
  switch (type) {
  case ValueType::U8: return load<uint8_t>(p);
  case ValueType::I8: return load<int8_t>(p);
  case ValueType::Bool: return load<uint8_t>(p) != 0;
  case ValueType::U16: return load<uint16_t>(p);
  case ValueType::I16: return load<int16_t>(p);
  case ValueType::U32: return load<uint32_t>(p);
  case ValueType::I32: return load<int32_t>(p);
  case ValueType::I64: return load<int64_t>(p);
  case ValueType::U64: {
    uint64_t v = load<uint64_t>(p);
    if (v > uint64_t(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
    return int64_t(v);
  }
  default: return std::nullopt;
  }
}

std::optional<double> loadFloat(ValueType type, const uint8_t *p) {
  if (type == ValueType::F32)
    return load<float>(p);
  if (type == ValueType::F64)
    return load<double>(p);
  if (std::optional<int64_t> i = loadInt(type, p))
    return double(*i);
  return std::nullopt;
}

/// Reads little-endian fields from [0, size) of the mapping; every read checks what is left first.
class Cursor {
public:
  Cursor(const uint8_t *base, uint64_t size, llvm::StringRef file) : base(base), size(size), file(file) {}

  uint64_t offset() const { return pos; }
  uint64_t left() const { return size - pos; }
  const uint8_t *here() const { return base + pos; }

  llvm::Error error(const llvm::Twine &what, uint64_t at) const {
    return llvm::createStringError(file + ": " + what + " (at byte " + llvm::Twine(at) + ")");
  }

  llvm::Error need(uint64_t bytes, const llvm::Twine &what) const {
    if (bytes > left())
      return error("truncated: " + what + " needs " + llvm::Twine(bytes) + " bytes, " + llvm::Twine(left()) +
                       " are left in the " + llvm::Twine(size) + "-byte file",
                   pos);
    return llvm::Error::success();
  }

  template <typename T> llvm::Expected<T> read(const llvm::Twine &what) {
    if (llvm::Error e = need(sizeof(T), what))
      return std::move(e);
    T v = load<T>(base + pos);
    pos += sizeof(T);
    return v;
  }

  llvm::Expected<llvm::StringRef> readString(const llvm::Twine &what) {
    uint64_t at = pos;
    auto length = read<uint64_t>(what + "'s length");
    if (!length)
      return length.takeError();
    if (*length > left()) {
      pos = at;
      return error("truncated: " + what + " is " + llvm::Twine(*length) + " bytes long, " + llvm::Twine(left()) +
                       " are left in the file",
                   at);
    }
    llvm::StringRef s(reinterpret_cast<const char *>(base + pos), size_t(*length));
    pos += *length;
    return s;
  }

  void skip(uint64_t bytes) { pos += bytes; } // after need()

private:
  const uint8_t *base;
  uint64_t size;
  uint64_t pos = 0;
  llvm::StringRef file;
};

} // namespace

std::string quoted(llvm::StringRef s) {
  std::string out = "'";
  for (char c : s.take_front(80)) {
    if (c >= 0x20 && c < 0x7f && c != '\'')
      out += c;
    else
      out += llvm::formatv("\\x{0:x-2}", unsigned(static_cast<unsigned char>(c))).str();
  }
  if (s.size() > 80)
    out += "...";
  return out + "'";
}

llvm::StringRef valueTypeName(ValueType type) {
  static constexpr llvm::StringLiteral names[] = {"u8",  "i8",  "u16",    "i16",   "u32", "i32", "f32",
                                                  "bool", "string", "array", "u64", "i64", "f64"};
  uint32_t code = uint32_t(type);
  return knownValueType(code) ? llvm::StringRef(names[code]) : llvm::StringRef("unknown");
}

const TensorTypeInfo *tensorTypeInfo(uint32_t id) {
  for (const TensorTypeInfo &info : kTensorTypes)
    if (info.id == id)
      return &info;
  return nullptr;
}

std::optional<int64_t> Value::asInt() const {
  return type == ValueType::Array || type == ValueType::String ? std::nullopt : loadInt(type, data);
}
std::optional<double> Value::asFloat() const {
  return type == ValueType::Array || type == ValueType::String ? std::nullopt : loadFloat(type, data);
}
std::optional<uint64_t> Value::asU64() const {
  if (type != ValueType::U64)
    return std::nullopt;
  return load<uint64_t>(data);
}
std::optional<uint64_t> Value::u64At(uint64_t i) const {
  if (type != ValueType::Array || elementType != ValueType::U64 || i >= count)
    return std::nullopt;
  return load<uint64_t>(data + i * 8);
}
std::optional<bool> Value::asBool() const {
  if (type != ValueType::Bool)
    return std::nullopt;
  return load<uint8_t>(data) != 0;
}
std::optional<llvm::StringRef> Value::asString() const {
  if (type != ValueType::String || strings.empty())
    return std::nullopt;
  return strings.front();
}
std::optional<int64_t> Value::intAt(uint64_t i) const {
  if (type != ValueType::Array || i >= count || !scalarBytes(elementType))
    return std::nullopt;
  return loadInt(elementType, data + i * scalarBytes(elementType));
}
std::optional<double> Value::floatAt(uint64_t i) const {
  if (type != ValueType::Array || i >= count || !scalarBytes(elementType))
    return std::nullopt;
  return loadFloat(elementType, data + i * scalarBytes(elementType));
}
std::optional<llvm::StringRef> Value::stringAt(uint64_t i) const {
  if (type != ValueType::Array || elementType != ValueType::String || i >= strings.size())
    return std::nullopt;
  return strings[size_t(i)];
}

llvm::Expected<std::unique_ptr<File>> File::open(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false,
                                            /*IsVolatile=*/false);
  if (!buffer)
    return llvm::createStringError(path + ": cannot open: " + buffer.getError().message());
  return parse(std::move(*buffer), path);
}

llvm::Expected<std::unique_ptr<File>> File::parse(std::unique_ptr<llvm::MemoryBuffer> buffer, llvm::StringRef name) {
  std::unique_ptr<File> file(new File());
  file->fileName = name.str();
  file->buffer = std::move(buffer);
  if (llvm::Error e = file->read())
    return std::move(e);
  return file;
}

void File::releasePages(const TensorInfo &tensor) const {
  // Only a file mapping gets its pages back unharmed: on heap memory MADV_DONTNEED would zero them.
  if (buffer->getBufferKind() != llvm::MemoryBuffer::MemoryBuffer_MMap || tensor.data.empty())
    return;
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t begin = uintptr_t(tensor.data.data()) & ~(page - 1);
  uintptr_t end = uintptr_t(tensor.data.data() + tensor.data.size());
  // The mapping starts on a page boundary at or before the buffer, so `begin` is inside it.
  if (begin < (uintptr_t(buffer->getBufferStart()) & ~(page - 1)))
    return;
  ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

const Value *File::find(llvm::StringRef key) const {
  auto it = valueIndex.find(key);
  return it == valueIndex.end() ? nullptr : &values[it->second].second;
}

const TensorInfo *File::findTensor(llvm::StringRef name) const {
  auto it = tensorIndex.find(name);
  return it == tensorIndex.end() ? nullptr : &tensorInfos[it->second];
}

llvm::Error File::read() {
  const auto *base = reinterpret_cast<const uint8_t *>(buffer->getBufferStart());
  const uint64_t fileSize = buffer->getBufferSize();
  Cursor in(base, fileSize, fileName);

  // Header: magic, version, tensor count, key/value count.
  if (fileSize < 4 || std::memcmp(base, "GGUF", 4) != 0)
    return llvm::createStringError(fileName + ": not a GGUF file (it does not start with the magic 'GGUF')");
  in.skip(4);
  auto version = in.read<uint32_t>("the version");
  if (!version)
    return version.takeError();
  if (*version == 0x02000000u || *version == 0x03000000u)
    return in.error("big-endian GGUF files are not supported", 4);
  if (*version != 2 && *version != 3)
    return in.error("GGUF version " + llvm::Twine(*version) + " is not supported (2 or 3)", 4);
  fileVersion = *version;
  auto tensorCount = in.read<uint64_t>("the tensor count");
  if (!tensorCount)
    return tensorCount.takeError();
  auto valueCount = in.read<uint64_t>("the metadata count");
  if (!valueCount)
    return valueCount.takeError();
  // Each key/value takes at least 12 bytes (key length, type) and each tensor 24 (name length,
  // dimension count, type, offset), so counts beyond that are refused before anything is reserved.
  if (*valueCount > in.left() / 12)
    return in.error("truncated or corrupt: the metadata count " + llvm::Twine(*valueCount) +
                        " is more than the file can hold",
                    16);
  if (*tensorCount > in.left() / 24)
    return in.error("truncated or corrupt: the tensor count " + llvm::Twine(*tensorCount) +
                        " is more than the file can hold",
                    8);

  // Metadata.
  values.reserve(size_t(*valueCount));
  for (uint64_t i = 0; i < *valueCount; ++i) {
    uint64_t at = in.offset();
    auto key = in.readString("metadata key " + llvm::Twine(i));
    if (!key)
      return key.takeError();
    if (key->empty())
      return in.error("metadata key " + llvm::Twine(i) + " is empty", at);
    std::string keyText = quoted(*key);
    if (valueIndex.count(*key))
      return in.error("metadata key " + keyText + " appears twice", at);
    uint64_t typeAt = in.offset();
    auto code = in.read<uint32_t>("the type of " + keyText);
    if (!code)
      return code.takeError();
    if (!knownValueType(*code))
      return in.error("metadata " + keyText + " has unknown value type " + llvm::Twine(*code), typeAt);
    Value value;
    value.type = ValueType(*code);
    value.elementType = value.type;
    if (value.type == ValueType::Array) {
      auto elementCode = in.read<uint32_t>("the element type of " + keyText);
      if (!elementCode)
        return elementCode.takeError();
      if (!knownValueType(*elementCode))
        return in.error("metadata " + keyText + " is an array of unknown value type " + llvm::Twine(*elementCode),
                        typeAt);
      if (ValueType(*elementCode) == ValueType::Array)
        return in.error("metadata " + keyText + " is an array of arrays, which GGUF readers do not support", typeAt);
      value.elementType = ValueType(*elementCode);
      auto count = in.read<uint64_t>("the length of " + keyText);
      if (!count)
        return count.takeError();
      value.count = *count;
    }
    value.data = in.here();
    if (value.elementType == ValueType::String) {
      // Every string takes at least its 8-byte length.
      if (value.count > in.left() / 8)
        return in.error("truncated or corrupt: metadata " + keyText + " holds " + llvm::Twine(value.count) +
                            " strings, more than the file can hold",
                        in.offset());
      value.strings.reserve(size_t(value.count));
      for (uint64_t j = 0; j < value.count; ++j) {
        auto s = in.readString(value.type == ValueType::Array ? "string " + llvm::Twine(j) + " of " + keyText
                                                              : "the string " + keyText);
        if (!s)
          return s.takeError();
        value.strings.push_back(*s);
      }
    } else {
      const uint64_t bytes = scalarBytes(value.elementType);
      if (value.count > in.left() / bytes)
        return in.error("truncated: metadata " + keyText + " holds " + llvm::Twine(value.count) + " values of " +
                            llvm::Twine(bytes) + " bytes, " + llvm::Twine(in.left()) + " are left in the file",
                        in.offset());
      in.skip(value.count * bytes);
    }
    valueIndex[*key] = values.size();
    values.emplace_back(*key, std::move(value));
  }

  // The alignment of the data section and of every tensor's offset.
  if (const Value *alignment = find("general.alignment")) {
    std::optional<int64_t> a = alignment->asInt();
    if (alignment->type != ValueType::U32 || !a || *a <= 0 || (*a & (*a - 1)) != 0)
      return llvm::createStringError(fileName + ": general.alignment must be a u32 power of 2, got " +
                                     (a ? llvm::Twine(*a) : llvm::Twine("a value of type ")) +
                                     (a ? "" : valueTypeName(alignment->type)));
    dataAlignment = uint64_t(*a);
  }

  // Tensor infos.
  tensorInfos.reserve(size_t(*tensorCount));
  for (uint64_t i = 0; i < *tensorCount; ++i) {
    uint64_t at = in.offset();
    auto name = in.readString("the name of tensor " + llvm::Twine(i));
    if (!name)
      return name.takeError();
    std::string nameText = quoted(*name);
    if (tensorIndex.count(*name))
      return in.error("tensor " + nameText + " appears twice", at);
    TensorInfo t;
    t.name = *name;
    auto rank = in.read<uint32_t>("the dimension count of tensor " + nameText);
    if (!rank)
      return rank.takeError();
    if (*rank < 1 || *rank > 4)
      return in.error("tensor " + nameText + " has " + llvm::Twine(*rank) + " dimensions (1 to 4)", at);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < *rank; ++d) {
      auto dim = in.read<uint64_t>("dimension " + llvm::Twine(d) + " of tensor " + nameText);
      if (!dim)
        return dim.takeError();
      // 2^62 elements at most: every byte count derived below stays inside uint64 and int64.
      if (*dim == 0 || *dim > (uint64_t(1) << 62) / elements)
        return in.error("tensor " + nameText + " has dimension " + llvm::Twine(d) + " = " + llvm::Twine(*dim) +
                            (*dim == 0 ? "" : ", over 2^62 elements in all"),
                        at);
      elements *= *dim;
      t.dims.push_back(*dim);
    }
    t.elements = elements;
    uint64_t typeAt = in.offset();
    auto type = in.read<uint32_t>("the type of tensor " + nameText);
    if (!type)
      return type.takeError();
    t.type = *type;
    t.typeInfo = tensorTypeInfo(*type);
    if (!t.typeInfo)
      return in.error("tensor " + nameText + " has unknown ggml type " + llvm::Twine(*type), typeAt);
    const uint64_t blockWeights = uint64_t(t.typeInfo->blockWeights);
    if (t.dims[0] % blockWeights != 0)
      return in.error("tensor " + nameText + " (" + t.typeInfo->name + ") has rows of " + llvm::Twine(t.dims[0]) +
                          ", not a multiple of its block of " + llvm::Twine(blockWeights),
                      at);
    // Bytes up to 2^62 too (8-byte elements would otherwise wrap around at 2^61 of them).
    const uint64_t blocks = elements / blockWeights, blockBytes = uint64_t(t.typeInfo->blockBytes);
    if (blocks > (uint64_t(1) << 62) / blockBytes)
      return in.error("tensor " + nameText + " (" + t.typeInfo->name + ", " + llvm::Twine(elements) +
                          " elements) is over 2^62 bytes",
                      at);
    t.bytes = blocks * blockBytes;
    auto offset = in.read<uint64_t>("the offset of tensor " + nameText);
    if (!offset)
      return offset.takeError();
    if (*offset % dataAlignment != 0)
      return in.error("tensor " + nameText + " has offset " + llvm::Twine(*offset) +
                          ", not a multiple of the alignment " + llvm::Twine(dataAlignment),
                      at);
    t.offset = *offset;
    tensorIndex[*name] = tensorInfos.size();
    tensorInfos.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment; every tensor lies inside the
  // file and no two overlap.
  const uint64_t tablesEnd = in.offset();
  dataStart = tablesEnd + (dataAlignment - tablesEnd % dataAlignment) % dataAlignment;
  if (!tensorInfos.empty() && dataStart > fileSize)
    return llvm::createStringError(llvm::formatv("{0}: truncated: the data section starts at byte {1}, after the "
                                                 "end of the {2}-byte file",
                                                 fileName, dataStart, fileSize)
                                       .str());
  const uint64_t dataSize = fileSize - std::min(dataStart, fileSize);
  for (TensorInfo &t : tensorInfos) {
    if (t.offset > dataSize || t.bytes > dataSize - t.offset)
      return llvm::createStringError(
          llvm::formatv("{0}: truncated: tensor {1} ({2}, {3} bytes at data offset {4}) runs past the end of the "
                        "{5}-byte file",
                        fileName, quoted(t.name), t.typeInfo->name, t.bytes, t.offset, fileSize)
              .str());
    t.fileOffset = dataStart + t.offset;
    t.data = llvm::ArrayRef<uint8_t>(base + t.fileOffset, size_t(t.bytes));
  }
  std::vector<const TensorInfo *> byOffset;
  byOffset.reserve(tensorInfos.size());
  for (const TensorInfo &t : tensorInfos)
    byOffset.push_back(&t);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const TensorInfo *a, const TensorInfo *b) { return a->offset < b->offset; });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const TensorInfo &prev = *byOffset[i - 1], &next = *byOffset[i];
    if (next.offset < prev.offset + prev.bytes)
      return llvm::createStringError(llvm::formatv("{0}: tensors {1} and {2} overlap (data offsets {3} and {4}, "
                                                   "{5} bytes)",
                                                   fileName, quoted(prev.name), quoted(next.name), prev.offset,
                                                   next.offset, prev.bytes)
                                         .str());
  }
  return llvm::Error::success();
}

} // namespace helm::gguf
