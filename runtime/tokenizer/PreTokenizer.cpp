//===- PreTokenizer.cpp - the pre-tokenizer matchers and the byte-level alphabet ---===//
//
// The Split pre-tokenizer's patterns are not run by a regex engine: matchAt hand-codes each of
// the three patterns real tokenizer.json files use (GPT-2, Llama 3, Qwen2), with the leftmost-first
// alternation and backtracking of a regex engine, over characters classified by Unicode category.
//
//===----------------------------------------------------------------------------===//
#include "runtime/tokenizer/TokenizerImpl.h"

namespace helm::tok {

ByteAlphabet::ByteAlphabet() {
  fromChar.fill(-1);
  unsigned next = 0;
  for (unsigned b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? b : 256 + next++;
    appendUtf8(toChar[b], cp);
    fromChar[cp] = static_cast<int16_t>(b);
  }
}

const ByteAlphabet &byteAlphabet() {
  static const ByteAlphabet a;
  return a;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Characters of a string with the classes the pre-tokenizer patterns use.
enum : uint8_t { kL = 1, kN = 2, kS = 4 };

struct Ch {
  uint32_t cp;
  uint32_t off;
  uint8_t len;
  uint8_t cls;
};

std::vector<Ch> chars(llvm::StringRef s) {
  std::vector<Ch> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    unsigned n = decodeUtf8(s, i, cp);
    uint8_t cls = 0;
    if (cp != kInvalidCodePoint) {
      if (isLetter(cp))
        cls = kL;
      else if (isNumber(cp))
        cls = kN;
      else if (isWhiteSpace(cp))
        cls = kS;
    }
    out.push_back({cp, static_cast<uint32_t>(i), static_cast<uint8_t>(n), cls});
    i += n;
  }
  return out;
}

/// Length in characters of the match of `kind` starting at chars[i] (0: none), with the leftmost-
/// first alternation and backtracking of a regex engine.
size_t matchAt(PatternKind kind, const std::vector<Ch> &c, size_t i) {
  const size_t n = c.size();
  auto isL = [&](size_t k) { return c[k].cls == kL; };
  auto isN = [&](size_t k) { return c[k].cls == kN; };
  auto isS = [&](size_t k) { return c[k].cls == kS; };
  auto isO = [&](size_t k) { return c[k].cls == 0; }; // [^\s\p{L}\p{N}]
  auto isNl = [&](size_t k) { return c[k].cp == '\r' || c[k].cp == '\n'; };
  if (kind == PatternKind::Digits)
    return isN(i) ? 1 : 0;
  auto run = [&](size_t k, auto pred) {
    size_t j = k;
    while (j < n && pred(j))
      ++j;
    return j - k;
  };
  bool ci = kind != PatternKind::Gpt2;

  // Contractions: 's 't 're 've 'm 'll 'd (case-insensitive for Llama 3 / Qwen2).
  if (c[i].cp == '\'' && i + 1 < n) {
    auto lower = [&](uint32_t cp) -> uint32_t {
      if (!ci)
        return cp;
      if (cp >= 'A' && cp <= 'Z')
        return cp + 32;
      if (cp == 0x17F) // LATIN SMALL LETTER LONG S case-folds to 's'
        return 's';
      return cp;
    };
    uint32_t a = lower(c[i + 1].cp);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
      return 2;
    if (i + 2 < n) {
      uint32_t b = lower(c[i + 2].cp);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    }
  }

  if (kind == PatternKind::Gpt2) {
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    auto spaced = [&](auto pred) -> size_t {
      if (c[i].cp == ' ' && i + 1 < n && pred(i + 1))
        return 1 + run(i + 1, pred);
      if (pred(i))
        return run(i, pred);
      return 0;
    };
    if (size_t m = spaced(isL))
      return m;
    if (size_t m = spaced(isN))
      return m;
    if (size_t m = spaced(isO))
      return m;
  } else {
    // '[^\r\n\p{L}\p{N}]?\p{L}+'
    if (!isL(i) && !isN(i) && !isNl(i) && i + 1 < n && isL(i + 1))
      return 1 + run(i + 1, isL);
    if (isL(i))
      return run(i, isL);
    // '\p{N}{1,3}' or '\p{N}'
    if (isN(i)) {
      size_t m = run(i, isN);
      return std::min<size_t>(m, kind == PatternKind::Llama3 ? 3 : 1);
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    size_t j = i;
    if (c[i].cp == ' ' && i + 1 < n && isO(i + 1))
      j = i + 1;
    if (isO(j)) {
      j += run(j, isO);
      j += run(j, isNl);
      return j - i;
    }
    // '\s*[\r\n]+': the whitespace run up to its last line break
    if (isS(i)) {
      size_t end = i + run(i, isS);
      for (size_t p = end; p > i; --p)
        if (isNl(p - 1))
          return p - i;
    }
  }
  // '\s+(?!\S)' then '\s+'
  if (isS(i)) {
    size_t m = run(i, isS);
    if (i + m == n || m == 1)
      return m;
    return m - 1;
  }
  return 0;
}

} // namespace

/// Applies a split behaviour to a covering list of (begin, end, isMatch) byte ranges of `p`.
void applySplit(const Piece &p, std::vector<std::tuple<size_t, size_t, bool>> parts,
                SplitBehavior behavior, bool invert, std::vector<Piece> &out) {
  if (invert)
    for (auto &t : parts)
      std::get<2>(t) = !std::get<2>(t);
  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
  case SplitBehavior::Isolated:
    for (auto &[b, e, m] : parts)
      ranges.push_back({b, e});
    break;
  case SplitBehavior::Removed:
    for (auto &[b, e, m] : parts)
      if (!m)
        ranges.push_back({b, e});
    break;
  case SplitBehavior::Contiguous: {
    bool prev = false;
    for (auto &[b, e, m] : parts) {
      if (m == prev && !ranges.empty())
        ranges.back().second = e;
      else
        ranges.push_back({b, e});
      prev = m;
    }
    break;
  }
  case SplitBehavior::MergedWithPrevious: {
    bool prev = false;
    for (auto &[b, e, m] : parts) {
      if (m && !prev && !ranges.empty())
        ranges.back().second = e;
      else
        ranges.push_back({b, e});
      prev = m;
    }
    break;
  }
  case SplitBehavior::MergedWithNext: {
    bool prev = false;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      auto &[b, e, m] = *it;
      if (m && !prev && !ranges.empty())
        ranges.back().first = b;
      else
        ranges.push_back({b, e});
      prev = m;
    }
    std::reverse(ranges.begin(), ranges.end());
    break;
  }
  }
  for (auto [b, e] : ranges)
    if (e > b)
      out.push_back({p.text.substr(b, e - b), p.atTextStart && b == 0});
}

