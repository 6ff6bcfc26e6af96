// libFuzzer target: arbitrary bytes as a Hugging Face tokenizer.json (helmc --tokenizer, and the
// package's tokenizer section that helm-rt loads). A tokenizer or a one-line error; a tokenizer
// encodes and decodes a fixed mixed-script text. Never a crash, hang or sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::tokenizerInput(data, size);
  return 0;
}
