// .helmpkg writer + reader: round trips, layout rules (including >4 GiB offsets on synthetic tables and
// a sparse file), truncation and bit flips everywhere, bad magic / version, atomic writes.
#include "compiler/package/PackageWriter.h"
#include "contract/format/Checksum.h"
#include "contract/format/Package.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace helm::pkg;
using Verify = Package::Verify;
namespace stdfs = std::filesystem;

namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;

std::vector<char> bytesOf(llvm::StringRef s) { return std::vector<char>(s.begin(), s.end()); }

std::vector<char> tensor(size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = char((i * 131 + seed * 17 + (i >> 8)) & 0xff);
  return v;
}

std::vector<char> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeFile(const std::string &path, const std::vector<char> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string errorOf(llvm::Expected<std::unique_ptr<Package>> pkg) {
  if (pkg)
    return "";
  return llvm::toString(pkg.takeError());
}

std::string errorOf(llvm::Error e) { return e ? llvm::toString(std::move(e)) : ""; }

bool oneLine(const std::string &s) { return !s.empty() && s.find('\n') == std::string::npos; }

class PackageTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> d;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("helm-pkg-test", d));
    dir = std::string(d.str());
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }
  std::string path(const std::string &name) const { return dir + "/" + name; }
  std::vector<std::string> dirEntries() const {
    std::vector<std::string> names;
    for (const auto &e : stdfs::directory_iterator(dir))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  struct Written {
    std::vector<uint64_t> offsets;       // of the weight tensors inside cpu_weights
    std::vector<std::vector<char>> data; // the tensors
  };
  // manifest, cpu_weights (5 tensors), tokenizer, an empty gpu_code, an unknown kind 77.
  Written writeSample(const std::string &out) {
    Written w;
    PackageWriter writer(out);
    writer.addSection(SectionKind::Manifest, "manifest", bytesOf(R"({"config":{"num_layers":2},"tensors":[]})"));
    writer.beginSection(SectionKind::CpuWeights, "cpu_weights");
    for (size_t n : {100u, 64u, 1u, 5000u, 4096u}) {
      w.data.push_back(tensor(n, unsigned(w.data.size())));
      w.offsets.push_back(writer.append(w.data.back()));
    }
    writer.endSection();
    writer.addSection(SectionKind::Tokenizer, "tokenizer", bytesOf(R"({"model":{"type":"BPE"}})"));
    writer.addSection(SectionKind::GpuCode, "gpu_code", {});
    writer.addSection(static_cast<SectionKind>(77), "future_thing", bytesOf("x"));
    llvm::Error e = writer.finish();
    EXPECT_FALSE(e) << llvm::toString(std::move(e));
    return w;
  }

  std::string dir;
};

// --- round trip ----------------------------------------------------------------------------

TEST_F(PackageTest, RoundTrip) {
  std::string out = path("model.helmpkg");
  Written w = writeSample(out);
  EXPECT_EQ(w.offsets, (std::vector<uint64_t>{0, 128, 192, 256, 5312}));
  EXPECT_EQ(dirEntries(), std::vector<std::string>{"model.helmpkg"});

  auto pkg = Package::open(out);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  const Package &p = **pkg;
  EXPECT_EQ(p.fileSize(), stdfs::file_size(out));
  EXPECT_EQ(p.manifest(), R"({"config":{"num_layers":2},"tensors":[]})");
  ASSERT_EQ(p.sections().size(), 5u);
  std::vector<std::string> names;
  for (const auto &s : p.sections()) {
    names.push_back(s.name);
    EXPECT_EQ(s.offset % kSectionAlignment, 0u) << s.name;
    EXPECT_GE(s.offset, kSectionAlignment);
    EXPECT_EQ(s.bytes.size(), s.size);
    EXPECT_EQ(s.bytes.data(), p.bytes().data() + s.offset);
    EXPECT_EQ(s.checksum, checksum64(s.bytes.data(), s.bytes.size()));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.bytes.data()) % 4096, 0u) << "mapping is page aligned";
    EXPECT_FALSE(p.verifySection(s));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"manifest", "cpu_weights", "tokenizer", "gpu_code", "future_thing"}));

  const Package::Section *weights = p.find(SectionKind::CpuWeights);
  ASSERT_TRUE(weights);
  EXPECT_EQ(weights->size, 5312u + 4096u);
  for (size_t i = 0; i < w.data.size(); ++i) {
    EXPECT_EQ(w.offsets[i] % 64, 0u);
    ASSERT_LE(w.offsets[i] + w.data[i].size(), weights->size);
    EXPECT_EQ(0, std::memcmp(weights->bytes.data() + w.offsets[i], w.data[i].data(), w.data[i].size())) << i;
  }
  // Padding between tensors is zero.
  for (uint64_t b = 100; b < 128; ++b)
    EXPECT_EQ(weights->bytes[b], 0);
  EXPECT_EQ(p.find(SectionKind::Tokenizer, "tokenizer")->bytes.size(), 24u);
  EXPECT_EQ(p.find(SectionKind::Tokenizer, "other"), nullptr);
  EXPECT_EQ(p.find(SectionKind::GpuWeights), nullptr);
  EXPECT_EQ(p.find(SectionKind::GpuCode)->size, 0u);
  EXPECT_EQ(p.find(static_cast<SectionKind>(77))->bytes.size(), 1u);
  EXPECT_FALSE(p.verifyAll());

  // The header fields, as the spec lays them out.
  std::vector<char> raw = readFile(out);
  EXPECT_EQ(0, std::memcmp(raw.data(), "HELMPKG\0", 8));
  EXPECT_EQ(llvm::support::endian::read32le(raw.data() + 8), 1u);
  EXPECT_EQ(llvm::support::endian::read32le(raw.data() + 16), 5u);
  EXPECT_EQ(llvm::support::endian::read64le(raw.data() + 24), 64u);
  EXPECT_EQ(llvm::support::endian::read64le(raw.data() + 32), raw.size());
}