/// Covering (begin, end, isMatch) byte ranges of the pattern's matches in `s`.
std::vector<std::tuple<size_t, size_t, bool>> patternParts(PatternKind kind, llvm::StringRef s) {
  std::vector<Ch> c = chars(s);
  std::vector<std::tuple<size_t, size_t, bool>> parts;
  size_t gapStart = 0;
  auto off = [&](size_t k) { return k < c.size() ? size_t(c[k].off) : s.size(); };
  for (size_t i = 0; i < c.size();) {
    size_t m = matchAt(kind, c, i);
    if (m == 0) {
      ++i;
      continue;
    }
    if (off(i) > gapStart)
      parts.push_back({gapStart, off(i), false});
    parts.push_back({off(i), off(i + m), true});
    i += m;
    gapStart = off(i);
  }
  if (gapStart < s.size())
    parts.push_back({gapStart, s.size(), false});
  return parts;
}

std::vector<std::tuple<size_t, size_t, bool>> literalParts(llvm::StringRef lit, llvm::StringRef s) {
  std::vector<std::tuple<size_t, size_t, bool>> parts;
  size_t gapStart = 0;
  if (!lit.empty()) {
    for (size_t pos = s.find(lit); pos != llvm::StringRef::npos; pos = s.find(lit, pos)) {
      if (pos > gapStart)
        parts.push_back({gapStart, pos, false});
      parts.push_back({pos, pos + lit.size(), true});
      pos += lit.size();
      gapStart = pos;
    }
  }
  if (gapStart < s.size())
    parts.push_back({gapStart, s.size(), false});
  return parts;
}

} // namespace helm::tok
