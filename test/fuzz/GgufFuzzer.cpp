// libFuzzer target: arbitrary bytes through the GGUF reader (compiler/gguf/GgufFile.h), the tokenizer
// built from its metadata and the GGUF front end (compiler/gguf/GgufImporter.h). Every input must
// give either a view whose values and tensors lie inside the input (each is read), a tokenizer and a
// verified module, or one-line errors "fuzz.gguf: ...", never a crash, hang, out-of-bounds read or
// sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::ggufInput(data, size);
  return 0;
}