TEST_F(PackageTest, FromBufferDoesNotCopy) {
  std::string out = path("m.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  auto pkg = Package::fromBuffer(raw, "buf.helmpkg", Verify::All);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ((*pkg)->bytes().data(), raw.data());
  EXPECT_EQ((*pkg)->find(SectionKind::Manifest)->bytes.data(), raw.data() + 4096);
  EXPECT_EQ((*pkg)->name(), "buf.helmpkg");
}

TEST_F(PackageTest, AlignmentsAndEmptyPieces) {
  std::string out = path("a.helmpkg");
  PackageWriter w(out);
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  w.beginSection(SectionKind::GpuWeights, "gpu_weights");
  EXPECT_EQ(w.append(tensor(3, 1), 1), 0u);
  EXPECT_EQ(w.append(tensor(3, 2), 1), 3u);
  EXPECT_EQ(w.append(tensor(3, 3), 4096), 4096u);
  EXPECT_EQ(w.append({}, 64), 4160u); // empty piece: aligned offset, nothing written
  EXPECT_EQ(w.append(tensor(1, 4), 2), 4160u);
  EXPECT_EQ(w.currentSectionSize(), 4161u);
  w.endSection();
  ASSERT_FALSE(w.finish());
  auto pkg = Package::open(out);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ((*pkg)->find(SectionKind::GpuWeights)->size, 4161u);
  EXPECT_EQ((*pkg)->find(SectionKind::GpuWeights)->offset, 8192u);
}

TEST_F(PackageTest, BadAlignmentIsAnError) {
  for (uint64_t a : {0ull, 3ull, 8192ull}) {
    std::string out = path("bad.helmpkg");
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    w.beginSection(SectionKind::CpuWeights, "w");
    w.append(tensor(8, 0), a);
    w.endSection();
    std::string err = errorOf(w.finish());
    EXPECT_NE(err.find("alignment"), std::string::npos) << err;
    EXPECT_FALSE(stdfs::exists(out));
  }
}

TEST_F(PackageTest, ManySectionsPutTheTableAfterTheLastSection) {
  std::string out = path("many.helmpkg");
  PackageWriter w(out);
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  for (int i = 0; i < 99; ++i)
    w.addSection(SectionKind::CpuCode, "code_" + std::to_string(i), tensor(size_t(i * 10), unsigned(i)));
  ASSERT_FALSE(w.finish());
  auto pkg = Package::open(out);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ((*pkg)->sections().size(), 100u);
  std::vector<char> raw = readFile(out);
  uint64_t tableOffset = llvm::support::endian::read64le(raw.data() + 24);
  EXPECT_EQ(tableOffset + 100 * 64, raw.size());
  EXPECT_EQ(tableOffset % 64, 0u);
  EXPECT_EQ((*pkg)->find(SectionKind::CpuCode, "code_42")->size, 420u);
  // A cut now hits the table first.
  raw.resize(raw.size() - 1);
  std::string err = errorOf(Package::fromBuffer(raw, "many.helmpkg", Verify::All));
  EXPECT_NE(err.find("truncated (section table ends at"), std::string::npos) << err;
}

TEST_F(PackageTest, ExactlyTheFirstPageLimit) {
  for (int extra : {62, 63}) { // 63 and 64 sections
    std::string out = path("limit.helmpkg");
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    for (int i = 0; i < extra; ++i)
      w.addSection(SectionKind::CpuCode, std::string("c").append(std::to_string(i)), bytesOf("x"));
    ASSERT_FALSE(w.finish());
    std::vector<char> raw = readFile(out);
    uint64_t tableOffset = llvm::support::endian::read64le(raw.data() + 24);
    EXPECT_EQ(tableOffset == 64, extra + 1 <= 63) << extra;
    EXPECT_TRUE(!!Package::fromBuffer(raw, "x", Verify::All));
  }
}

TEST_F(PackageTest, ProgressCallback) {
  std::string out = path("p.helmpkg");
  std::vector<uint64_t> seen;
  PackageWriter w(out);
  w.setProgressCallback([&](uint64_t n) { seen.push_back(n); });
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  std::vector<char> big(size_t(70) << 20, 1);
  w.beginSection(SectionKind::CpuWeights, "w");
  w.append(big);
  w.endSection();
  ASSERT_FALSE(w.finish());
  ASSERT_GE(seen.size(), 2u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), stdfs::file_size(out));
}

// Anonymous memory (heap) of this process in KiB, from /proc/self/status; -1 if unavailable.
long rssAnonKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0)
      return std::stol(line.substr(8));
  return -1;
}

