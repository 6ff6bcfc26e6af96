//===- OneLine.h - keep a message on one line ----------------------------------===//
//
// Error messages quote what the user gave (flags, values, names). A control character in it, such
// as a newline in a flag's value, must not break the one-line diagnostic every tool promises:
// oneLine writes each control character as \xHH.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_SUPPORT_ONELINE_H
#define HELM_RUNTIME_SUPPORT_ONELINE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace helm {

inline std::string oneLine(llvm::StringRef text) {
  static const char kHex[] = "0123456789abcdef";
  std::string line;
  line.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      line += "\\x";
      line += kHex[u >> 4];
      line += kHex[u & 15];
    } else {
      line += c;
    }
  }
  return line;
}

} // namespace helm

#endif
