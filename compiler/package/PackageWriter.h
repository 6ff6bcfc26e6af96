// Write side of the .helmpkg format (docs/package-format.md). Streams section bytes from caller
// memory (an mmapped ONNX external-data file, protobuf raw_data, ...) into a temporary file next to
// the output, checksumming on the way; nothing is assembled in memory beyond one 2 MiB piece, so
// peak RSS stays small whatever the model size. The file is written in whole 2 MiB pieces at 2 MiB
// offsets: Linux's page cache then holds it in 2 MiB folios, which helm-rt maps with 2 MiB pages
// (Package.h, kHugePageBytes). finish() writes the section table and header, fsyncs and
// renames the temporary file over the output: readers see either the old file or the complete new one.
//
//   PackageWriter w("model.helmpkg");
//   w.addSection(SectionKind::Manifest, "manifest", json);
//   w.beginSection(SectionKind::CpuWeights, "cpu_weights");
//   uint64_t off = w.append(tensorBytes);   // 64-byte aligned offset inside the section
//   w.endSection();
//   if (llvm::Error e = w.finish()) ...
//
// Misuse (append outside a section, a bad or duplicate name, no manifest) and I/O errors do not throw
// or abort: the first one is remembered, later calls do nothing, and finish() returns it (one line,
// naming the output file) after removing the temporary file.
#pragma once

#include "contract/format/Checksum.h"
#include "contract/format/PackageFormat.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace helm::pkg {

class PackageWriter {
public:
  /// Creates the temporary file "<outputPath>.tmp-XXXXXXXX" in the output's directory.
  explicit PackageWriter(std::string outputPath);
  ~PackageWriter(); // removes the temporary file unless finish() succeeded
  PackageWriter(const PackageWriter &) = delete;
  PackageWriter &operator=(const PackageWriter &) = delete;

  /// Starts a section at the next 4096-byte boundary of the file. `name`: 1..31 printable ASCII
  /// bytes, unique per kind.
  void beginSection(SectionKind kind, llvm::StringRef name);
  /// Pads the current section with zeros to `alignment` (a power of two, at most 4096), then streams
  /// `bytes`. Returns the offset of the piece inside the section (file offset = section offset +
  /// it; both aligned).
  uint64_t append(llvm::ArrayRef<char> bytes, uint64_t alignment = kTensorAlignment);
  void endSection();
  /// beginSection + append(bytes, 1) + endSection.
  void addSection(SectionKind kind, llvm::StringRef name, llvm::ArrayRef<char> bytes);

  /// Writes table and header, re-reads the result through the package reader's structural checks
  /// (header, layout, manifest JSON), fsyncs and renames over the output. On any error: removes the
  /// temporary file, leaves an existing output untouched, returns the error.
  llvm::Error finish();

  /// Called with the total bytes written so far after every chunk (at most 64 MiB apart).
  void setProgressCallback(std::function<void(uint64_t bytesWritten)> callback) {
    progress_ = std::move(callback);
  }

  const std::string &outputPath() const { return outputPath_; }
  /// Path of the temporary file while one exists (empty otherwise); for tests and diagnostics.
  const std::string &tempPath() const { return tempPath_; }
  /// Bytes written to the file so far (header page, sections, padding).
  uint64_t bytesWritten() const { return fileEnd_; }
  /// Size of the open section so far (0 outside a section).
  uint64_t currentSectionSize() const { return inSection_ ? sectionSize_ : 0; }

private:
  void setError(const llvm::Twine &message);
  bool ok() const { return error_.empty() && fd_ >= 0; }
  void writeAt(uint64_t offset, const char *data, uint64_t size, Checksum64 *hash);
  /// Collects consecutive bytes into the 2 MiB-aligned piece of the file they fall in and writes
  /// the piece once it is full (or when a write goes elsewhere: flushPending()); a whole aligned
  /// piece is written straight from `data`.
  void stage(uint64_t offset, const char *data, uint64_t size);
  void flushPending();
  /// pwrite of [offset, offset + size) until done or an error (remembered).
  void writeRange(uint64_t offset, const char *data, uint64_t size);
  void writeZeros(uint64_t offset, uint64_t size, Checksum64 *hash);
  void discard();

  std::string outputPath_;
  std::string tempPath_;
  int fd_ = -1;
  std::string error_;
  bool finished_ = false;

  std::vector<SectionEntry> table_;
  bool inSection_ = false;
  uint64_t sectionOffset_ = 0; // file offset of the open section
  uint64_t sectionSize_ = 0;
  Checksum64 sectionHash_;
  uint64_t fileEnd_ = 0; // bytes of the file written so far (sections start after the first page)
  uint64_t reportedAt_ = 0;
  std::vector<char> pending_; // file bytes [pendingOffset_, + size), all in one 2 MiB-aligned piece
  uint64_t pendingOffset_ = 0;
  std::function<void(uint64_t)> progress_;
};

} // namespace helm::pkg
