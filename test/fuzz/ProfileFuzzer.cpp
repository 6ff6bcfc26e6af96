// libFuzzer target: arbitrary bytes as a target-profile JSON document (helmc --target=file.json,
// helm-profile's output). A profile that writes back to the same document, or an error naming the
// field. Never a crash, hang or sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::targetProfileInput(data, size);
  return 0;
}
