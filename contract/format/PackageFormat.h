// On-disk layout of a .helmpkg file (format version 1). docs/package-format.md is the byte-by-byte
// specification; this header is its C++ mirror, shared by the writer (compiler/package) and the
// reader (Package.h). Depends on LLVM Support only, never on MLIR.
//
//   offset 0      FileHeader (64 bytes)
//   offset 64     section table: sectionCount SectionEntry records of 64 bytes (when it fits in the
//                 first 4 KiB page; otherwise the table follows the last section)
//   offset 4096   sections, each at a multiple of 4096, zero padding between them
//
// All integers are little-endian. Structures here are the decoded (host-order) values; use
// encodeHeader/decodeHeader and encodeEntry/decodeEntry to go to and from bytes.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace helm::pkg {

inline constexpr char kMagic[8] = {'H', 'E', 'L', 'M', 'P', 'K', 'G', '\0'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint32_t kSectionEntrySize = 64;
/// Bytes of the header covered by the header checksum (everything before the checksum field).
inline constexpr size_t kHeaderChecksumSpan = 56;
/// Every section starts at a multiple of this (and never inside the first page, the header's).
inline constexpr uint64_t kSectionAlignment = 4096;
/// Default alignment of tensors inside weight sections.
inline constexpr uint64_t kTensorAlignment = 64;
inline constexpr size_t kSectionNameSize = 32; // fixed field; names are 1..31 bytes, NUL padded
inline constexpr uint32_t kMaxSections = 65536;
/// Largest table the writer puts in the first page (64 + 63 * 64 = 4096).
inline constexpr uint32_t kSectionsInFirstPage = (kSectionAlignment - kHeaderSize) / kSectionEntrySize;
/// Manifest JSON nesting limit enforced by readers (keeps the recursive JSON parser off deep stacks).
inline constexpr unsigned kMaxManifestDepth = 256;

enum class SectionKind : uint32_t {
  Manifest = 1,
  CpuWeights = 2,
  GpuWeights = 3,
  CpuCode = 4,
  GpuCode = 5,
  Tokenizer = 6,
};

/// "manifest", "cpu-weights", "gpu-weights", "cpu-code", "gpu-code", "tokenizer"; "unknown" otherwise.
llvm::StringRef sectionKindName(SectionKind kind);
/// sectionKindName for known kinds, the number ("42") for unknown ones; used in messages.
std::string sectionKindLabel(uint32_t kind);

struct FileHeader {
  char magic[8];
  uint32_t version = 0;
  uint32_t headerSize = 0;
  uint32_t sectionCount = 0;
  uint32_t sectionEntrySize = 0;
  uint64_t sectionTableOffset = 0;
  uint64_t fileSize = 0;
  uint64_t flags = 0; // reserved: written as 0, ignored by readers of version 1
  uint64_t tableChecksum = 0;  // checksum64 of the section table bytes
  uint64_t headerChecksum = 0; // checksum64 of header bytes [0, 56); computed by encodeHeader
};

struct SectionEntry {
  uint32_t kind = 0;
  uint32_t flags = 0; // reserved: written as 0, ignored by readers of version 1
  char name[kSectionNameSize] = {};
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0; // checksum64 of the section's `size` bytes

  llvm::StringRef nameRef() const; // up to the first NUL
};

/// Writes `h` as 64 bytes, sealed: the header checksum is computed from the other 56 bytes
/// (h.headerChecksum is not used).
void encodeHeader(const FileHeader &h, char out[kHeaderSize]);
FileHeader decodeHeader(const char in[kHeaderSize]);
void encodeEntry(const SectionEntry &e, char out[kSectionEntrySize]);
SectionEntry decodeEntry(const char in[kSectionEntrySize]);
/// Checksum of an encoded header's first 56 bytes (what its last 8 bytes must hold).
uint64_t computeHeaderChecksum(const char encodedHeader[kHeaderSize]);

/// Whether `name` is a valid section name: 1..31 bytes, each printable ASCII 0x21..0x7E.
bool isValidSectionName(llvm::StringRef name);

inline constexpr uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Header-level checks that need no table bytes: header/entry size, section count, table position
/// and extent within `fileSize`. Errors are one line prefixed with "<fileName>: ".
llvm::Error validateHeader(const FileHeader &h, uint64_t fileSize, llvm::StringRef fileName);

/// Every structural rule of the format that needs no section bytes: validateHeader, then kinds,
/// names, alignment, 64-bit overflow, sections within `fileSize` (a truncated file names the first
/// section past its end), overlaps (sections, header, table), exactly one manifest, unique
/// (kind, name) pairs, and the header's file size. Pure arithmetic: usable on synthetic tables
/// describing multi-GB files.
llvm::Error validateLayout(const FileHeader &h, llvm::ArrayRef<SectionEntry> table, uint64_t fileSize,
                           llvm::StringRef fileName);

} // namespace helm::pkg
