// libFuzzer target: arbitrary bytes as helm-rt's command line (arguments separated by NUL bytes),
// through the parser helm-rt runs. Success with every number in its flag's range, --help, or a
// one-line error; never a crash or sanitizer report (an out-of-range number converted to a narrower
// type is undefined behaviour that UBSan reports).
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::helmRtArgsInput(data, size);
  return 0;
}
