// libFuzzer target: arbitrary bytes through the .helmpkg reader. Every input must give either a
// package or a one-line error "fuzz.helmpkg: ...", never a crash, hang, out-of-bounds read or
// sanitizer report.
//
// Random mutations almost never survive the header and table checksums, so each input is also run
// a second time with those checksums (and the checksums of every in-bounds section) recomputed: that
// drives the structural checks behind them (layout, overlaps, manifest JSON, padding).
#include "runtime/package/Checksum.h"
#include "runtime/package/Package.h"

#include "llvm/Support/Endian.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace helm::pkg;

namespace {

void check(llvm::ArrayRef<char> bytes, Package::Verify verify) {
  auto pkg = Package::fromBuffer(bytes, "fuzz.helmpkg", verify);
  if (!pkg) {
    std::string message = llvm::toString(pkg.takeError());
    if (message.rfind("fuzz.helmpkg: ", 0) != 0 || message.size() <= 14 ||
        message.find('\n') != std::string::npos)
      __builtin_trap(); // errors are one line naming the file
    return;
  }
  const Package &p = **pkg;
  if (p.manifest().data() < bytes.data() ||
      p.manifest().data() + p.manifest().size() > bytes.data() + bytes.size())
    __builtin_trap();
  volatile char sink = 0;
  for (const Package::Section &s : p.sections()) {
    if (s.bytes.data() < bytes.data() || s.offset + s.size > bytes.size())
      __builtin_trap();
    if (!s.bytes.empty())
      sink = sink + s.bytes.front() + s.bytes.back();
    llvm::Error e = p.verifySection(s);
    if (verify == Package::Verify::All && e)
      __builtin_trap(); // a fully verified package has good checksums
    llvm::consumeError(std::move(e));
    if (p.find(s.kind, s.name) == nullptr)
      __builtin_trap();
  }
}

// Recomputes the checksums a mutation broke, where the header/table are in bounds.
void reseal(std::vector<char> &b) {
  using namespace llvm::support::endian;
  if (b.size() < kHeaderSize || std::memcmp(b.data(), kMagic, 8) != 0)
    return;
  uint32_t count = read32le(b.data() + 16);
  uint64_t table = read64le(b.data() + 24);
  if (count > kMaxSections || table > b.size() || uint64_t(count) * kSectionEntrySize > b.size() - table)
    return;
  char *t = b.data() + table;
  for (uint32_t i = 0; i < count; ++i) {
    char *e = t + size_t(i) * kSectionEntrySize;
    uint64_t off = read64le(e + 40), size = read64le(e + 48);
    if (off <= b.size() && size <= b.size() - off) {
      // Skip sections that overlap the table: rewriting them would change the table under us.
      if (off < table + uint64_t(count) * kSectionEntrySize && table < off + size)
        continue;
      write64le(e + 56, checksum64(b.data() + off, size_t(size)));
    }
  }
  write64le(b.data() + 48, checksum64(t, size_t(count) * kSectionEntrySize));
  write64le(b.data() + 56, checksum64(b.data(), kHeaderChecksumSpan));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Exact-size heap copy: ASan flags any read past the end.
  std::vector<char> bytes(reinterpret_cast<const char *>(data), reinterpret_cast<const char *>(data) + size);
  check(bytes, Package::Verify::All);
  check(bytes, Package::Verify::HeaderOnly);
  reseal(bytes);
  check(bytes, Package::Verify::All);
  check(bytes, Package::Verify::HeaderOnly);
  return 0;
}
