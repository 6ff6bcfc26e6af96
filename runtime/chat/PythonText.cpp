//===- PythonText.cpp - Python's str semantics on UTF-8 text -----------------------===//
#include "runtime/chat/PythonText.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string.h> // memmem

namespace helm::chat::py {

bool isValidUtf8(llvm::StringRef text) {
  // LLVM's check is strict in the same ways: no overlong forms, no surrogates, nothing past U+10FFFF.
  return llvm::json::isUTF8(text);
}

char32_t decodeAt(llvm::StringRef text, size_t &pos) {
  auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) {
    ++pos;
    return b;
  }
  size_t extra = (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : 3;
  char32_t c = b & (extra == 1 ? 0x1F : extra == 2 ? 0x0F : 0x07);
  for (size_t k = 1; k <= extra && pos + k < text.size(); ++k)
    c = (c << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  pos += extra + 1;
  return c;
}

void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

std::vector<char32_t> codePoints(llvm::StringRef text) {
  std::vector<char32_t> points;
  points.reserve(text.size());
  for (size_t pos = 0; pos < text.size();)
    points.push_back(decodeAt(text, pos));
  return points;
}

std::string fromCodePoints(const std::vector<char32_t> &points) {
  std::string out;
  out.reserve(points.size());
  for (char32_t c : points)
    appendUtf8(out, c);
  return out;
}

size_t length(llvm::StringRef text) {
  size_t count = 0;
  for (char c : text)
    count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

bool isAscii(llvm::StringRef text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

namespace {
// LLVM's StringRef::find is Boyer-Moore-Horspool up to 255-byte needles (at most 255 compares per
// position) and naive beyond; memmem's two-way algorithm is linear.
constexpr size_t kLongNeedle = 255;
} // namespace

size_t find(llvm::StringRef text, llvm::StringRef needle, size_t from) {
  if (from > text.size())
    return llvm::StringRef::npos;
  if (needle.size() <= kLongNeedle)
    return text.find(needle, from);
  const void *hit = memmem(text.data() + from, text.size() - from, needle.data(), needle.size());
  return hit ? size_t(static_cast<const char *>(hit) - text.data()) : llvm::StringRef::npos;
}

size_t rfind(llvm::StringRef text, llvm::StringRef needle) {
  if (needle.size() <= kLongNeedle || needle.size() > text.size())
    return text.rfind(needle);
  // The last occurrence is the first one in the reversed text.
  std::string reversedText(text.rbegin(), text.rend()), reversedNeedle(needle.rbegin(), needle.rend());
  size_t hit = find(reversedText, reversedNeedle);
  return hit == llvm::StringRef::npos ? hit : text.size() - hit - needle.size();
}

size_t count(llvm::StringRef text, llvm::StringRef needle) {
  if (needle.empty())
    return length(text) + 1;
  size_t n = 0;
  for (size_t at = find(text, needle); at != llvm::StringRef::npos; at = find(text, needle, at + needle.size()))
    ++n;
  return n;
}

bool isSpace(char32_t c) {
  if (c < 0x80)
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(llvm::StringRef text, std::optional<llvm::StringRef> chars, bool left, bool right) {
  if (isAscii(text) && (!chars || isAscii(*chars))) {
    // ASCII text: bytes are code points (and the common case is fast).
    bool set[128] = {};
    if (chars)
      for (char c : *chars)
        set[static_cast<unsigned char>(c)] = true;
    auto strips = [&](char c) { return chars ? set[static_cast<unsigned char>(c)] : isSpace(char32_t(c)); };
    size_t begin = 0, end = text.size();
    if (left)
      while (begin < end && strips(text[begin]))
        ++begin;
    if (right)
      while (end > begin && strips(text[end - 1]))
        --end;
    return text.slice(begin, end).str();
  }
  std::vector<char32_t> points = codePoints(text);
  std::vector<char32_t> set;
  if (chars) {
    set = codePoints(*chars);
    std::sort(set.begin(), set.end()); // a long `chars` costs log(n) per code point, not n
  }
  auto strips = [&](char32_t c) {
    return chars ? std::binary_search(set.begin(), set.end(), c) : isSpace(c);
  };
  size_t begin = 0, end = points.size();
  if (left)
    while (begin < end && strips(points[begin]))
      ++begin;
  if (right)
    while (end > begin && strips(points[end - 1]))
      --end;
  return fromCodePoints(std::vector<char32_t>(points.begin() + begin, points.begin() + end));
}

std::vector<std::string> split(llvm::StringRef text, std::optional<llvm::StringRef> sep, int64_t maxSplit) {
  std::vector<std::string> parts;
  int64_t remaining = maxSplit < 0 ? INT64_MAX : maxSplit;
  if (sep) {
    size_t start = 0;
    while (remaining-- > 0) {
      size_t found = find(text, *sep, start);
      if (found == llvm::StringRef::npos)
        break;
      parts.push_back(text.slice(start, found).str());
      start = found + sep->size();
    }
    parts.push_back(text.substr(start).str());
    return parts;
  }
  // CPython's split_whitespace, on code points.
  std::vector<char32_t> s = codePoints(text);
  size_t n = s.size(), i = 0;
  auto add = [&](size_t from, size_t to) {
    parts.push_back(fromCodePoints(std::vector<char32_t>(s.begin() + from, s.begin() + to)));
  };
  while (remaining-- > 0) {
    while (i < n && isSpace(s[i]))
      ++i;
    if (i == n)
      break;
    size_t j = i++;
    while (i < n && !isSpace(s[i]))
      ++i;
    add(j, i);
  }
  if (i < n) {
    while (i < n && isSpace(s[i]))
      ++i;
    if (i != n)
      add(i, n);
  }
  return parts;
}

std::vector<std::string> rsplit(llvm::StringRef text, std::optional<llvm::StringRef> sep, int64_t maxSplit) {
  std::vector<std::string> parts;
  int64_t remaining = maxSplit < 0 ? INT64_MAX : maxSplit;
  if (sep) {
    size_t end = text.size();
    while (remaining-- > 0) {
      size_t found = rfind(text.substr(0, end), *sep);
      if (found == llvm::StringRef::npos)
        break;
      parts.push_back(text.slice(found + sep->size(), end).str());
      end = found;
    }
    parts.push_back(text.substr(0, end).str());
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  std::vector<char32_t> s = codePoints(text);
  int64_t i = int64_t(s.size()) - 1;
  auto add = [&](int64_t from, int64_t to) {
    parts.push_back(fromCodePoints(std::vector<char32_t>(s.begin() + from, s.begin() + to)));
  };
  while (remaining-- > 0) {
    while (i >= 0 && isSpace(s[i]))
      --i;
    if (i < 0)
      break;
    int64_t j = i--;
    while (i >= 0 && !isSpace(s[i]))
      --i;
    add(i + 1, j + 1);
  }
  if (i >= 0) {
    while (i >= 0 && isSpace(s[i]))
      --i;
    if (i >= 0)
      add(0, i + 1);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string replace(llvm::StringRef text, llvm::StringRef old, llvm::StringRef replacement, int64_t count) {
  int64_t remaining = count < 0 ? INT64_MAX : count;
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    size_t pos = 0;
    while (pos <= text.size()) {
      if (remaining-- > 0) {
        out += replacement;
      } else {
        out += text.substr(pos);
        return out;
      }
      if (pos == text.size())
        break;
      size_t next = pos;
      decodeAt(text, next);
      out += text.slice(pos, next);
      pos = next;
    }
    return out;
  }
  size_t start = 0;
  while (remaining-- > 0) {
    size_t found = find(text, old, start);
    if (found == llvm::StringRef::npos)
      break;
    out += text.slice(start, found);
    out += replacement;
    start = found + old.size();
  }
  out += text.substr(start);
  return out;
}

namespace {

// One-to-one case pairs; 0 where a code point has no simple mapping in the covered scripts.
char32_t simpleUpper(char32_t c) {
  if (c >= 'a' && c <= 'z')
    return c - 32;
  if (c < 0x80)
    return 0;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7))
    return c - 0x20;
  if (c == 0xFF)
    return 0x178;
  if (c == 0xB5)
    return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131)
      return 'I';
    if (c == 0x17F)
      return 'S';
    if ((c <= 0x137 || (c >= 0x14A && c <= 0x177)) && (c & 1))
      return c - 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && !(c & 1))
      return c - 1;
    return 0;
  }
  if (c >= 0x3B1 && c <= 0x3C9)
    return c == 0x3C2 ? 0x3A3 : c - 0x20;
  if (c == 0x3AC)
    return 0x386;
  if (c >= 0x3AD && c <= 0x3AF)
    return c - 0x25;
  if (c == 0x3CC)
    return 0x38C;
  if (c == 0x3CD || c == 0x3CE)
    return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F)
    return c - 0x20;
  if (c >= 0x450 && c <= 0x45F)
    return c - 0x50;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F)) && (c & 1))
    return c - 1;
  if (c >= 0x4C1 && c <= 0x4CE && !(c & 1))
    return c - 1;
  if (c == 0x4CF)
    return 0x4C0;
  if (c >= 0x561 && c <= 0x586)
    return c - 0x30;
  if (((c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF)) && (c & 1))
    return c - 1;
  if (c >= 0xFF41 && c <= 0xFF5A)
    return c - 0x20;
  return 0;
}

