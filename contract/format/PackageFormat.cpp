// The .helmpkg format's on-disk structures to and from bytes (PackageFormat.h), shared by the
// writer (compiler/package) and the reader (Package.h), beside it.
#include "contract/format/PackageFormat.h"
#include "contract/format/Checksum.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Endian.h"

#include <cstring>
#include <string>

namespace helm::pkg {

using llvm::support::endian::read32le;
using llvm::support::endian::read64le;
using llvm::support::endian::write32le;
using llvm::support::endian::write64le;

llvm::StringRef sectionKindName(SectionKind kind) {
  switch (kind) {
  case SectionKind::Manifest:
    return "manifest";
  case SectionKind::CpuWeights:
    return "cpu-weights";
  case SectionKind::GpuWeights:
    return "gpu-weights";
  case SectionKind::CpuCode:
    return "cpu-code";
  case SectionKind::GpuCode:
    return "gpu-code";
  case SectionKind::Tokenizer:
    return "tokenizer";
  }
  return "unknown";
}

std::string sectionKindLabel(uint32_t kind) {
  llvm::StringRef known = sectionKindName(static_cast<SectionKind>(kind));
  if (known != "unknown")
    return known.str();
  return std::to_string(kind);
}

llvm::StringRef SectionEntry::nameRef() const {
  return llvm::StringRef(name, strnlen(name, kSectionNameSize));
}

void encodeHeader(const FileHeader &h, char out[kHeaderSize]) {
  std::memcpy(out, h.magic, 8);
  write32le(out + 8, h.version);
  write32le(out + 12, h.headerSize);
  write32le(out + 16, h.sectionCount);
  write32le(out + 20, h.sectionEntrySize);
  write64le(out + 24, h.sectionTableOffset);
  write64le(out + 32, h.fileSize);
  write64le(out + 40, h.flags);
  write64le(out + 48, h.tableChecksum);
  write64le(out + kHeaderChecksumSpan, computeHeaderChecksum(out));
}

FileHeader decodeHeader(const char in[kHeaderSize]) {
  FileHeader h;
  std::memcpy(h.magic, in, 8);
  h.version = read32le(in + 8);
  h.headerSize = read32le(in + 12);
  h.sectionCount = read32le(in + 16);
  h.sectionEntrySize = read32le(in + 20);
  h.sectionTableOffset = read64le(in + 24);
  h.fileSize = read64le(in + 32);
  h.flags = read64le(in + 40);
  h.tableChecksum = read64le(in + 48);
  h.headerChecksum = read64le(in + 56);
  return h;
}

void encodeEntry(const SectionEntry &e, char out[kSectionEntrySize]) {
  write32le(out, e.kind);
  write32le(out + 4, e.flags);
  std::memcpy(out + 8, e.name, kSectionNameSize);
  write64le(out + 40, e.offset);
  write64le(out + 48, e.size);
  write64le(out + 56, e.checksum);
}

SectionEntry decodeEntry(const char in[kSectionEntrySize]) {
  SectionEntry e;
  e.kind = read32le(in);
  e.flags = read32le(in + 4);
  std::memcpy(e.name, in + 8, kSectionNameSize);
  e.offset = read64le(in + 40);
  e.size = read64le(in + 48);
  e.checksum = read64le(in + 56);
  return e;
}

uint64_t computeHeaderChecksum(const char encodedHeader[kHeaderSize]) {
  return checksum64(encodedHeader, kHeaderChecksumSpan);
}

bool isValidSectionName(llvm::StringRef name) {
  if (name.empty() || name.size() >= kSectionNameSize)
    return false;
  return llvm::all_of(name, [](char c) { return c >= 0x21 && c <= 0x7e; });
}

} // namespace helm::pkg
