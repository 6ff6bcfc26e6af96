// libFuzzer target: arbitrary bytes as a request to helm-rt serve: the first byte picks
// /v1/completions (even) or /v1/chat/completions (odd), the rest is the body. Parsed and checked
// as the server does; a chat body's messages rendered through a chat template. A refusal is one
// line in OpenAI's error JSON; never a crash, hang or sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::serverRequestInput(data, size);
  return 0;
}
