// .helmpkg reader (the on-disk structures and their codecs are contract/format/PackageFormat.h).
#include "contract/format/Package.h"
#include "contract/format/Checksum.h"
#include "contract/format/JsonDepth.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace helm::pkg {

using llvm::support::endian::read32le;
using llvm::support::endian::read64le;
using llvm::support::endian::write32le;
using llvm::support::endian::write64le;

namespace {

llvm::Error fail(llvm::StringRef file, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), (file + ": " + message).str());
}

std::string quoted(const SectionEntry &e) {
  std::string out = "'";
  out.append(e.nameRef().data(), e.nameRef().size());
  out.push_back('\'');
  return out;
}

/// A name field is valid when it holds 1..31 printable bytes followed only by NULs.
bool validNameField(const SectionEntry &e) {
  llvm::StringRef n = e.nameRef();
  if (!isValidSectionName(n))
    return false;
  for (size_t i = n.size(); i < kSectionNameSize; ++i)
    if (e.name[i] != '\0')
      return false;
  return true;
}

/// Printable rendering of an untrusted name for messages.
std::string safeName(const SectionEntry &e) {
  std::string out;
  for (size_t i = 0; i < kSectionNameSize && e.name[i] != '\0'; ++i) {
    unsigned char c = static_cast<unsigned char>(e.name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      out.push_back(char(c));
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r')
      c = ' ';
  return s;
}

} // namespace

llvm::Error validateHeader(const FileHeader &h, uint64_t fileSize, llvm::StringRef file) {
  if (h.headerSize != kHeaderSize)
    return fail(file, "corrupt header (header size " + llvm::Twine(h.headerSize) + ", expected " +
                          llvm::Twine(kHeaderSize) + ")");
  if (h.sectionEntrySize != kSectionEntrySize)
    return fail(file, "corrupt header (section entry size " + llvm::Twine(h.sectionEntrySize) +
                          ", expected " + llvm::Twine(kSectionEntrySize) + ")");
  if (h.sectionCount > kMaxSections)
    return fail(file, "corrupt header (" + llvm::Twine(h.sectionCount) + " sections, at most " +
                          llvm::Twine(kMaxSections) + ")");
  uint64_t tableBytes = uint64_t(h.sectionCount) * kSectionEntrySize;
  if (h.sectionTableOffset < kHeaderSize || h.sectionTableOffset % 8 != 0 ||
      h.sectionTableOffset > std::numeric_limits<uint64_t>::max() - tableBytes)
    return fail(file, "corrupt header (section table at offset " + llvm::Twine(h.sectionTableOffset) + ")");
  uint64_t tableEnd = h.sectionTableOffset + tableBytes;
  if (tableEnd > fileSize)
    return fail(file, "truncated (section table ends at " + llvm::Twine(tableEnd) + ", file has " +
                          llvm::Twine(fileSize) + " bytes)");
  return llvm::Error::success();
}

llvm::Error validateLayout(const FileHeader &h, llvm::ArrayRef<SectionEntry> table, uint64_t fileSize,
                           llvm::StringRef file) {
  if (llvm::Error e = validateHeader(h, fileSize, file))
    return e;
  if (table.size() != h.sectionCount)
    return fail(file, "corrupt header (" + llvm::Twine(h.sectionCount) + " sections, table has " +
                          llvm::Twine(table.size()) + ")");
  // Per-entry rules, in table order.
  const SectionEntry *manifest = nullptr;
  for (size_t i = 0; i < table.size(); ++i) {
    const SectionEntry &e = table[i];
    if (!validNameField(e))
      return fail(file, "corrupt section table (section #" + llvm::Twine(i) + " has an invalid name '" +
                            safeName(e) + "')");
    if (e.kind == 0)
      return fail(file, "corrupt section table (section " + quoted(e) + " has kind 0)");
    if (e.offset % kSectionAlignment != 0)
      return fail(file, "section " + quoted(e) + " offset " + llvm::Twine(e.offset) +
                            " is not a multiple of " + llvm::Twine(kSectionAlignment));
    if (e.offset < kSectionAlignment)
      return fail(file, "section " + quoted(e) + " starts at offset 0, inside the header page");
    if (e.size > std::numeric_limits<uint64_t>::max() - e.offset)
      return fail(file, "section " + quoted(e) + " size " + llvm::Twine(e.size) + " overflows 64-bit offsets");
    if (e.kind == uint32_t(SectionKind::Manifest)) {
      if (manifest)
        return fail(file, "two manifest sections (" + quoted(*manifest) + " and " + quoted(e) + ")");
      manifest = &e;
    }
  }
  if (!manifest)
    return fail(file, "no manifest section");
  {
    std::set<std::pair<uint32_t, llvm::StringRef>> seen;
    for (const SectionEntry &e : table)
      if (!seen.insert({e.kind, e.nameRef()}).second)
        return fail(file, "duplicate section " + quoted(e) + " (kind " + sectionKindLabel(e.kind) + ")");
  }
  // Extents, in file order: the first section past the end of the file is the one named.
  std::vector<size_t> order(table.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(table[a].offset, a) < std::pair(table[b].offset, b);
  });
  for (size_t i : order) {
    uint64_t end = table[i].offset + table[i].size;
    if (end > fileSize)
      return fail(file, "truncated (section " + quoted(table[i]) + " ends at " + llvm::Twine(end) +
                            ", file has " + llvm::Twine(fileSize) + " bytes)");
  }
  // Overlaps between non-empty sections (empty ones occupy no bytes).
  const SectionEntry *previous = nullptr;
  uint64_t previousEnd = 0;
  for (size_t i : order) {
    const SectionEntry &e = table[i];
    if (e.size == 0)
      continue;
    if (previous && e.offset < previousEnd)
      return fail(file, "section " + quoted(e) + " overlaps section " + quoted(*previous));
    previous = &e;
    previousEnd = e.offset + e.size;
  }
  uint64_t tableBegin = h.sectionTableOffset;
  uint64_t tableEnd = tableBegin + uint64_t(h.sectionCount) * kSectionEntrySize;
  if (tableEnd > tableBegin)
    for (const SectionEntry &e : table)
      if (e.size != 0 && e.offset < tableEnd && tableBegin < e.offset + e.size)
        return fail(file, "section table overlaps section " + quoted(e));
  if (h.fileSize > fileSize)
    return fail(file, "truncated (header says " + llvm::Twine(h.fileSize) + " bytes, file has " +
                          llvm::Twine(fileSize) + " bytes)");
  if (h.fileSize < fileSize)
    return fail(file, "trailing data (header says " + llvm::Twine(h.fileSize) + " bytes, file has " +
                          llvm::Twine(fileSize) + " bytes)");
  return llvm::Error::success();
}

