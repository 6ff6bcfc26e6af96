// .helmpkg writer: streams sections into a temporary file with pwrite, then table + header, fsync,
// rename. See PackageWriter.h and docs/package-format.md.
#include "compiler/package/PackageWriter.h"
#include "contract/format/Package.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace helm::pkg {

static_assert(sizeof(off_t) == 8, "64-bit file offsets are required");

namespace {
constexpr uint64_t kProgressStep = uint64_t(64) << 20;   // callback granularity
alignas(64) const char kZeros[kSectionAlignment] = {};
} // namespace

PackageWriter::PackageWriter(std::string outputPath) : outputPath_(std::move(outputPath)) {
  // An interrupted compiler (SIGINT, SIGTERM) leaves no temporary file behind: LLVM's signal
  // handler removes it. The name is registered for removal before the file exists, because the
  // handler may run on any thread at any moment: registered after its creation, a signal in between
  // would leave the file behind. O_EXCL makes a name taken meanwhile a retry, not a shared file.
  std::error_code ec;
  for (int attempt = 0; attempt < 16; ++attempt) {
    llvm::SmallString<256> temp;
    llvm::sys::fs::createUniquePath(outputPath_ + ".tmp-%%%%%%%%", temp, /*MakeAbsolute=*/false);
    tempPath_ = std::string(temp.str());
    llvm::sys::RemoveFileOnSignal(tempPath_);
    int fd = -1;
    ec = llvm::sys::fs::openFileForReadWrite(tempPath_, fd, llvm::sys::fs::CD_CreateNew,
                                               llvm::sys::fs::OF_None);
    if (!ec) {
      fd_ = fd;
      break;
    }
    llvm::sys::DontRemoveFileOnSignal(tempPath_);
    tempPath_.clear();
    if (ec != std::errc::file_exists)
      break;
  }
  if (fd_ < 0) {
    setError("cannot create a temporary file next to it (" + ec.message() + ")");
    return;
  }
  pending_.reserve(kHugePageBytes);
  fileEnd_ = kSectionAlignment; // the first page holds header (+ table), written by finish()
}

PackageWriter::~PackageWriter() {
  if (!finished_)
    discard();
}

void PackageWriter::setError(const llvm::Twine &message) {
  if (error_.empty())
    error_ = (outputPath_ + ": " + message).str();
}

void PackageWriter::discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tempPath_.empty()) {
    llvm::sys::fs::remove(tempPath_);
    llvm::sys::DontRemoveFileOnSignal(tempPath_);
    tempPath_.clear();
  }
}

void PackageWriter::writeAt(uint64_t offset, const char *data, uint64_t size, Checksum64 *hash) {
  while (size > 0 && ok()) {
    // Up to the next 2 MiB boundary of the file: hashed, then staged while it is in cache.
    uint64_t piece = std::min(size, alignUp(offset + 1, kHugePageBytes) - offset);
    if (hash)
      hash->update(data, size_t(piece));
    stage(offset, data, piece);
    offset += piece;
    data += piece;
    size -= piece;
    if (progress_ && offset >= reportedAt_ + kProgressStep) {
      reportedAt_ = offset;
      progress_(offset);
    }
  }
}

void PackageWriter::stage(uint64_t offset, const char *data, uint64_t size) {
  if (!pending_.empty() && offset != pendingOffset_ + pending_.size())
    flushPending();
  while (size > 0 && ok()) {
    if (pending_.empty() && offset % kHugePageBytes == 0 && size >= kHugePageBytes) {
      // A whole aligned piece goes out from the caller's memory, without the copy.
      uint64_t whole = size / kHugePageBytes * kHugePageBytes;
      writeRange(offset, data, whole);
      data += whole;
      offset += whole;
      size -= whole;
      continue;
    }
    if (pending_.empty())
      pendingOffset_ = offset;
    uint64_t blockEnd = alignUp(pendingOffset_ + 1, kHugePageBytes);
    uint64_t take = std::min(size, blockEnd - (pendingOffset_ + pending_.size()));
    pending_.insert(pending_.end(), data, data + take);
    data += take;
    offset += take;
    size -= take;
    if (pendingOffset_ + pending_.size() == blockEnd)
      flushPending();
  }
}