char32_t simpleLower(char32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 32;
  if (c < 0x80)
    return 0;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7)
    return c + 0x20;
  if (c == 0x178)
    return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c <= 0x137 || (c >= 0x14A && c <= 0x177)) && !(c & 1) && c != 0x130)
      return c + 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && (c & 1))
      return c + 1;
    return 0;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2)
    return c + 0x20;
  if (c == 0x386)
    return 0x3AC;
  if (c >= 0x388 && c <= 0x38A)
    return c + 0x25;
  if (c == 0x38C)
    return 0x3CC;
  if (c == 0x38E || c == 0x38F)
    return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F)
    return c + 0x20;
  if (c >= 0x400 && c <= 0x40F)
    return c + 0x50;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F)) && !(c & 1))
    return c + 1;
  if (c >= 0x4C1 && c <= 0x4CE && (c & 1))
    return c + 1;
  if (c == 0x4C0)
    return 0x4CF;
  if (c >= 0x531 && c <= 0x556)
    return c + 0x30;
  if (((c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF)) && !(c & 1))
    return c + 1;
  if (c == 0x1E9E)
    return 0xDF;
  if (c >= 0xFF21 && c <= 0xFF3A)
    return c + 0x20;
  return 0;
}

// Lowercase letters of the covered scripts without a one-to-one uppercase.
bool isLowerWithoutPair(char32_t c) {
  return c == 0xDF || c == 0x138 || c == 0x149 || c == 0x390 || c == 0x3B0 || c == 0x587 || c == 0xAA ||
         c == 0xBA;
}