// --- FileMapping ---------------------------------------------------------------------------

class FileMapping {
public:
  /// Maps `size` bytes of `fd` read-only at an address on a 2 MiB boundary (file offset 0 there),
  /// so every 2 MiB-aligned piece of the file can be mapped by one PMD entry when the page cache
  /// holds it as a 2 MiB folio, and asks for such pages (MADV_HUGEPAGE also makes page faults on an
  /// uncached file read ahead in 2 MiB folios). Where transparent huge pages are off, the mapping
  /// is an ordinary one.
  static llvm::Expected<std::unique_ptr<FileMapping>> map(int fd, size_t size) {
    size_t page = size_t(::sysconf(_SC_PAGESIZE));
    size_t length = (size + page - 1) / page * page;
    size_t reserve = size >= kHugePageBytes ? length + kHugePageBytes : length;
    // Reserve address space with room to slide to a 2 MiB boundary, then map the file over it.
    void *area = ::mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED)
      return llvm::createStringError(std::error_code(errno, std::generic_category()), "%s",
                                     std::strerror(errno));
    uintptr_t begin = uintptr_t(area);
    uintptr_t at = reserve > length ? alignUp(begin, kHugePageBytes) : begin;
    void *mapped = ::mmap(reinterpret_cast<void *>(at), size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (mapped == MAP_FAILED) {
      int err = errno;
      ::munmap(area, reserve);
      return llvm::createStringError(std::error_code(err, std::generic_category()), "%s", std::strerror(err));
    }
    if (at > begin)
      ::munmap(area, at - begin);
    if (begin + reserve > at + length)
      ::munmap(reinterpret_cast<void *>(at + length), begin + reserve - (at + length));
#if defined(MADV_HUGEPAGE)
    if (size >= kHugePageBytes)
      ::madvise(mapped, length, MADV_HUGEPAGE);
#endif
    return std::unique_ptr<FileMapping>(new FileMapping(static_cast<const char *>(mapped), length));
  }
  ~FileMapping() { ::munmap(const_cast<char *>(data_), length_); }
  FileMapping(const FileMapping &) = delete;
  FileMapping &operator=(const FileMapping &) = delete;
  const char *data() const { return data_; }

private:
  FileMapping(const char *data, size_t length) : data_(data), length_(length) {}
  const char *data_;
  size_t length_;
};