TEST_F(PackageTest, StreamsFromAFileMappingWithoutCopying) {
  // 256 MiB of weights from a mapped (sparse) file: the writer's own memory must not grow with it.
  std::string src = path("weights.bin");
  const uint64_t size = uint64_t(256) << 20;
  writeFile(src, {});
  ASSERT_EQ(::truncate(src.c_str(), off_t(size)), 0);
  std::error_code ec;
  int fd = -1;
  ASSERT_FALSE(llvm::sys::fs::openFileForRead(src, fd));
  llvm::sys::fs::mapped_file_region map(fd, llvm::sys::fs::mapped_file_region::readonly, size, 0, ec);
  ::close(fd);
  ASSERT_FALSE(ec);
  long before = rssAnonKiB();
  if (before < 0)
    GTEST_SKIP() << "no /proc/self/status";
  std::string out = path("big.helmpkg");
  PackageWriter w(out);
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  w.beginSection(SectionKind::CpuWeights, "cpu_weights");
  EXPECT_EQ(w.append(llvm::ArrayRef<char>(map.const_data(), size / 2)), 0u);
  EXPECT_EQ(w.append(llvm::ArrayRef<char>(map.const_data() + 1, size / 2 - 1)), size / 2);
  w.endSection();
  ASSERT_FALSE(w.finish());
  long growth = rssAnonKiB() - before;
  EXPECT_LT(growth, 32 * 1024) << "anonymous memory grew by " << growth << " KiB";
  auto pkg = Package::open(out, Verify::HeaderOnly);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ((*pkg)->find(SectionKind::CpuWeights)->size, size - 1);
  EXPECT_FALSE((*pkg)->verifySection(*(*pkg)->find(SectionKind::CpuWeights)));
}

// --- 2 MiB pages -----------------------------------------------------------------------------

// Whether this kernel and file system map a file with 2 MiB pages at all: a 4 MiB file written in one
// call, mapped at a 2 MiB boundary with MADV_HUGEPAGE and read, then its FilePmdMapped in smaps.
// Independent of the package code (its own write, its own mmap, its own smaps reading).
uint64_t probeFileHugePages(const std::string &file) {
  const size_t size = size_t(4) << 20, huge = size_t(2) << 20;
  {
    std::vector<char> bytes(size, 'x');
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0)
    return 0;
  char *area = static_cast<char *>(::mmap(nullptr, size + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  char *at = reinterpret_cast<char *>((uintptr_t(area) + huge - 1) & ~uintptr_t(huge - 1));
  char *mapped = static_cast<char *>(::mmap(at, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0));
  ::close(fd);
  uint64_t pmd = 0;
  if (mapped != MAP_FAILED) {
    ::madvise(mapped, size, MADV_HUGEPAGE);
    volatile char sum = 0;
    for (size_t i = 0; i < size; i += 4096)
      sum = char(sum + mapped[i]);
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
      unsigned long long from = 0, to = 0;
      if (std::sscanf(line.c_str(), "%llx-%llx ", &from, &to) == 2 && line.find(' ') > line.find('-')) {
        inside = from <= uintptr_t(mapped) && uintptr_t(mapped) < to;
        continue;
      }
      unsigned long long kib = 0;
      if (inside && std::sscanf(line.c_str(), "FilePmdMapped: %llu kB", &kib) == 1)
        pmd += uint64_t(kib) << 10;
    }
  }
  ::munmap(area, size + huge);
  return pmd;
}

TEST_F(PackageTest, WeightsPastTwoMiBRoundTripThroughTheStagedWrites) {
  // Pieces of odd sizes that cross several 2 MiB boundaries of the file, one larger than a piece:
  // every byte must land where append() said (the section checksums, computed from the caller's
  // bytes, are verified against the file too).
  std::string out = path("staged.helmpkg");
  std::vector<std::vector<char>> data;
  std::vector<uint64_t> offsets;
  {
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    w.beginSection(SectionKind::CpuWeights, "cpu_weights");
    for (size_t n : {size_t(1) << 20, size_t(3000001), size_t(77), size_t(5) << 20, size_t(2) << 20}) {
      data.push_back(tensor(n, unsigned(data.size() + 3)));
      offsets.push_back(w.append(data.back()));
    }
    w.endSection();
    w.addSection(SectionKind::Tokenizer, "tokenizer", bytesOf("{}"));
    ASSERT_FALSE(w.finish());
  }
  auto pkg = Package::open(out, Verify::All);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  const Package::Section *weights = (*pkg)->find(SectionKind::CpuWeights);
  ASSERT_TRUE(weights);
  for (size_t i = 0; i < data.size(); ++i)
    EXPECT_EQ(0, std::memcmp(weights->bytes.data() + offsets[i], data[i].data(), data[i].size())) << i;
  EXPECT_EQ((*pkg)->find(SectionKind::Tokenizer)->bytes.size(), 2u);
}

TEST_F(PackageTest, MappedOnTwoMiBBoundaryWithTwoMiBPagesWhereTheKernelHasThem) {
  std::string out = path("huge.helmpkg");
  {
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    w.beginSection(SectionKind::CpuWeights, "cpu_weights");
    w.append(tensor(size_t(9) << 20, 5));
    w.endSection();
    ASSERT_FALSE(w.finish());
  }
  auto pkg = Package::open(out, Verify::All); // reads every byte
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*pkg)->bytes().data()) % kHugePageBytes, 0u);

  uint64_t probe = probeFileHugePages(path("probe.bin"));
  if (probe == 0)
    GTEST_SKIP() << "this kernel or file system maps no file with 2 MiB pages (the probe got none)";
  // [2 MiB, 8 MiB) of the file lies inside the weights and was written in whole aligned pieces;
  // at least one of the three gets a 2 MiB folio even where memory is too fragmented for all.
  EXPECT_GE((*pkg)->hugePageBytes(), kHugePageBytes);

  // The same bytes written 64 KiB at a time sit in small folios: fewer 2 MiB pages (the
  // difference is the writer's doing, not the reader's).
  std::string copy = path("copy.helmpkg");
  {
    std::vector<char> raw = readFile(out);
    int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    for (size_t at = 0; at < raw.size(); at += 65536)
      ASSERT_GT(::write(fd, raw.data() + at, std::min<size_t>(65536, raw.size() - at)), 0);
    ::close(fd);
  }
  auto small = Package::open(copy, Verify::All);
  ASSERT_TRUE(!!small) << llvm::toString(small.takeError());
  EXPECT_LT((*small)->hugePageBytes(), (*pkg)->hugePageBytes());
}

