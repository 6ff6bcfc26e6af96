//===- ByteSize.h - "512MiB"-style sizes on the command line -----------------------===//
//
// One parser for every flag that takes a byte count (helmc --vram-reserve, helm-rt --gpu-memory):
// a non-negative decimal number and an optional unit, case-insensitive. The forms people type
// all work: K/M/G/T, KiB/MiB/GiB/TiB and k/m/g (powers of 1024, as memory is sized and as
// llama.cpp, Docker and the JVM read "8G"), KB/MB/GB/TB (powers of 1000, as disks are sold), B
// or nothing for bytes. A space before the unit is allowed ("8 GiB").
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_SUPPORT_BYTESIZE_H
#define HELM_RUNTIME_SUPPORT_BYTESIZE_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <cstdint>
#include <optional>

namespace helm {

/// "123", "1.5GiB", "512MiB", "8G", "8192M", "64KiB", "2GB" -> bytes (rounded down); nullopt
/// for anything else or for more than 2^60 bytes.
inline std::optional<uint64_t> parseByteSize(llvm::StringRef text) {
  llvm::StringRef number = text.take_while([](char c) { return llvm::isDigit(c) || c == '.'; });
  llvm::StringRef unit = text.drop_front(number.size()).trim();
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || !std::isfinite(value))
    return std::nullopt;
  double scale = -1;
  if (unit.empty() || unit.equals_insensitive("B")) {
    scale = 1;
  } else {
    size_t power = llvm::StringRef("KMGT").find(llvm::toUpper(unit.front())) + 1; // 0: not a prefix
    llvm::StringRef suffix = unit.drop_front();
    if (power > 0 && (suffix.empty() || suffix.equals_insensitive("iB")))
      scale = std::pow(1024.0, double(power));
    else if (power > 0 && suffix.equals_insensitive("B"))
      scale = std::pow(1000.0, double(power));
  }
  if (scale < 0 || value * scale > double(uint64_t(1) << 60))
    return std::nullopt;
  return uint64_t(value * scale);
}

} // namespace helm

#endif