uint64_t Package::hugePageBytes() const {
  if (!mapping_ || data_.empty())
    return 0;
  std::ifstream smaps("/proc/self/smaps");
  uintptr_t begin = uintptr_t(data_.data()), end = begin + data_.size();
  bool inside = false;
  uint64_t total = 0;
  std::string line;
  while (std::getline(smaps, line)) {
    // A mapping's header line: "7f0c00000000-7f0c2a000000 r--s 00000000 fd:01 1234  /path"; the
    // field lines ("FilePmdMapped:    2048 kB") never parse as two hex numbers joined by '-'.
    unsigned long long from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &from, &to) == 2) {
      inside = from < end && begin < to;
      continue;
    }
    if (!inside)
      continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "FilePmdMapped: %llu kB", &kib) == 1)
      total += uint64_t(kib) << 10;
  }
  return total;
}

// --- Package -------------------------------------------------------------------------------

Package::~Package() = default;

llvm::Expected<std::unique_ptr<Package>> Package::open(llvm::StringRef path, Verify verify) {
  namespace fs = llvm::sys::fs;
  // Refuse FIFOs, devices and directories before open() (a FIFO would block it).
  fs::file_status pathStatus;
  if (!fs::status(path, pathStatus) && pathStatus.type() != fs::file_type::regular_file)
    return fail(path, "not a HELM package (not a regular file)");
  llvm::Expected<fs::file_t> fd = fs::openNativeFileForRead(path);
  if (!fd)
    return fail(path, "cannot open (" + oneLine(llvm::toString(fd.takeError())) + ")");
  llvm::scope_exit closeFd([&] { fs::closeFile(*fd); });
  fs::file_status status;
  if (std::error_code ec = fs::status(*fd, status))
    return fail(path, "cannot stat (" + ec.message() + ")");
  if (status.type() != fs::file_type::regular_file)
    return fail(path, "not a HELM package (not a regular file)");
  uint64_t size = status.getSize();
  if (size > std::numeric_limits<size_t>::max())
    return fail(path, "too large to map");
  std::unique_ptr<Package> pkg(new Package());
  pkg->name_ = path.str();
  if (size > 0) {
    llvm::Expected<std::unique_ptr<FileMapping>> mapping = FileMapping::map(*fd, size_t(size));
    if (!mapping)
      return fail(path, "cannot map (" + oneLine(llvm::toString(mapping.takeError())) + ")");
    pkg->data_ = llvm::ArrayRef<char>((*mapping)->data(), size_t(size));
    pkg->mapping_ = std::move(*mapping);
  }
  if (llvm::Error e = pkg->load(verify))
    return std::move(e);
  return std::move(pkg);
}

llvm::Expected<std::unique_ptr<Package>> Package::fromBuffer(llvm::ArrayRef<char> bytes,
                                                             llvm::StringRef nameForErrors, Verify verify) {
  std::unique_ptr<Package> pkg(new Package());
  pkg->name_ = nameForErrors.str();
  pkg->data_ = bytes;
  if (llvm::Error e = pkg->load(verify))
    return std::move(e);
  return std::move(pkg);
}