TEST_F(PackageTest, BufferPackagesReportNoHugePages) {
  std::string out = path("m.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  auto pkg = Package::fromBuffer(raw, "buf.helmpkg", Verify::All);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ((*pkg)->hugePageBytes(), 0u);
}

// --- seeds written by the independent Python implementation ---------------------------------

TEST(PackageSeeds, PythonWrittenPackagesOpen) {
  int count = 0;
  for (const auto &e : stdfs::directory_iterator(HELM_PACKAGE_SEED_DIR)) {
    std::string name = e.path().filename().string();
    if (name.rfind("valid-", 0) != 0)
      continue;
    ++count;
    auto pkg = Package::open(e.path().string(), Verify::All);
    ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
    EXPECT_TRUE((*pkg)->find(SectionKind::Manifest));
  }
  EXPECT_GE(count, 4);
}

// The C++ writer, given the sections of a Python-written seed, writes the same bytes.
TEST_F(PackageTest, CppWriterReproducesPythonSeedsByteForByte) {
  int count = 0;
  for (const auto &e : stdfs::directory_iterator(HELM_PACKAGE_SEED_DIR)) {
    if (e.path().filename().string().rfind("valid-", 0) != 0)
      continue;
    ++count;
    std::vector<char> seed = readFile(e.path().string());
    auto pkg = Package::fromBuffer(seed, e.path().string(), Verify::All);
    ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
    std::string out = path("copy.helmpkg");
    PackageWriter w(out);
    for (const auto &s : (*pkg)->sections())
      w.addSection(s.kind, s.name, s.bytes);
    ASSERT_FALSE(w.finish());
    EXPECT_TRUE(readFile(out) == seed) << e.path();
  }
  EXPECT_GE(count, 4);
}

// --- truncation and corruption -------------------------------------------------------------

// The section a cut at `size` bytes must name: the first one, in file order, ending past the cut.
std::string sectionCutBy(const Package &p, uint64_t size) {
  std::vector<const Package::Section *> order;
  for (const auto &s : p.sections())
    order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](auto *a, auto *b) { return a->offset < b->offset; });
  for (auto *s : order)
    if (s->offset + s->size > size)
      return s->name;
  return "";
}