bool isCased(char32_t c) { return isUpperChar(c) || isLowerChar(c); }

// Characters that may sit between a cased letter and a final sigma (the common ones).
bool isCaseIgnorable(char32_t c) {
  return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xAD || c == 0xB7 || c == 0x2019 ||
         (c >= 0x300 && c <= 0x36F);
}

void appendUpper(std::string &out, char32_t c) {
  if (c == 0xDF) {
    out += "SS";
  } else if (c == 0x149) {
    appendUtf8(out, 0x2BC);
    out += 'N';
  } else if (c == 0x587) {
    appendUtf8(out, 0x535);
    appendUtf8(out, 0x552);
  } else if (char32_t u = simpleUpper(c)) {
    appendUtf8(out, u);
  } else {
    appendUtf8(out, c);
  }
}

void appendTitle(std::string &out, char32_t c) {
  if (c == 0xDF) {
    out += "Ss";
  } else if (c == 0x587) {
    appendUtf8(out, 0x535);
    appendUtf8(out, 0x582);
  } else {
    appendUpper(out, c);
  }
}

// Lowercases points[i], with Python's final-sigma rule for U+03A3.
void appendLower(std::string &out, const std::vector<char32_t> &points, size_t i) {
  char32_t c = points[i];
  if (c == 0x130) {
    out += 'i';
    appendUtf8(out, 0x307);
    return;
  }
  if (c == 0x3A3) {
    int64_t j = int64_t(i) - 1;
    while (j >= 0 && isCaseIgnorable(points[j]))
      --j;
    bool finalSigma = j >= 0 && isCased(points[j]);
    if (finalSigma) {
      size_t k = i + 1;
      while (k < points.size() && isCaseIgnorable(points[k]))
        ++k;
      finalSigma = k == points.size() || !isCased(points[k]);
    }
    appendUtf8(out, finalSigma ? 0x3C2 : 0x3C3);
    return;
  }
  char32_t l = simpleLower(c);
  appendUtf8(out, l ? l : c);
}

} // namespace

bool isUpperChar(char32_t c) { return simpleLower(c) != 0 || c == 0x130; }
bool isLowerChar(char32_t c) { return simpleUpper(c) != 0 || isLowerWithoutPair(c); }

std::string upper(llvm::StringRef text) {
  if (isAscii(text))
    return text.upper();
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();)
    appendUpper(out, decodeAt(text, pos));
  return out;
}

std::string lower(llvm::StringRef text) {
  if (isAscii(text))
    return text.lower();
  std::vector<char32_t> points = codePoints(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < points.size(); ++i)
    appendLower(out, points, i);
  return out;
}