void PackageWriter::flushPending() {
  writeRange(pendingOffset_, pending_.data(), pending_.size());
  pending_.clear();
}

void PackageWriter::writeRange(uint64_t offset, const char *data, uint64_t size) {
  uint64_t done = 0;
  while (done < size && ok()) {
    ssize_t n = ::pwrite(fd_, data + done, size_t(size - done), off_t(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      setError("cannot write (" + llvm::Twine(n < 0 ? std::strerror(errno) : "no progress") + ")");
      return;
    }
    done += uint64_t(n);
  }
}

void PackageWriter::writeZeros(uint64_t offset, uint64_t size, Checksum64 *hash) {
  while (size > 0 && ok()) {
    uint64_t piece = std::min<uint64_t>(size, sizeof(kZeros));
    writeAt(offset, kZeros, piece, hash);
    offset += piece;
    size -= piece;
  }
}

void PackageWriter::beginSection(SectionKind kind, llvm::StringRef name) {
  if (!ok())
    return;
  if (inSection_) {
    setError("beginSection('" + name + "') while section '" + table_.back().nameRef() + "' is open");
    return;
  }
  if (!isValidSectionName(name)) {
    setError("invalid section name '" + name + "' (1 to 31 printable ASCII characters)");
    return;
  }
  if (uint32_t(kind) == 0) {
    setError("section '" + name + "' has kind 0 (reserved)");
    return;
  }
  for (const SectionEntry &e : table_) {
    if (e.kind == uint32_t(kind) && e.nameRef() == name) {
      setError("duplicate section '" + name + "' (kind " + sectionKindLabel(e.kind) + ")");
      return;
    }
    if (kind == SectionKind::Manifest && e.kind == uint32_t(SectionKind::Manifest)) {
      setError("second manifest section '" + name + "'");
      return;
    }
  }
  uint64_t start = alignUp(fileEnd_, kSectionAlignment);
  writeZeros(fileEnd_, start - fileEnd_, nullptr);
  fileEnd_ = start;
  SectionEntry entry;
  entry.kind = uint32_t(kind);
  std::memcpy(entry.name, name.data(), name.size());
  entry.offset = start;
  table_.push_back(entry); // size and checksum filled by endSection()
  inSection_ = true;
  sectionOffset_ = start;
  sectionSize_ = 0;
  sectionHash_ = Checksum64();
}

uint64_t PackageWriter::append(llvm::ArrayRef<char> bytes, uint64_t alignment) {
  if (!ok())
    return 0;
  if (!inSection_) {
    setError("append() outside a section");
    return 0;
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kSectionAlignment) {
    setError("alignment " + llvm::Twine(alignment) + " is not a power of two up to 4096");
    return 0;
  }
  uint64_t at = alignUp(sectionSize_, alignment);
  writeZeros(sectionOffset_ + sectionSize_, at - sectionSize_, &sectionHash_);
  writeAt(sectionOffset_ + at, bytes.data(), bytes.size(), &sectionHash_);
  sectionSize_ = at + bytes.size();
  fileEnd_ = sectionOffset_ + sectionSize_;
  return at;
}

void PackageWriter::endSection() {
  if (!ok())
    return;
  if (!inSection_) {
    setError("endSection() outside a section");
    return;
  }
  SectionEntry &entry = table_.back();
  entry.size = sectionSize_;
  entry.checksum = sectionHash_.digest();
  inSection_ = false;
  sectionSize_ = 0;
}

void PackageWriter::addSection(SectionKind kind, llvm::StringRef name, llvm::ArrayRef<char> bytes) {
  beginSection(kind, name);
  append(bytes, 1);
  endSection();
}

llvm::Error PackageWriter::finish() {
  auto failed = [&]() -> llvm::Error {
    discard();
    return llvm::createStringError(llvm::inconvertibleErrorCode(), error_);
  };
  if (finished_)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   outputPath_ + ": finish() called after success");
  if (ok() && inSection_)
    setError("section '" + table_.back().nameRef() + "' was not ended");
  if (ok() && llvm::none_of(table_, [](const SectionEntry &e) {
        return e.kind == uint32_t(SectionKind::Manifest);
      }))
    setError("no manifest section");
  if (ok() && table_.size() > kMaxSections)
    setError("too many sections (" + llvm::Twine(table_.size()) + ", at most " +
             llvm::Twine(kMaxSections) + ")");
  if (!ok()) {
    if (error_.empty())
      setError("writer is not usable");
    return failed();
  }

  // Section table: in the first page when it fits, else after the last section.
  uint32_t count = uint32_t(table_.size());
  uint64_t tableBytes = uint64_t(count) * kSectionEntrySize;
  std::vector<char> table(tableBytes);
  for (uint32_t i = 0; i < count; ++i)
    encodeEntry(table_[i], table.data() + size_t(i) * kSectionEntrySize);
  FileHeader h;
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kFormatVersion;
  h.headerSize = kHeaderSize;
  h.sectionCount = count;
  h.sectionEntrySize = kSectionEntrySize;
  h.tableChecksum = checksum64(table.data(), table.size());
  std::vector<char> page(kSectionAlignment, 0);
  if (count <= kSectionsInFirstPage) {
    h.sectionTableOffset = kHeaderSize;
    h.fileSize = fileEnd_;
    std::memcpy(page.data() + kHeaderSize, table.data(), table.size());
  } else {
    h.sectionTableOffset = alignUp(fileEnd_, kTensorAlignment);
    h.fileSize = h.sectionTableOffset + tableBytes;
    writeZeros(fileEnd_, h.sectionTableOffset - fileEnd_, nullptr);
    writeAt(h.sectionTableOffset, table.data(), table.size(), nullptr);
  }
  encodeHeader(h, page.data());
  writeAt(0, page.data(), page.size(), nullptr);
  flushPending();
  if (!ok())
    return failed();
  if (::ftruncate(fd_, off_t(h.fileSize)) != 0) {
    setError("cannot set the file size (" + llvm::Twine(std::strerror(errno)) + ")");
    return failed();
  }

  // Read back through the reader's structural checks (not the section checksums we just computed).
  {
    std::error_code ec;
    llvm::sys::fs::mapped_file_region map(fd_, llvm::sys::fs::mapped_file_region::readonly,
                                          size_t(h.fileSize), 0, ec);
    if (ec) {
      setError("cannot map the written file (" + ec.message() + ")");
      return failed();
    }
    auto pkg = Package::fromBuffer(llvm::ArrayRef<char>(map.const_data(), size_t(h.fileSize)),
                                   outputPath_, Package::Verify::HeaderOnly);
    if (!pkg) {
      error_ = llvm::toString(pkg.takeError());
      return failed();
    }
  }

  if (::fsync(fd_) != 0) {
    setError("cannot sync (" + llvm::Twine(std::strerror(errno)) + ")");
    return failed();
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    setError("cannot close (" + llvm::Twine(std::strerror(errno)) + ")");
    return failed();
  }
  if (std::error_code ec = llvm::sys::fs::rename(tempPath_, outputPath_)) {
    setError("cannot rename the temporary file into place (" + ec.message() + ")");
    return failed();
  }
  llvm::sys::DontRemoveFileOnSignal(tempPath_);
  tempPath_.clear();
  finished_ = true;
  // Make the rename durable; a failure here leaves a complete file, so it is not an error.
  llvm::SmallString<256> dir(outputPath_);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    (void)::fsync(dirFd);
    ::close(dirFd);
  }
  if (progress_)
    progress_(h.fileSize);
  return llvm::Error::success();
}

} // namespace helm::pkg