TEST_F(PackageTest, TruncationAtEveryPointIsANamedError) {
  std::string out = path("t.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  auto full = Package::fromBuffer(raw, "t.helmpkg", Verify::All);
  ASSERT_TRUE(!!full);
  for (size_t cut = 0; cut < raw.size(); ++cut) {
    std::vector<char> part(raw.begin(), raw.begin() + cut); // exact size: ASan sees any overread
    for (Verify v : {Verify::All, Verify::HeaderOnly}) {
      std::string err = errorOf(Package::fromBuffer(part, "t.helmpkg", v));
      ASSERT_TRUE(oneLine(err)) << "cut " << cut << ": '" << err << "'";
      ASSERT_EQ(err.rfind("t.helmpkg: ", 0), 0u) << err;
      if (cut >= kSectionAlignment) {
        std::string name = sectionCutBy(**full, cut);
        ASSERT_FALSE(name.empty()) << cut;
        ASSERT_NE(err.find("truncated (section '" + name + "' ends at "), std::string::npos)
            << "cut " << cut << ": " << err;
      } else if (cut < 8) {
        ASSERT_NE(err.find("not a HELM package"), std::string::npos) << err;
      } else {
        ASSERT_NE(err.find("truncated"), std::string::npos) << "cut " << cut << ": " << err;
      }
    }
  }
}

TEST_F(PackageTest, TruncatedFileOnDisk) {
  std::string out = path("t.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  raw.resize(9000); // inside cpu_weights (8192 .. 17600)
  writeFile(out, raw);
  std::string err = errorOf(Package::open(out));
  EXPECT_EQ(err, out + ": truncated (section 'cpu_weights' ends at 17600, file has 9000 bytes)");
}

TEST_F(PackageTest, EverySingleBitFlipIsDetectedAndNamed) {
  std::string out = path("f.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  auto full = Package::fromBuffer(raw, "f.helmpkg", Verify::All);
  ASSERT_TRUE(!!full);
  std::vector<Package::Section> sections((*full)->sections().begin(), (*full)->sections().end());
  for (size_t at = 0; at < raw.size(); ++at) {
    std::vector<char> bad = raw;
    // Every bit of the first page (header, table, padding); one bit per byte elsewhere.
    for (int bit = 0; bit < 8; ++bit) {
      if (at >= kSectionAlignment && bit != int(at % 8))
        continue;
      bad[at] = char(raw[at] ^ (1 << bit));
      std::string err = errorOf(Package::fromBuffer(bad, "f.helmpkg", Verify::All));
      bad[at] = raw[at];
      ASSERT_TRUE(oneLine(err)) << "byte " << at << " bit " << bit << " not detected";
      const Package::Section *in = nullptr;
      for (const auto &s : sections)
        if (at >= s.offset && at < s.offset + s.size)
          in = &s;
      if (in) {
        ASSERT_EQ(err, "f.helmpkg: checksum mismatch in section '" + in->name + "' (kind " +
                           sectionKindLabel(uint32_t(in->kind)) + ")")
            << at;
      } else if (at >= kSectionAlignment) {
        ASSERT_NE(err.find("corrupt padding (nonzero byte at offset " + std::to_string(at)), std::string::npos)
            << err;
      }
    }
  }
}

TEST_F(PackageTest, HeaderOnlyDefersSectionChecksums) {
  std::string out = path("h.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  raw[8192 + 300] ^= 0x10; // inside cpu_weights
  auto pkg = Package::fromBuffer(raw, "h.helmpkg", Verify::HeaderOnly);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  const Package::Section *w = (*pkg)->find(SectionKind::CpuWeights);
  EXPECT_EQ(errorOf((*pkg)->verifySection(*w)),
            "h.helmpkg: checksum mismatch in section 'cpu_weights' (kind cpu-weights)");
  EXPECT_FALSE((*pkg)->verifySection(*(*pkg)->find(SectionKind::Tokenizer)));
  EXPECT_TRUE(oneLine(errorOf((*pkg)->verifyAll())));
  // The manifest is verified even in HeaderOnly mode.
  raw[8192 + 300] ^= 0x10;
  raw[4096 + 2] ^= 0x01;
  EXPECT_EQ(errorOf(Package::fromBuffer(raw, "h.helmpkg", Verify::HeaderOnly)),
            "h.helmpkg: checksum mismatch in section 'manifest' (kind manifest)");
}

TEST_F(PackageTest, NotAPackage) {
  EXPECT_EQ(errorOf(Package::fromBuffer({}, "e.bin", Verify::All)),
            "e.bin: not a HELM package (file too small: 0 bytes)");
  std::string onnx = "\x08\x07\x12\x07pytorch\x1a\x03" "2.5" + std::string(200, 'z');
  EXPECT_EQ(errorOf(Package::fromBuffer(bytesOf(onnx), "model.onnx", Verify::All)),
            "model.onnx: not a HELM package (bad magic)");
  std::string text = path("notes.txt");
  writeFile(text, bytesOf("hello, this is text and not a package\n"));
  EXPECT_EQ(errorOf(Package::open(text)), text + ": not a HELM package (bad magic)");
  std::string empty = path("empty.helmpkg");
  writeFile(empty, {});
  EXPECT_EQ(errorOf(Package::open(empty)), empty + ": not a HELM package (file too small: 0 bytes)");
  std::string missing = path("missing.helmpkg");
  std::string err = errorOf(Package::open(missing));
  EXPECT_EQ(err.rfind(missing + ": cannot open (", 0), 0u) << err;
  EXPECT_TRUE(oneLine(err));
  EXPECT_EQ(errorOf(Package::open(dir)), dir + ": not a HELM package (not a regular file)");
}

TEST_F(PackageTest, OtherFormatVersion) {
  std::string out = path("v.helmpkg");
  writeSample(out);
  std::vector<char> raw = readFile(out);
  llvm::support::endian::write32le(raw.data() + 8, 2);
  writeFile(out, raw);
  EXPECT_EQ(errorOf(Package::open(out)), out + ": format version 2, this runtime reads version 1");
  llvm::support::endian::write32le(raw.data() + 8, 0);
  EXPECT_EQ(errorOf(Package::fromBuffer(raw, "v", Verify::All)), "v: format version 0, this runtime reads version 1");
}

// Re-seals a hand-edited header/table so that the structural checks behind the checksums run.
void reseal(std::vector<char> &raw) {
  uint32_t count = llvm::support::endian::read32le(raw.data() + 16);
  uint64_t table = llvm::support::endian::read64le(raw.data() + 24);
  if (table <= raw.size() && uint64_t(count) * 64 <= raw.size() - table) // else only the header
    llvm::support::endian::write64le(raw.data() + 48, checksum64(raw.data() + table, size_t(count) * 64));
  llvm::support::endian::write64le(raw.data() + 56, checksum64(raw.data(), 56));
}

TEST_F(PackageTest, ResealedStructuralCorruption) {
  std::string out = path("s.helmpkg");
  writeSample(out);
  const std::vector<char> raw = readFile(out);
  auto edit = [&](auto fn) {
    std::vector<char> b = raw;
    fn(b);
    reseal(b);
    return errorOf(Package::fromBuffer(b, "s", Verify::All));
  };
  using llvm::support::endian::write32le;
  using llvm::support::endian::write64le;
  // Entry i starts at 64 + 64 i; fields: kind +0, name +8, offset +40, size +48.
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 64 + 64 + 40, 8192 + 64); }),
            "s: section 'cpu_weights' offset 8256 is not a multiple of 4096");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 64 + 64 + 40, 4096); }),
            "s: section 'cpu_weights' overlaps section 'manifest'");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 64 + 64, 1); }),
            "s: two manifest sections ('manifest' and 'cpu_weights')");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 64, 2); }), "s: no manifest section");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 64, 0); }),
            "s: corrupt section table (section 'manifest' has kind 0)");
  EXPECT_EQ(edit([](auto &b) { std::memset(b.data() + 64 + 64 + 8, 0, 32); std::memcpy(b.data() + 64 + 64 + 8, "tokenizer", 9); write32le(b.data() + 128, 6); }),
            "s: duplicate section 'tokenizer' (kind tokenizer)");
  EXPECT_EQ(edit([](auto &b) { b[64 + 8 + 20] = 'x'; }),
            "s: corrupt section table (section #0 has an invalid name 'manifest')");
  EXPECT_EQ(edit([](auto &b) { b[64 + 8] = '\n'; }),
            "s: corrupt section table (section #0 has an invalid name '\\x0aanifest')");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 64 + 40, 0); }),
            "s: section 'manifest' starts at offset 0, inside the header page");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 64 + 64 + 48, ~uint64_t(0) - 100); }),
            "s: section 'cpu_weights' size 18446744073709551515 overflows 64-bit offsets");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 16, 100000); }),
            "s: corrupt header (100000 sections, at most 65536)");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 16, 4000); }),
            "s: truncated (section table ends at 256064, file has " + std::to_string(raw.size()) + " bytes)");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 12, 128); }), "s: corrupt header (header size 128, expected 64)");
  EXPECT_EQ(edit([](auto &b) { write32le(b.data() + 20, 32); }),
            "s: corrupt header (section entry size 32, expected 64)");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 24, 60); }), "s: corrupt header (section table at offset 60)");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 24, ~uint64_t(0) - 7); }),
            "s: corrupt header (section table at offset 18446744073709551608)");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 32, b.size() + 1); }),
            "s: truncated (header says " + std::to_string(raw.size() + 1) + " bytes, file has " +
                std::to_string(raw.size()) + " bytes)");
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 32, b.size() - 1); }),
            "s: trailing data (header says " + std::to_string(raw.size() - 1) + " bytes, file has " +
                std::to_string(raw.size()) + " bytes)");
  EXPECT_EQ(edit([](auto &b) { b[2000] = 1; }), "s: corrupt padding (nonzero byte at offset 2000, before section 'manifest')");
  // Flags are reserved and ignored.
  EXPECT_EQ(edit([](auto &b) { write64le(b.data() + 40, 5); write32le(b.data() + 64 + 4, 9); }), "");
  // A table that overlaps a section: point it into cpu_weights (sealed over those bytes).
  {
    std::vector<char> b = raw;
    std::vector<char> table(b.begin() + 64, b.begin() + 64 + 5 * 64);
    std::memcpy(b.data() + 8192, table.data(), table.size());
    write64le(b.data() + 24, 8192);
    reseal(b);
    EXPECT_EQ(errorOf(Package::fromBuffer(b, "s", Verify::HeaderOnly)), "s: section table overlaps section 'cpu_weights'");
  }
}

