//===- ByteSize.h - "512MiB"-style sizes on the command line -----------------------===//
//
// One parser for every flag that takes a byte count (helmc --vram-reserve, helm-rt --emu-vram):
// a non-negative decimal number and an optional unit, B, KiB/MiB/GiB (powers of 1024) or
// KB/MB/GB (powers of 1000), case-insensitive.
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

/// "123", "1.5GiB", "512MiB", "64KiB", "2GB" -> bytes (rounded down); nullopt for anything else
/// or for more than 2^60 bytes.
inline std::optional<uint64_t> parseByteSize(llvm::StringRef text) {
  llvm::StringRef number = text.take_while([](char c) { return llvm::isDigit(c) || c == '.'; });
  llvm::StringRef unit = text.drop_front(number.size()).trim();
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || !std::isfinite(value))
    return std::nullopt;
  double scale = unit.empty() || unit.equals_insensitive("B") ? 1
                 : unit.equals_insensitive("KiB")             ? 1024.0
                 : unit.equals_insensitive("MiB")             ? 1024.0 * 1024
                 : unit.equals_insensitive("GiB")             ? 1024.0 * 1024 * 1024
                 : unit.equals_insensitive("KB")              ? 1e3
                 : unit.equals_insensitive("MB")              ? 1e6
                 : unit.equals_insensitive("GB")              ? 1e9
                                                              : -1;
  if (scale < 0 || value * scale > double(uint64_t(1) << 60))
    return std::nullopt;
  return uint64_t(value * scale);
}

} // namespace helm

#endif
