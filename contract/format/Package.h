// Read side of the .helmpkg format: maps a package read-only and validates it (docs/package-format.md).
// Every failure is an llvm::Error with one line "<file>: <problem>"; no input can crash the reader or
// make it read outside the file.
#pragma once

#include "contract/format/PackageFormat.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace helm::pkg {

/// A package file mapped read-only (Package::open); unmaps on destruction.
class FileMapping;

/// Pages the kernel maps with 2 MiB page-table entries: a file written in whole 2 MiB pieces at 2 MiB
/// offsets (PackageWriter) sits in the page cache as 2 MiB folios, and a mapping that starts on a
/// 2 MiB boundary maps them whole (Package::open does both). Decode streams every weight once per
/// token; with 4 KiB pages the hardware prefetchers stop at every page and the TLB misses once per
/// page (docs/package-format.md, "Mapping").
inline constexpr uint64_t kHugePageBytes = uint64_t(2) << 20;

class Package {
public:
  struct Section {
    SectionKind kind;
    std::string name;
    uint64_t offset, size, checksum;
    llvm::ArrayRef<char> bytes; // points into the mapping (or the caller's buffer)
  };

  /// All: header, table, layout, manifest, zero padding and every section checksum.
  /// HeaderOnly: header, table, layout and the manifest (checksum + JSON); no other section byte is
  /// touched, so opening a multi-GB package costs a few pages. Check sections later with
  /// verifySection() (e.g. while streaming them to a device).
  /// AllButGpuWeights: All, except the checksums of GPU-weights sections, which the caller
  /// computes while it streams them to the device (verifySectionDigest), so they are read once.
  enum class Verify { All, HeaderOnly, AllButGpuWeights };

  /// Maps `path` read-only. Errors name the file: "model.helmpkg: not a HELM package (bad magic)".
  static llvm::Expected<std::unique_ptr<Package>> open(llvm::StringRef path, Verify verify = Verify::All);
  /// Same checks over caller memory, without copying it; `bytes` must outlive the Package.
  static llvm::Expected<std::unique_ptr<Package>> fromBuffer(llvm::ArrayRef<char> bytes,
                                                             llvm::StringRef nameForErrors,
                                                             Verify verify = Verify::All);

  ~Package();
  Package(const Package &) = delete;
  Package &operator=(const Package &) = delete;

  /// JSON text of the manifest section (validated: UTF-8, parses, is an object).
  llvm::StringRef manifest() const;
  /// The manifest as parsed while opening (readers need not parse the text again).
  const llvm::json::Object &manifestObject() const { return *manifestJson_.getAsObject(); }
  /// First section of `kind` (with `name`, when given); nullptr if none.
  const Section *find(SectionKind kind, llvm::StringRef name = {}) const;
  /// Sections in table order; unknown kinds included (readers skip what they do not know).
  llvm::ArrayRef<Section> sections() const { return sections_; }
  /// Recomputes the section's checksum: "<file>: checksum mismatch in section 'x' (kind cpu-weights)".
  llvm::Error verifySection(const Section &section) const;
  /// The same check for a checksum the caller computed over the section's bytes (Checksum64).
  llvm::Error verifySectionDigest(const Section &section, uint64_t digest) const;
  /// verifySection for every section.
  llvm::Error verifyAll() const;
  uint64_t fileSize() const { return data_.size(); }
  /// Bytes of the package this process maps with 2 MiB pages now (from /proc/self/smaps: file
  /// pages mapped by PMD entries); 0 for fromBuffer() packages or where the kernel does not say.
  uint64_t hugePageBytes() const;
  uint32_t formatVersion() const { return kFormatVersion; }
  llvm::StringRef name() const { return name_; }
  llvm::ArrayRef<char> bytes() const { return data_; }

private:
  Package() = default;
  llvm::Error load(Verify verify);

  std::string name_;
  std::unique_ptr<FileMapping> mapping_;
  llvm::ArrayRef<char> data_;
  std::vector<Section> sections_;
  size_t manifestIndex_ = 0;
  llvm::json::Value manifestJson_ = llvm::json::Object();
};

} // namespace helm::pkg
