// libFuzzer target: arbitrary bytes through the ONNX importer and the raise pipeline. Any input must
// produce either a module or a one-line error, never a crash, hang or sanitizer report.
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::importerInput(data, size);
  return 0;
}
