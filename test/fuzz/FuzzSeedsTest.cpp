// Every committed fuzz input (the seed corpora, which hold the corpus models whole, and the
// regression inputs of past findings) runs through its fuzz target's body as a ctest. Built in the
// ASan+UBSan tree too, so undefined behaviour on a seed fails CI even when the fuzzer itself is
// given a max_len that would cut the seed short.
#include "test/fuzz/FuzzTargets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using Target = void (*)(const uint8_t *, size_t);

std::vector<fs::path> inputsIn(const fs::path &dir) {
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.')
        files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

void runAll(const std::vector<fs::path> &dirs, Target target, size_t minimumInputs) {
  size_t ran = 0;
  for (const fs::path &dir : dirs)
    for (const fs::path &file : inputsIn(dir)) {
      SCOPED_TRACE(file.string());
      std::ifstream in(file, std::ios::binary);
      ASSERT_TRUE(in) << "cannot open " << file;
      // Exact-size heap copy, as libFuzzer hands inputs over: ASan sees any read past the end.
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      target(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
      ++ran;
    }
  EXPECT_GE(ran, minimumInputs) << "fuzz corpus folders missing or emptied";
}

const fs::path kFuzzDir = HELM_FUZZ_DIR;

TEST(FuzzSeeds, ImporterCorpusAndRegressions) {
  runAll({kFuzzDir / "corpus", kFuzzDir / "regressions" / "importer"}, helm::fuzz::importerInput, 20);
}

TEST(FuzzSeeds, PackageCorpusAndRegressions) {
  runAll({kFuzzDir / "package-corpus", kFuzzDir / "regressions" / "package"}, helm::fuzz::packageInput, 4);
}

TEST(FuzzSeeds, GgufCorpusAndRegressions) {
  runAll({kFuzzDir / "gguf-corpus", kFuzzDir / "regressions" / "gguf"}, helm::fuzz::ggufInput, 3);
}

TEST(FuzzSeeds, TokenizerCorpusAndRegressions) {
  // The full-size tokenizers of the tokenizer tests are seeds too (read in place, not copied).
  runAll({kFuzzDir / "tokenizer-corpus", kFuzzDir / "regressions" / "tokenizer",
          kFuzzDir.parent_path() / "unit" / "runtime" / "tokenizer" / "data"},
         helm::fuzz::tokenizerInput, 5);
}

TEST(FuzzSeeds, TargetProfileCorpusAndRegressions) {
  runAll({kFuzzDir / "profile-corpus", kFuzzDir / "regressions" / "profile"},
         helm::fuzz::targetProfileInput, 5);
}

TEST(FuzzSeeds, HelmRtCommandLineCorpusAndRegressions) {
  runAll({kFuzzDir / "cli-corpus", kFuzzDir / "regressions" / "cli"}, helm::fuzz::helmRtArgsInput, 5);
}

TEST(FuzzSeeds, HelmcCommandLineCorpusAndRegressions) {
  runAll({kFuzzDir / "helmc-cli-corpus", kFuzzDir / "regressions" / "helmc-cli"},
         helm::fuzz::helmcArgsInput, 5);
}

TEST(FuzzSeeds, ChatTemplateCorpusAndRegressions) {
  runAll({kFuzzDir / "chat-template-corpus", kFuzzDir / "regressions" / "chat-template"},
         helm::fuzz::chatTemplateInput, 20);
}

TEST(FuzzSeeds, ServerRequestCorpusAndRegressions) {
  runAll({kFuzzDir / "server-request-corpus", kFuzzDir / "regressions" / "server-request"},
         helm::fuzz::serverRequestInput, 20);
}

} // namespace
