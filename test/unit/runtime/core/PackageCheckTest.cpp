//===- PackageCheckTest.cpp - reading a stage's symbols without loading it ----------===//
#include "runtime/core/PackageCheck.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

using namespace helm::rt;

namespace {

TEST(PackageCheck, BytesThatAreNoSharedObjectAreRefused) {
  std::string junk(4096, 'x');
  auto symbols = readStageSymbols(llvm::ArrayRef<char>(junk.data(), junk.size()), "entry");
  ASSERT_FALSE(symbols);
  EXPECT_NE(llvm::toString(symbols.takeError()).find("not a shared object"), std::string::npos);
}

// A real shared object from disk (the C library this test runs with): a defined function is an
// entry point; it has no `<entry>_abi` record; a name it does not define is no entry point.
TEST(PackageCheck, ReadsDynamicSymbolsOfASharedObject) {
  void *address = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info where{};
  ASSERT_TRUE(address && dladdr(address, &where) && where.dli_fname);
  auto file = llvm::MemoryBuffer::getFile(where.dli_fname);
  ASSERT_TRUE(bool(file)) << where.dli_fname;
  llvm::ArrayRef<char> bytes((*file)->getBufferStart(), (*file)->getBufferSize());
  auto malloc = readStageSymbols(bytes, "malloc");
  ASSERT_TRUE(bool(malloc)) << llvm::toString(malloc.takeError());
  EXPECT_TRUE(malloc->hasEntry);
  EXPECT_FALSE(malloc->abi);
  auto absent = readStageSymbols(bytes, "helm_no_such_stage");
  ASSERT_TRUE(bool(absent)) << llvm::toString(absent.takeError());
  EXPECT_FALSE(absent->hasEntry);
  EXPECT_FALSE(absent->abi);
}

} // namespace
