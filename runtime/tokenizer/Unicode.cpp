//===- Unicode.cpp - UTF-8, character classes, NFC ------------------------------===//
#include "runtime/tokenizer/Unicode.h"

#include "runtime/tokenizer/UnicodeTables.h"

#include <algorithm>
#include <iterator>
#include <vector>

namespace helm::tok {

namespace ut = unicode_tables;

namespace {

/// Length of the longest prefix of s[i..] that is a valid UTF-8 sequence or the start of one, and
/// whether it is a complete character.
unsigned utf8Prefix(llvm::StringRef s, size_t i, bool &complete, uint32_t &cp) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = b(i);
  complete = false;
  if (c < 0x80) {
    complete = true;
    cp = c;
    return 1;
  }
  unsigned need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    cp = c & 0x0F;
    if (c == 0xE0)
      lo = 0xA0;
    if (c == 0xED)
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    cp = c & 0x07;
    if (c == 0xF0)
      lo = 0x90;
    if (c == 0xF4)
      hi = 0x8F;
  } else {
    return 1; // not a lead byte: a maximal invalid subpart of one byte
  }
  unsigned len = 1;
  for (unsigned k = 0; k < need; ++k) {
    if (i + len >= s.size())
      return len;
    uint8_t x = b(i + len);
    if (x < lo || x > hi)
      return len;
    lo = 0x80;
    hi = 0xBF;
    cp = (cp << 6) | (x & 0x3F);
    ++len;
  }
  complete = true;
  return len;
}

/// The range of a sorted table of disjoint {lo, hi, ...} ranges that contains `cp`, or nullptr.
template <typename R> const auto *findRange(const R &table, uint32_t cp) {
  auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                             [](uint32_t v, const auto &r) { return v < r.lo; });
  if (it == std::begin(table) || cp > std::prev(it)->hi)
    return static_cast<decltype(&*it)>(nullptr);
  return &*std::prev(it);
}

template <typename R> bool inRanges(const R &table, uint32_t cp) { return findRange(table, cp); }

uint8_t combiningClass(uint32_t cp) {
  if (cp < 0x300 || cp > 0x10FFFF)
    return 0;
  const ut::ClassRange *r = findRange(ut::kCombiningClass, cp);
  return r ? r->cls : 0;
}

constexpr uint32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr uint32_t LCount = 19, VCount = 21, TCount = 28, NCount = VCount * TCount,
                   SCount = LCount * NCount;
constexpr uint32_t kRawByteMark = 0x80000000u; ///< an invalid input byte carried through NFC

void decompose(uint32_t cp, std::vector<uint32_t> &out) {
  if (cp >= SBase && cp < SBase + SCount) {
    uint32_t s = cp - SBase;
    out.push_back(LBase + s / NCount);
    out.push_back(VBase + (s % NCount) / TCount);
    if (s % TCount)
      out.push_back(TBase + s % TCount);
    return;
  }
  auto it = std::lower_bound(std::begin(ut::kDecompositions), std::end(ut::kDecompositions), cp,
                             [](const ut::Decomp &d, uint32_t v) { return d.cp < v; });
  if (it != std::end(ut::kDecompositions) && it->cp == cp) {
    out.insert(out.end(), it->to, it->to + it->len);
    return;
  }
  out.push_back(cp);
}

bool compose(uint32_t a, uint32_t b, uint32_t &c) {
  if (a >= LBase && a < LBase + LCount && b >= VBase && b < VBase + VCount) {
    c = SBase + ((a - LBase) * VCount + (b - VBase)) * TCount;
    return true;
  }
  if (a >= SBase && a < SBase + SCount && (a - SBase) % TCount == 0 && b > TBase &&
      b < TBase + TCount) {
    c = a + (b - TBase);
    return true;
  }
  auto it = std::lower_bound(std::begin(ut::kCompositions), std::end(ut::kCompositions),
                             std::make_pair(a, b), [](const ut::Comp &x, std::pair<uint32_t, uint32_t> v) {
                               return x.first != v.first ? x.first < v.first : x.second < v.second;
                             });
  if (it != std::end(ut::kCompositions) && it->first == a && it->second == b) {
    c = it->composite;
    return true;
  }
  return false;
}

} // namespace

unsigned decodeUtf8(llvm::StringRef s, size_t i, uint32_t &cp) {
  bool complete;
  unsigned n = utf8Prefix(s, i, complete, cp);
  if (!complete) {
    cp = kInvalidCodePoint;
    return 1;
  }
  return n;
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool isLetter(uint32_t cp) {
  if (cp < 0x80)
    return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return inRanges(ut::kLetters, cp);
}

bool isNumber(uint32_t cp) {
  if (cp < 0x80)
    return cp >= '0' && cp <= '9';
  return inRanges(ut::kNumbers, cp);
}

bool isWhiteSpace(uint32_t cp) {
  if (cp < 0x80)
    return cp == ' ' || (cp >= 0x9 && cp <= 0xD);
  return inRanges(ut::kWhiteSpace, cp);
}

std::string nfc(llvm::StringRef s) {
  bool trivial = true;
  for (unsigned char c : s)
    if (c >= 0xCC) { // U+0300 and above start with a lead byte >= 0xCC
      trivial = false;
      break;
    }
  if (trivial)
    return s.str();

  std::vector<uint32_t> d;
  d.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    unsigned n = decodeUtf8(s, i, cp);
    if (cp == kInvalidCodePoint)
      d.push_back(kRawByteMark | static_cast<uint8_t>(s[i]));
    else
      decompose(cp, d);
    i += n;
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if ((d[i] & kRawByteMark) || combiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && !(d[j] & kRawByteMark) && combiningClass(d[j]) != 0)
      ++j;
    std::stable_sort(d.begin() + i, d.begin() + j,
                     [](uint32_t a, uint32_t b) { return combiningClass(a) < combiningClass(b); });
    i = j;
  }
  // Canonical composition.
  std::vector<uint32_t> out;
  out.reserve(d.size());
  long starter = -1;
  bool adjacent = false;
  uint8_t lastClass = 0;
  for (uint32_t c : d) {
    bool raw = c & kRawByteMark;
    uint8_t cc = raw ? 0 : combiningClass(c);
    uint32_t composite;
    if (!raw && starter >= 0 && !(out[starter] & kRawByteMark) && (adjacent || lastClass < cc) &&
        compose(out[starter], c, composite)) {
      out[starter] = composite;
      continue;
    }
    if (cc == 0) {
      starter = static_cast<long>(out.size());
      adjacent = true;
    } else {
      adjacent = false;
      lastClass = cc;
    }
    out.push_back(c);
  }
  std::string r;
  r.reserve(s.size());
  for (uint32_t c : out) {
    if (c & kRawByteMark)
      r.push_back(static_cast<char>(c & 0xFF));
    else
      appendUtf8(r, c);
  }
  return r;
}

std::string utf8Lossy(llvm::StringRef bytes) {
  std::string r;
  r.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    bool complete;
    uint32_t cp;
    unsigned n = utf8Prefix(bytes, i, complete, cp);
    if (complete)
      r.append(bytes.data() + i, n);
    else
      r.append("\xEF\xBF\xBD");
    i += n;
  }
  return r;
}

bool isValidUtf8(llvm::StringRef bytes) {
  for (size_t i = 0; i < bytes.size();) {
    bool complete;
    uint32_t cp;
    unsigned n = utf8Prefix(bytes, i, complete, cp);
    if (!complete)
      return false;
    i += n;
  }
  return true;
}

} // namespace helm::tok
