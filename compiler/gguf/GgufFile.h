//===- GgufFile.h - a bounds-checked, memory-mapped view of a GGUF file -------------===//
//
// GGUF (llama.cpp's model file, versions 2 and 3, little-endian) as views into the mapped file: the
// header, every metadata key/value (scalars, strings, arrays of either), and every tensor's name,
// shape, ggml type and data. Nothing is copied: strings and tensor data point into the mapping,
// which the File owns. Opening a file reads only the pages of its header and tables; a tensor's
// data pages are touched when the caller reads them.
//
// Every length, count, offset and size is checked against the file before it is used, so a
// truncated or corrupt file gives one error line naming the file, the item and the byte offset
// (docs/gguf.md lists the checks); it never reads outside the mapping.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_GGUF_GGUFFILE_H
#define HELM_COMPILER_GGUF_GGUFFILE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace helm::gguf {

/// GGUF's metadata value types (the file's u32 codes).
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
/// "u8", "i32", "string", "array", ...; "unknown" for a code outside the table.
llvm::StringRef valueTypeName(ValueType type);

/// A key, tensor name or string value for an error message, in single quotes: printable ASCII
/// kept, other bytes and quotes escaped (\xNN), cut at 80 bytes ("...").
std::string quoted(llvm::StringRef s);

/// A ggml tensor type: its name as llama.cpp spells it and its block (weights and bytes; 1 and the
/// element size for the plain types).
struct TensorTypeInfo {
  uint32_t id;
  llvm::StringRef name;
  int64_t blockWeights, blockBytes;
};
/// The type with this id, or null for an id ggml does not define.
const TensorTypeInfo *tensorTypeInfo(uint32_t id);

/// One metadata value. Scalars are read with the as*() accessors, arrays element by element; an
/// accessor of the wrong type returns nullopt (the caller names the key in its error).
class Value {
public:
  ValueType type = ValueType::U8;
  /// Arrays: the elements' type and count; scalars: count 1.
  ValueType elementType = ValueType::U8;
  uint64_t count = 1;

  /// An integer or bool scalar (a u64 above INT64_MAX: nullopt).
  std::optional<int64_t> asInt() const;
  /// A f32 / f64 scalar, or an integer one.
  std::optional<double> asFloat() const;
  /// A u64 scalar, all of its range (asInt refuses the half above INT64_MAX).
  std::optional<uint64_t> asU64() const;
  std::optional<bool> asBool() const;
  std::optional<llvm::StringRef> asString() const;

  bool isArrayOf(ValueType element) const { return type == ValueType::Array && elementType == element; }
  /// Element i of an array of integers / bools, floats, or strings.
  std::optional<int64_t> intAt(uint64_t i) const;
  std::optional<double> floatAt(uint64_t i) const;
  std::optional<uint64_t> u64At(uint64_t i) const;
  std::optional<llvm::StringRef> stringAt(uint64_t i) const;

private:
  friend class File;
  /// Scalars and arrays of numbers: the first byte of the (first) value; strings: their views.
  const uint8_t *data = nullptr;
  std::vector<llvm::StringRef> strings;
};

/// One tensor: its name, shape in GGUF's order (dims[0] is the innermost, contiguous dimension: an
/// [out, in] matrix has dims {in, out}), ggml type and bytes in the file.
struct TensorInfo {
  llvm::StringRef name;
  llvm::SmallVector<uint64_t, 4> dims;
  uint32_t type = 0;
  const TensorTypeInfo *typeInfo = nullptr;
  uint64_t elements = 0;
  /// Offset from the start of the data section (a multiple of the alignment), and from the start of
  /// the file.
  uint64_t offset = 0, fileOffset = 0;
  uint64_t bytes = 0;
  llvm::ArrayRef<uint8_t> data;
};

class File {
public:
  /// Maps `path` and reads its header and tables. Errors: "PATH: ..." on one line.
  static llvm::Expected<std::unique_ptr<File>> open(llvm::StringRef path);
  /// The same on bytes already in memory (the fuzz target); `name` stands for the path in errors.
  static llvm::Expected<std::unique_ptr<File>> parse(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                     llvm::StringRef name);

  llvm::StringRef name() const { return fileName; }
  uint32_t version() const { return fileVersion; }
  uint64_t alignment() const { return dataAlignment; }
  /// Where the data section starts, and the file's size.
  uint64_t dataOffset() const { return dataStart; }
  uint64_t size() const { return buffer->getBufferSize(); }

  /// The metadata in file order, and by key.
  llvm::ArrayRef<std::pair<llvm::StringRef, Value>> metadata() const { return values; }
  const Value *find(llvm::StringRef key) const;

  /// The tensors in file order, and by name.
  llvm::ArrayRef<TensorInfo> tensors() const { return tensorInfos; }
  const TensorInfo *findTensor(llvm::StringRef name) const;
  /// Gives the pages of `tensor`'s data back to the kernel when the file is mapped (the next read
  /// faults them in again from the page cache); nothing for a file read into memory.
  void releasePages(const TensorInfo &tensor) const;

private:
  File() = default;
  llvm::Error read();

  std::string fileName;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  uint32_t fileVersion = 0;
  uint64_t dataAlignment = 32, dataStart = 0;
  std::vector<std::pair<llvm::StringRef, Value>> values;
  llvm::StringMap<size_t> valueIndex, tensorIndex;
  std::vector<TensorInfo> tensorInfos;
};

} // namespace helm::gguf

#endif