llvm::Error Package::load(Verify verify) {
  llvm::StringRef file = name_;
  const char *base = data_.data();
  uint64_t size = data_.size();
  if (size < sizeof(kMagic))
    return fail(file, "not a HELM package (file too small: " + llvm::Twine(size) + " bytes)");
  if (std::memcmp(base, kMagic, sizeof(kMagic)) != 0)
    return fail(file, "not a HELM package (bad magic)");
  if (size < 12)
    return fail(file, "truncated (header needs " + llvm::Twine(kHeaderSize) + " bytes, file has " +
                          llvm::Twine(size) + " bytes)");
  uint32_t version = read32le(base + 8);
  if (version != kFormatVersion)
    return fail(file, "format version " + llvm::Twine(version) + ", this runtime reads version " +
                          llvm::Twine(kFormatVersion));
  if (size < kHeaderSize)
    return fail(file, "truncated (header needs " + llvm::Twine(kHeaderSize) + " bytes, file has " +
                          llvm::Twine(size) + " bytes)");
  FileHeader h = decodeHeader(base);
  if (h.headerChecksum != computeHeaderChecksum(base))
    return fail(file, "corrupt header (checksum mismatch)");
  if (llvm::Error e = validateHeader(h, size, file))
    return e;
  const char *tableBytes = base + h.sectionTableOffset;
  size_t tableSize = size_t(h.sectionCount) * kSectionEntrySize;
  if (checksum64(tableBytes, tableSize) != h.tableChecksum)
    return fail(file, "corrupt section table (checksum mismatch)");
  std::vector<SectionEntry> table;
  table.reserve(h.sectionCount);
  for (uint32_t i = 0; i < h.sectionCount; ++i)
    table.push_back(decodeEntry(tableBytes + size_t(i) * kSectionEntrySize));
  if (llvm::Error e = validateLayout(h, table, size, file))
    return e;

  sections_.clear();
  sections_.reserve(table.size());
  for (const SectionEntry &e : table) {
    Section s{static_cast<SectionKind>(e.kind), e.nameRef().str(), e.offset, e.size, e.checksum,
              llvm::ArrayRef<char>(base + e.offset, size_t(e.size))};
    if (s.kind == SectionKind::Manifest)
      manifestIndex_ = sections_.size();
    sections_.push_back(std::move(s));
  }

  // The manifest is always verified and parsed: it is small and everything else hangs off it.
  const Section &m = sections_[manifestIndex_];
  if (llvm::Error e = verifySection(m))
    return e;
  llvm::StringRef text(m.bytes.data(), m.bytes.size());
  size_t badByte = 0;
  if (!llvm::json::isUTF8(text, &badByte))
    return fail(file, "manifest is not valid UTF-8 (byte " + llvm::Twine(badByte) + ")");
  if (jsonDepth(text, kMaxManifestDepth) > kMaxManifestDepth)
    return fail(file, "manifest nests deeper than " + llvm::Twine(kMaxManifestDepth) + " levels");
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return fail(file, "manifest is not valid JSON (" + oneLine(llvm::toString(json.takeError())) + ")");
  if (!json->getAsObject())
    return fail(file, "manifest is not a JSON object");
  manifestJson_ = std::move(*json);

  if (verify == Verify::HeaderOnly)
    return llvm::Error::success();

  // Every byte outside the header, table and sections is padding and must be zero.
  struct Range {
    uint64_t begin, end;
    const Section *section;
  };
  std::vector<Range> used;
  used.push_back({0, kHeaderSize, nullptr});
  used.push_back({h.sectionTableOffset, h.sectionTableOffset + tableSize, nullptr});
  for (const Section &s : sections_)
    if (s.size)
      used.push_back({s.offset, s.offset + s.size, &s});
  std::sort(used.begin(), used.end(), [](const Range &a, const Range &b) { return a.begin < b.begin; });
  uint64_t cursor = 0;
  for (size_t i = 0; i <= used.size(); ++i) {
    uint64_t gapEnd = i < used.size() ? used[i].begin : size;
    for (uint64_t p = cursor; p < gapEnd; ++p)
      if (base[p] != 0) {
        std::string where = i < used.size() && used[i].section
                                ? ", before section '" + used[i].section->name + "'"
                                : std::string();
        return fail(file, "corrupt padding (nonzero byte at offset " + llvm::Twine(p) + where + ")");
      }
    if (i < used.size())
      cursor = std::max(cursor, used[i].end);
  }

#if defined(__linux__)
  if (mapping_ && size >= (uint64_t(1) << 24))
    ::madvise(const_cast<char *>(base), size_t(size), MADV_SEQUENTIAL);
#endif
  for (const Section &s : sections_) {
    if (&s == &m || (verify == Verify::AllButGpuWeights && s.kind == SectionKind::GpuWeights))
      continue;
    if (llvm::Error e = verifySection(s))
      return e;
  }
  return llvm::Error::success();
}

llvm::StringRef Package::manifest() const {
  const Section &m = sections_[manifestIndex_];
  return llvm::StringRef(m.bytes.data(), m.bytes.size());
}

const Package::Section *Package::find(SectionKind kind, llvm::StringRef name) const {
  for (const Section &s : sections_)
    if (s.kind == kind && (name.empty() || s.name == name))
      return &s;
  return nullptr;
}

llvm::Error Package::verifySection(const Section &section) const {
  return verifySectionDigest(section, checksum64(section.bytes.data(), section.bytes.size()));
}

llvm::Error Package::verifySectionDigest(const Section &section, uint64_t digest) const {
  if (digest != section.checksum)
    return fail(name_, "checksum mismatch in section '" + section.name + "' (kind " +
                           sectionKindLabel(uint32_t(section.kind)) + ")");
  return llvm::Error::success();
}

llvm::Error Package::verifyAll() const {
  for (const Section &s : sections_)
    if (llvm::Error e = verifySection(s))
      return e;
  return llvm::Error::success();
}

} // namespace helm::pkg