// Header and entry for hand-built packages and synthetic tables.
FileHeader syntheticHeader(uint32_t count, uint64_t fileSize) {
  FileHeader h;
  std::memcpy(h.magic, kMagic, 8);
  h.version = 1;
  h.headerSize = 64;
  h.sectionCount = count;
  h.sectionEntrySize = 64;
  h.sectionTableOffset = 64;
  h.fileSize = fileSize;
  return h;
}

SectionEntry entry(SectionKind kind, const char *name, uint64_t offset, uint64_t size) {
  SectionEntry e;
  e.kind = uint32_t(kind);
  std::strncpy(e.name, name, kSectionNameSize - 1);
  e.offset = offset;
  e.size = size;
  return e;
}

// Packages with an arbitrary manifest, built by hand (the writer refuses bad manifests).
std::vector<char> packageWithManifest(llvm::StringRef manifest) {
  std::vector<char> b(4096 + manifest.size(), 0);
  std::memcpy(b.data() + 4096, manifest.data(), manifest.size());
  SectionEntry e = entry(SectionKind::Manifest, "manifest", 4096, manifest.size());
  e.checksum = checksum64(manifest.data(), manifest.size());
  encodeEntry(e, b.data() + 64);
  FileHeader h = syntheticHeader(1, b.size());
  h.tableChecksum = checksum64(b.data() + 64, 64);
  encodeHeader(h, b.data());
  return b;
}

TEST(PackageManifest, MustBeAJsonObject) {
  auto check = [](llvm::StringRef m) {
    std::vector<char> b = packageWithManifest(m);
    return errorOf(Package::fromBuffer(b, "m", Verify::HeaderOnly));
  };
  EXPECT_EQ(check(R"({"a":[1,2,{"b":null}]})"), "");
  EXPECT_EQ(check("[1,2]"), "m: manifest is not a JSON object");
  EXPECT_EQ(check("\"s\""), "m: manifest is not a JSON object");
  EXPECT_EQ(check("{\"a\":\"\xff\"}"), "m: manifest is not valid UTF-8 (byte 6)");
  std::string err = check("{\"a\":");
  EXPECT_EQ(err.rfind("m: manifest is not valid JSON (", 0), 0u) << err;
  EXPECT_TRUE(oneLine(err));
  EXPECT_EQ(check("").rfind("m: manifest is not valid JSON (", 0), 0u);
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(check("{\"a\":" + deep + "}"), "m: manifest nests deeper than 256 levels");
  std::string ok = "{\"a\":" + std::string(200, '[') + std::string(200, ']') + ",\"s\":\"[[[[\\\"[[\"}";
  EXPECT_EQ(check(ok), "");
}

// --- layout arithmetic for multi-GB files (no big files needed) ------------------------------

