//===- JsonDepth.h - bound JSON nesting before llvm::json::parse ------------------===//
//
// llvm::json::parse recurses once per nesting level, so a hostile file (a manifest, a tokenizer,
// a target profile) of a few MB of '[' would exhaust the stack. Every reader of untrusted JSON
// checks the depth with this first.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_SUPPORT_JSONDEPTH_H
#define HELM_RUNTIME_SUPPORT_JSONDEPTH_H

#include "llvm/ADT/StringRef.h"

#include <algorithm>

namespace helm {

/// Deepest [ / { nesting of a JSON text (strings skipped); stops counting once past `limit`.
inline unsigned jsonDepth(llvm::StringRef text, unsigned limit) {
  unsigned depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit)
        return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

} // namespace helm

#endif
