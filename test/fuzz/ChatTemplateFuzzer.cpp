// libFuzzer target: arbitrary bytes as a chat template (a package's tokenizer.chat_template, which
// helmc parses and helm-rt serve renders per request). Parsed, then rendered with a fixed
// conversation: a one-line refusal or error, or valid UTF-8 within the limits, the same twice.
// Never a crash, hang or sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::chatTemplateInput(data, size);
  return 0;
}