TEST(PackageLayout, OffsetsBeyondFourGiB) {
  uint64_t gpuOff = 4096 * 2, gpuSize = 5 * GiB + 123;
  uint64_t cpuOff = alignUp(gpuOff + gpuSize, 4096), cpuSize = 9 * GiB;
  uint64_t end = cpuOff + cpuSize;
  std::vector<SectionEntry> t = {entry(SectionKind::Manifest, "manifest", 4096, 100),
                                 entry(SectionKind::GpuWeights, "gpu_weights", gpuOff, gpuSize),
                                 entry(SectionKind::CpuWeights, "cpu_weights", cpuOff, cpuSize)};
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end), t, end, "big")), "");
  EXPECT_GT(cpuOff, uint64_t(UINT32_MAX));
  // Truncated by one byte: names the last section with its full 64-bit end.
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end), t, end - 1, "big")),
            "big: truncated (section 'cpu_weights' ends at " + std::to_string(end) + ", file has " +
                std::to_string(end - 1) + " bytes)");
  // A cut inside the first big section names it, not the later one.
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end), t, 3 * GiB, "big")),
            "big: truncated (section 'gpu_weights' ends at " + std::to_string(gpuOff + gpuSize) +
                ", file has 3221225472 bytes)");
  // Overlap only visible in 64-bit arithmetic (32-bit truncation would hide it).
  auto overlap = t;
  overlap[2].offset = gpuOff + 4 * GiB; // inside gpu_weights
  overlap[2].size = 1;
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end), overlap, end, "big")),
            "big: section 'cpu_weights' overlaps section 'gpu_weights'");
  // Offset that equals 4 GiB + 4096: aligned and valid; 4 GiB + 64: not.
  auto odd = t;
  odd[2].offset = 4 * GiB * 4 + 64;
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end), odd, end, "big")),
            "big: section 'cpu_weights' offset 17179869248 is not a multiple of 4096");
  // End that wraps around 2^64.
  auto wrap = t;
  wrap[2].offset = ~uint64_t(4095);
  wrap[2].size = 4096;
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end), wrap, end, "big")),
            "big: section 'cpu_weights' size 4096 overflows 64-bit offsets");
  // Header file size bigger than 4 GiB but different from the real one.
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(3, end + 4096), t, end, "big")),
            "big: truncated (header says " + std::to_string(end + 4096) + " bytes, file has " +
                std::to_string(end) + " bytes)");
  // Table at the end of a multi-GB file.
  FileHeader h = syntheticHeader(3, end + 192);
  h.sectionTableOffset = end;
  EXPECT_EQ(errorOf(validateLayout(h, t, end + 192, "big")), "");
  EXPECT_EQ(errorOf(validateLayout(h, t, end + 191, "big")),
            "big: truncated (section table ends at " + std::to_string(end + 192) + ", file has " +
                std::to_string(end + 191) + " bytes)");
  h.sectionTableOffset = cpuOff + 64; // inside cpu_weights
  EXPECT_EQ(errorOf(validateLayout(h, t, end + 192, "big")), "big: section table overlaps section 'cpu_weights'");
}

TEST(PackageLayout, EmptySectionsOccupyNothing) {
  std::vector<SectionEntry> t = {entry(SectionKind::Manifest, "manifest", 4096, 2),
                                 entry(SectionKind::CpuCode, "a", 8192, 0),
                                 entry(SectionKind::CpuCode, "b", 8192, 0),
                                 entry(SectionKind::CpuCode, "c", 4096, 0)};
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(4, 8192), t, 8192, "e")), "");
  t[1].offset = 12288; // empty, but starts past the end of the file
  EXPECT_EQ(errorOf(validateLayout(syntheticHeader(4, 8192), t, 8192, "e")),
            "e: truncated (section 'a' ends at 12288, file has 8192 bytes)");
}

// A real sparse file over 4 GiB: the manifest lives past the 4 GiB mark.
TEST_F(PackageTest, SparseFileBeyondFourGiB) {
  std::string out = path("sparse.helmpkg");
  const std::string manifest = R"({"tensors":[{"name":"w","offset":0}]})";
  uint64_t weightsOff = 4096, weightsSize = 4 * GiB + 1000;
  uint64_t manifestOff = alignUp(weightsOff + weightsSize, 4096);
  uint64_t fileSize = manifestOff + manifest.size();
  std::vector<char> page(4096, 0);
  SectionEntry w = entry(SectionKind::GpuWeights, "gpu_weights", weightsOff, weightsSize);
  w.checksum = 0x1234; // not verified in HeaderOnly mode
  SectionEntry m = entry(SectionKind::Manifest, "manifest", manifestOff, manifest.size());
  m.checksum = checksum64(manifest.data(), manifest.size());
  encodeEntry(w, page.data() + 64);
  encodeEntry(m, page.data() + 128);
  FileHeader h = syntheticHeader(2, fileSize);
  h.tableChecksum = checksum64(page.data() + 64, 128);
  encodeHeader(h, page.data());
  {
    std::ofstream f(out, std::ios::binary);
    f.write(page.data(), 4096);
  }
  if (::truncate(out.c_str(), off_t(fileSize)) != 0)
    GTEST_SKIP() << "cannot create a sparse file here";
  {
    std::fstream f(out, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(std::streamoff(manifestOff));
    f.write(manifest.data(), std::streamsize(manifest.size()));
  }
  ASSERT_EQ(stdfs::file_size(out), fileSize);
  auto pkg = Package::open(out, Verify::HeaderOnly);
  ASSERT_TRUE(!!pkg) << llvm::toString(pkg.takeError());
  EXPECT_EQ((*pkg)->manifest(), manifest);
  EXPECT_EQ((*pkg)->find(SectionKind::Manifest)->offset, manifestOff);
  EXPECT_EQ((*pkg)->find(SectionKind::GpuWeights)->bytes.size(), weightsSize);
  EXPECT_GT(manifestOff, uint64_t(UINT32_MAX));
}

// --- atomic writes -------------------------------------------------------------------------

TEST_F(PackageTest, FailedWriteLeavesNothing) {
  std::string out = path("out.helmpkg");
  {
    PackageWriter w(out);
    w.beginSection(SectionKind::CpuWeights, "w");
    w.append(tensor(10000, 1));
    w.endSection();
    EXPECT_FALSE(w.tempPath().empty());
    EXPECT_TRUE(stdfs::exists(w.tempPath()));
    EXPECT_EQ(errorOf(w.finish()), out + ": no manifest section");
    EXPECT_TRUE(w.tempPath().empty());
  }
  EXPECT_TRUE(dirEntries().empty());
}

TEST_F(PackageTest, FailedWriteKeepsTheExistingOutput) {
  std::string out = path("out.helmpkg");
  writeSample(out);
  std::vector<char> before = readFile(out);
  PackageWriter w(out);
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("[\"not an object\"]"));
  EXPECT_EQ(errorOf(w.finish()), out + ": manifest is not a JSON object");
  EXPECT_EQ(readFile(out), before);
  EXPECT_EQ(dirEntries(), std::vector<std::string>{"out.helmpkg"});
  // A successful write replaces it.
  PackageWriter w2(out);
  w2.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  ASSERT_FALSE(w2.finish());
  EXPECT_NE(readFile(out), before);
  EXPECT_EQ(dirEntries(), std::vector<std::string>{"out.helmpkg"});
  EXPECT_EQ(errorOf(w2.finish()), out + ": finish() called after success");
}

