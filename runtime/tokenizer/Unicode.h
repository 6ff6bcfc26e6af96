//===- Unicode.h - UTF-8 decoding, character classes and NFC for the tokenizer ---===//
#ifndef HELM_RUNTIME_TOKENIZER_UNICODE_H
#define HELM_RUNTIME_TOKENIZER_UNICODE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace helm::tok {

/// Marks a byte that does not start a valid UTF-8 sequence (it is kept as one raw byte).
inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

/// Decodes the character at s[i]: returns its length in bytes (1..4) and sets `cp`. An invalid or
/// truncated sequence yields length 1 and kInvalidCodePoint. Requires i < s.size().
unsigned decodeUtf8(llvm::StringRef s, size_t i, uint32_t &cp);
void appendUtf8(std::string &out, uint32_t cp);

/// General category L* / N*, and the White_Space property (what `\s` matches).
bool isLetter(uint32_t cp);
bool isNumber(uint32_t cp);
bool isWhiteSpace(uint32_t cp);

/// Canonical composition (Unicode NFC). Invalid UTF-8 bytes pass through unchanged.
std::string nfc(llvm::StringRef s);

/// Replaces invalid UTF-8 with U+FFFD, one per maximal invalid subpart (like Rust's
/// String::from_utf8_lossy).
std::string utf8Lossy(llvm::StringRef bytes);
bool isValidUtf8(llvm::StringRef bytes);

} // namespace helm::tok

#endif // HELM_RUNTIME_TOKENIZER_UNICODE_H
