// libFuzzer target: arbitrary bytes as helmc's command line (arguments separated by NUL bytes),
// through the parser helmc runs (tools/helmc/Options.cpp): options whose checks hold, or an error;
// never a crash or sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::helmcArgsInput(data, size);
  return 0;
}