TEST_F(PackageTest, IoErrorMidStream) {
  // RLIMIT_FSIZE turns writes past 1 MiB into EFBIG (SIGXFSZ ignored): a real mid-stream I/O error.
  std::string out = path("out.helmpkg");
  writeFile(out, bytesOf("previous contents"));
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string err;
  {
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    w.beginSection(SectionKind::CpuWeights, "w");
    std::vector<char> big(3 << 20, 7);
    w.append(big);
    w.append(big); // after the error: ignored
    w.endSection();
    err = errorOf(w.finish());
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(err, out + ": cannot write (File too large)");
  EXPECT_EQ(readFile(out), bytesOf("previous contents"));
  EXPECT_EQ(dirEntries(), std::vector<std::string>{"out.helmpkg"});
}

TEST_F(PackageTest, DestructorRemovesTheTemporaryFile) {
  std::string out = path("out.helmpkg");
  std::string temp;
  {
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    w.beginSection(SectionKind::CpuWeights, "w");
    w.append(tensor(50000, 2));
    temp = w.tempPath();
    EXPECT_EQ(temp.rfind(out + ".tmp-", 0), 0u) << temp;
    EXPECT_TRUE(stdfs::exists(temp));
  } // no finish()
  EXPECT_FALSE(stdfs::exists(temp));
  EXPECT_TRUE(dirEntries().empty());
}

TEST_F(PackageTest, MissingDirectory) {
  std::string out = path("no/such/dir/out.helmpkg");
  PackageWriter w(out);
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  std::string err = errorOf(w.finish());
  EXPECT_EQ(err.rfind(out + ": cannot create a temporary file next to it (", 0), 0u) << err;
  EXPECT_TRUE(oneLine(err));
  EXPECT_TRUE(dirEntries().empty());
}

TEST_F(PackageTest, WriterMisuseIsAnErrorNotACrash) {
  struct Case {
    const char *want;
    std::function<void(PackageWriter &)> steps;
  };
  std::vector<Case> cases = {
      {"append() outside a section", [](PackageWriter &w) { w.append(bytesOf("x")); }},
      {"endSection() outside a section", [](PackageWriter &w) { w.endSection(); }},
      {"beginSection('b') while section 'a' is open",
       [](PackageWriter &w) { w.beginSection(SectionKind::CpuCode, "a"); w.beginSection(SectionKind::CpuCode, "b"); }},
      {"section 'a' was not ended", [](PackageWriter &w) { w.beginSection(SectionKind::CpuCode, "a"); }},
      {"duplicate section 'a' (kind cpu-code)",
       [](PackageWriter &w) { w.addSection(SectionKind::CpuCode, "a", {}); w.addSection(SectionKind::CpuCode, "a", {}); }},
      {"second manifest section 'm2'", [](PackageWriter &w) { w.addSection(SectionKind::Manifest, "m2", bytesOf("{}")); }},
      {"invalid section name '' (1 to 31 printable ASCII characters)",
       [](PackageWriter &w) { w.addSection(SectionKind::CpuCode, "", {}); }},
      {"invalid section name 'has space' (1 to 31 printable ASCII characters)",
       [](PackageWriter &w) { w.addSection(SectionKind::CpuCode, "has space", {}); }},
      {"invalid section name '0123456789012345678901234567890x' (1 to 31 printable ASCII characters)",
       [](PackageWriter &w) { w.addSection(SectionKind::CpuCode, "0123456789012345678901234567890x", {}); }},
      {"section 'z' has kind 0 (reserved)",
       [](PackageWriter &w) { w.addSection(static_cast<SectionKind>(0), "z", {}); }},
  };
  for (const Case &c : cases) {
    std::string out = path("m.helmpkg");
    PackageWriter w(out);
    w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
    c.steps(w);
    EXPECT_EQ(errorOf(w.finish()), out + ": " + c.want);
    EXPECT_TRUE(dirEntries().empty()) << c.want;
  }
  // Two sections of different kinds may share a name.
  PackageWriter w(path("ok.helmpkg"));
  w.addSection(SectionKind::Manifest, "manifest", bytesOf("{}"));
  w.addSection(SectionKind::CpuCode, "blob", {});
  w.addSection(SectionKind::GpuCode, "blob", {});
  w.addSection(SectionKind::CpuCode, "0123456789012345678901234567890", {}); // 31 bytes: the longest
  EXPECT_FALSE(w.finish());
}

TEST(PackageFormatNames, KindNames) {
  EXPECT_EQ(sectionKindName(SectionKind::Manifest), "manifest");
  EXPECT_EQ(sectionKindName(SectionKind::CpuWeights), "cpu-weights");
  EXPECT_EQ(sectionKindName(SectionKind::GpuWeights), "gpu-weights");
  EXPECT_EQ(sectionKindName(SectionKind::CpuCode), "cpu-code");
  EXPECT_EQ(sectionKindName(SectionKind::GpuCode), "gpu-code");
  EXPECT_EQ(sectionKindName(SectionKind::Tokenizer), "tokenizer");
  EXPECT_EQ(sectionKindName(static_cast<SectionKind>(42)), "unknown");
  EXPECT_EQ(sectionKindLabel(42), "42");
  EXPECT_EQ(sectionKindLabel(2), "cpu-weights");
}

} // namespace