std::string title(llvm::StringRef text) {
  std::vector<char32_t> points = codePoints(text);
  std::string out;
  out.reserve(text.size());
  bool previousIsCased = false;
  for (size_t i = 0; i < points.size(); ++i) {
    if (previousIsCased)
      appendLower(out, points, i);
    else
      appendTitle(out, points[i]);
    previousIsCased = isCased(points[i]);
  }
  return out;
}

std::string capitalize(llvm::StringRef text) {
  std::vector<char32_t> points = codePoints(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < points.size(); ++i) {
    if (i == 0)
      appendTitle(out, points[0]);
    else
      appendLower(out, points, i);
  }
  return out;
}

namespace {
// CPython's str.isprintable() outside ASCII, approximated: control, format, separator (other than
// the ASCII space), private-use and noncharacter code points are escaped by repr(). Unassigned code
// points, which CPython escapes too, are not known here and print as they are.
bool isPrintable(char32_t c) {
  if (c < 0x80)
    return c >= 0x20 && c < 0x7F;
  if (c <= 0xA0 || c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
      (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) ||
      c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0x600 && c <= 0x605) ||
      c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x8E2 || c == 0x180E || (c >= 0xE000 && c <= 0xF8FF) ||
      (c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE || c >= 0xF0000 || c == 0xE0001 ||
      (c >= 0xE0020 && c <= 0xE007F) || (c >= 0x1D173 && c <= 0x1D17A))
    return false;
  return true;
}

void appendHex(std::string &out, uint32_t value, int digits) {
  static const char kHex[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    out += kHex[(value >> shift) & 15];
}
} // namespace

std::string repr(llvm::StringRef text) {
  char quote = '\'';
  if (text.contains('\'') && !text.contains('"'))
    quote = '"';
  std::string out(1, quote);
  for (size_t pos = 0; pos < text.size();) {
    char32_t c = decodeAt(text, pos);
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (isPrintable(c)) {
      appendUtf8(out, c);
    } else if (c <= 0xFF) {
      out += "\\x";
      appendHex(out, c, 2);
    } else if (c <= 0xFFFF) {
      out += "\\u";
      appendHex(out, c, 4);
    } else {
      out += "\\U";
      appendHex(out, c, 8);
    }
  }
  out += quote;
  return out;
}

void appendJsonString(std::string &out, llvm::StringRef text, bool ensureAscii) {
  out += '"';
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    char32_t c = decodeAt(text, pos);
    switch (c) {
    case '"': out += "\\\""; continue;
    case '\\': out += "\\\\"; continue;
    case '\n': out += "\\n"; continue;
    case '\r': out += "\\r"; continue;
    case '\t': out += "\\t"; continue;
    case '\b': out += "\\b"; continue;
    case '\f': out += "\\f"; continue;
    default: break;
    }
    if (c < 0x20 || (ensureAscii && c >= 0x7F)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        out += "\\u";
        appendHex(out, 0xD800 | (v >> 10), 4);
        out += "\\u";
        appendHex(out, 0xDC00 | (v & 0x3FF), 4);
      } else {
        out += "\\u";
        appendHex(out, c, 4);
      }
    } else {
      out.append(text.data() + start, pos - start);
    }
  }
  out += '"';
}

std::string formatFloat(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  // The shortest round-trip digits, then CPython's layout: positional for exponents -4..15,
  // scientific otherwise.
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  bool negative = sci[0] == '-';
  if (negative)
    sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.')
      digits += c;
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      std::string whole = digits.substr(0, std::min<size_t>(digits.size(), exponent + 1));
      whole.append(size_t(exponent + 1) > digits.size() ? exponent + 1 - digits.size() : 0, '0');
      std::string fraction = size_t(exponent + 1) < digits.size() ? digits.substr(exponent + 1) : "0";
      out += whole + "." + fraction;
    } else {
      out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

SliceBounds sliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                         int64_t step) {
  auto clamp = [&](std::optional<int64_t> index, int64_t fallback) {
    if (!index)
      return fallback;
    int64_t i = *index;
    if (i < 0) {
      i = i < -length ? (step < 0 ? -1 : 0) : i + length;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  // CPython clamps the step to -sys.maxsize, so -step below cannot overflow.
  step = std::max(step, -std::numeric_limits<int64_t>::max());
  SliceBounds b;
  b.step = step;
  b.start = clamp(start, step < 0 ? length - 1 : 0);
  b.stop = clamp(stop, step < 0 ? -1 : length);
  if (step < 0)
    b.count = b.stop < b.start ? (b.start - b.stop - 1) / (-step) + 1 : 0;
  else
    b.count = b.start < b.stop ? (b.stop - b.start - 1) / step + 1 : 0;
  return b;
}

} // namespace helm::chat::py
