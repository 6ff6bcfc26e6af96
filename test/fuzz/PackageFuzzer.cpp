// libFuzzer target: arbitrary bytes through the .helmpkg reader. Every input must give either a
// package or a one-line error "fuzz.helmpkg: ...", never a crash, hang, out-of-bounds read or
// sanitizer report.
//
// Random mutations almost never survive the header and table checksums, so each input is also run
// a second time with those checksums (and the checksums of every in-bounds section) recomputed: that
// drives the structural checks behind them (layout, overlaps, manifest JSON, padding).
#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  helm::fuzz::packageInput(data, size);
  return 0;
}
