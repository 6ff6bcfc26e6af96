//===- Lexer.cpp - template text to tokens, with jinja2's whitespace rules ------------===//
//
// Reproduces jinja2 3.1's lexer (jinja2/lexer.py) for the environment transformers uses
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off, default delimiters):
//   - "\r\n" and "\r" become "\n", and one trailing newline of the source is dropped;
//   - text before `{%-`, `{{-`, `{#-` loses its trailing whitespace; `-%}`, `-}}`, `-#}` eat the
//     whitespace after them;
//   - trim_blocks: `%}` and `#}` eat one "\n" right after them (not `}}`; `+%}` keeps it);
//   - lstrip_blocks: spaces and tabs between the start of a line and `{%` or `{#` are dropped
//     (not before `{{`; `{%+` keeps them). "Start of a line" includes the text right after a tag
//     that ended with a newline, as jinja2's `line_starting` does;
//   - inside tags, `%}`/`}}` only end the tag when no bracket is open (`{{ {'a': 1}}}`).
// Whitespace is Python's (str.isspace), which includes Unicode spaces.
//
//===----------------------------------------------------------------------------===//
#include "runtime/chat/Engine.h"
#include "runtime/chat/PythonText.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

namespace helm::chat {

namespace {

class Lexer {
public:
  explicit Lexer(llvm::StringRef source) {
    // jinja2 splits on \r\n, \r and \n and joins with \n, dropping one trailing empty line.
    text_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        text_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n')
          ++i;
      } else {
        text_ += source[i];
      }
    }
    if (!text_.empty() && text_.back() == '\n')
      text_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < text_.size()) {
      size_t tag = findTag(pos_);
      if (tag == llvm::StringRef::npos) {
        emitData(llvm::StringRef(text_).substr(pos_));
        break;
      }
      char opener = text_[tag + 1];
      if (opener == '%' && lexRawBlock(tag))
        continue;
      char sign = tag + 2 < text_.size() && (text_[tag + 2] == '-' || text_[tag + 2] == '+') ? text_[tag + 2] : 0;
      emitTextBeforeTag(llvm::StringRef(text_).slice(pos_, tag), sign, opener == '{');
      pos_ = tag + 2 + (sign ? 1 : 0);
      lineStarting_ = false;
      if (opener == '#')
        lexComment();
      else
        lexTag(opener == '%');
    }
    tokens_.push_back(Token{TokenKind::End, "", line_});
    return std::move(tokens_);
  }

private:
  bool startsWith(size_t at, llvm::StringRef s) const { return llvm::StringRef(text_).substr(at).starts_with(s); }

  size_t findTag(size_t from) const {
    for (size_t i = from; i + 1 < text_.size(); ++i)
      if (text_[i] == '{' && (text_[i + 1] == '{' || text_[i + 1] == '%' || text_[i + 1] == '#'))
        return i;
    return llvm::StringRef::npos;
  }

  // Python-whitespace length at `at` (0 if none), counting newlines and noting the last one.
  size_t spaceRun(size_t at, int *newlines = nullptr, char32_t *last = nullptr) const {
    size_t p = at;
    while (p < text_.size()) {
      size_t next = p;
      char32_t c = py::decodeAt(text_, next);
      if (!py::isSpace(c))
        break;
      if (c == '\n' && newlines)
        ++*newlines;
      if (last)
        *last = c;
      p = next;
    }
    return p - at;
  }


  void emitData(llvm::StringRef data) {
    if (!data.empty())
      tokens_.push_back(Token{TokenKind::Data, data.str(), line_});
    line_ += int(data.count('\n'));
  }

  static llvm::StringRef rstripPython(llvm::StringRef s) {
    size_t end = s.size();
    while (end > 0) {
      size_t start = end - 1;
      while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        --start;
      size_t p = start;
      if (!py::isSpace(py::decodeAt(s, p)))
        break;
      end = start;
    }
    return s.substr(0, end);
  }

  // The text between the previous tag and a `{{` / `{%` / `{#` with whitespace control `sign`.
  void emitTextBeforeTag(llvm::StringRef data, char sign, bool variable) {
    llvm::StringRef kept = data;
    if (sign == '-') {
      kept = rstripPython(data);
    } else if (sign != '+' && !variable) {
      size_t lineStart = data.rfind('\n') + 1; // npos + 1 == 0
      if (lineStart > 0 || lineStarting_) {
        llvm::StringRef tail = data.substr(lineStart);
        size_t p = 0;
        bool allSpace = !tail.empty();
        while (p < tail.size() && allSpace)
          allSpace = py::isSpace(py::decodeAt(tail, p));
        if (allSpace)
          kept = data.substr(0, lineStart);
      }
    }
    if (!kept.empty())
      tokens_.push_back(Token{TokenKind::Data, kept.str(), line_});
    line_ += int(data.count('\n'));
  }

  // `{% raw %}...{% endraw %}`: its text is data, whitespace control applied at both ends.
  bool lexRawBlock(size_t tag) {
    size_t p = tag + 2;
    char sign = 0;
    if (p < text_.size() && (text_[p] == '-' || text_[p] == '+'))
      sign = text_[p++];
    p += spaceRun(p);
    if (!startsWith(p, "raw"))
      return false;
    p += 3;
    p += spaceRun(p);
    size_t end;
    char32_t last = 0;
    int newlines = 0;
    if (startsWith(p, "-%}")) {
      end = p + 3;
      last = '}';
      end += spaceRun(end, &newlines, &last);
    } else if (startsWith(p, "%}")) {
      end = p + 2;
      last = '}';
    } else {
      return false;
    }
    emitTextBeforeTag(llvm::StringRef(text_).slice(pos_, tag), sign, false);
    line_ += int(llvm::StringRef(text_).slice(tag, end).count('\n'));
    pos_ = end;
    lineStarting_ = last == '\n';
    // The first `{%[-+]? endraw [-+]?%}` after it.
    for (size_t q = pos_; q + 1 < text_.size(); ++q) {
      if (text_[q] != '{' || text_[q + 1] != '%')
        continue;
      size_t r = q + 2;
      char endSign = 0;
      if (r < text_.size() && (text_[r] == '-' || text_[r] == '+'))
        endSign = text_[r++];
      r += spaceRun(r);
      if (!startsWith(r, "endraw"))
        continue;
      r += 6;
      r += spaceRun(r);
      size_t close;
      char32_t closeLast = '}';
      if (startsWith(r, "+%}")) {
        close = r + 3;
      } else if (startsWith(r, "-%}")) {
        close = r + 3;
        close += spaceRun(close, nullptr, &closeLast);
      } else if (startsWith(r, "%}")) {
        close = r + 2;
        if (close < text_.size() && text_[close] == '\n') {
          ++close;
          closeLast = '\n';
        }
      } else {
        continue;
      }
      emitTextBeforeTag(llvm::StringRef(text_).slice(pos_, q), endSign, false);
      line_ += int(llvm::StringRef(text_).slice(q, close).count('\n'));
      pos_ = close;
      lineStarting_ = closeLast == '\n';
      return true;
    }
    fail("missing end of raw directive", line_);
  }

  void lexComment() {
    for (size_t q = pos_; q + 1 < text_.size(); ++q) {
      size_t close;
      char32_t last = '}';
      if (startsWith(q, "+#}")) {
        close = q + 3;
      } else if (startsWith(q, "-#}")) {
        close = q + 3;
        close += spaceRun(close, nullptr, &last);
      } else if (startsWith(q, "#}")) {
        close = q + 2;
        if (close < text_.size() && text_[close] == '\n') {
          ++close;
          last = '\n';
        }
      } else {
        continue;
      }
      line_ += int(llvm::StringRef(text_).slice(pos_, close).count('\n'));
      pos_ = close;
      lineStarting_ = last == '\n';
      return;
    }
    fail("missing end of comment tag", line_);
  }

  // Tokens of a `{% ... %}` or `{{ ... }}` until its end; at the end of the text the tokens just
  // stop (the parser reports the unclosed tag).
  void lexTag(bool block) {
    tokens_.push_back(Token{block ? TokenKind::BlockBegin : TokenKind::VariableBegin, "", line_});
    std::vector<char> open;
    while (pos_ < text_.size()) {
      if (open.empty() && lexTagEnd(block))
        return;
      int newlines = 0;
      if (size_t n = spaceRun(pos_, &newlines)) {
        pos_ += n;
        line_ += newlines;
        continue;
      }
      if (lexNumber() || lexName() || lexString())
        continue;
      lexOperator(open);
    }
  }

  bool lexTagEnd(bool block) {
    size_t close;
    char32_t last = '}';
    if (block && startsWith(pos_, "+%}")) {
      close = pos_ + 3;
    } else if (startsWith(pos_, block ? "-%}" : "-}}")) {
      close = pos_ + 3;
      close += spaceRun(close, nullptr, &last);
    } else if (startsWith(pos_, block ? "%}" : "}}")) {
      close = pos_ + 2;
      if (block && close < text_.size() && text_[close] == '\n') {
        ++close;
        last = '\n';
      }
    } else {
      return false;
    }
    tokens_.push_back(Token{block ? TokenKind::BlockEnd : TokenKind::VariableEnd, "", line_});
    line_ += int(llvm::StringRef(text_).slice(pos_, close).count('\n'));
    pos_ = close;
    lineStarting_ = last == '\n';
    return true;
  }

  // (\d+_)*\d+ starting at p: its end, or p when there is no digit.
  size_t digitRun(size_t p, bool (*isDigit)(char)) const {
    size_t q = p;
    if (q >= text_.size() || !isDigit(text_[q]))
      return p;
    while (true) {
      while (q < text_.size() && isDigit(text_[q]))
        ++q;
      if (q + 1 < text_.size() && text_[q] == '_' && isDigit(text_[q + 1]))
        ++q;
      else
        return q;
    }
  }
  static bool isDecimal(char c) { return c >= '0' && c <= '9'; }
  static bool isBinary(char c) { return c == '0' || c == '1'; }
  static bool isOctal(char c) { return c >= '0' && c <= '7'; }
  static bool isHex(char c) { return llvm::isHexDigit(c); }
  static bool isZero(char c) { return c == '0'; }

  size_t exponentEnd(size_t p) const {
    if (p >= text_.size() || (text_[p] != 'e' && text_[p] != 'E'))
      return 0;
    size_t q = p + 1;
    if (q < text_.size() && (text_[q] == '+' || text_[q] == '-'))
      ++q;
    size_t end = digitRun(q, isDecimal);
    return end == q ? 0 : end;
  }

  bool lexNumber() {
    if (!isDecimal(text_[pos_]))
      return false;
    size_t intEnd = digitRun(pos_, isDecimal);
    // Float (not right after a '.', so that `x.0.1` is two item lookups): a fraction and/or an
    // exponent.
    if (pos_ == 0 || text_[pos_ - 1] != '.') {
      size_t fractionEnd = 0;
      if (intEnd < text_.size() && text_[intEnd] == '.') {
        size_t f = digitRun(intEnd + 1, isDecimal);
        if (f != intEnd + 1)
          fractionEnd = f;
      }
      size_t end = 0;
      if (fractionEnd)
        end = exponentEnd(fractionEnd);
      if (!end)
        end = exponentEnd(intEnd);
      if (!end)
        end = fractionEnd;
      if (end) {
        std::string literal;
        for (char c : llvm::StringRef(text_).slice(pos_, end))
          if (c != '_')
            literal += c;
        tokens_.push_back(Token{TokenKind::Float, literal, line_, 0, std::strtod(literal.c_str(), nullptr)});
        pos_ = end;
        return true;
      }
    }
    // Integer: 0b / 0o / 0x prefixes, a decimal without leading zeros, or zeros.
    size_t end = 0;
    unsigned base = 10;
    size_t digitsFrom = pos_;
    if (text_[pos_] == '0' && pos_ + 1 < text_.size()) {
      char prefix = char(llvm::toLower(text_[pos_ + 1]));
      auto prefixed = [&](bool (*isDigit)(char), unsigned b) {
        size_t q = pos_ + 2;
        while (true) {
          if (q < text_.size() && isDigit(text_[q]))
            ++q;
          else if (q + 1 < text_.size() && text_[q] == '_' && isDigit(text_[q + 1]))
            q += 2;
          else
            break;
        }
        if (q > pos_ + 2) {
          end = q;
          base = b;
          digitsFrom = pos_ + 2;
        }
      };
      if (prefix == 'b')
        prefixed(isBinary, 2);
      else if (prefix == 'o')
        prefixed(isOctal, 8);
      else if (prefix == 'x')
        prefixed(isHex, 16);
    }
    if (!end)
      end = text_[pos_] == '0' ? digitRun(pos_, isZero) : intEnd;
    if (text_[pos_] == '0' && !end)
      end = pos_ + 1;
    uint64_t value = 0;
    for (char c : llvm::StringRef(text_).slice(digitsFrom, end)) {
      if (c == '_')
        continue;
      unsigned digit = isDecimal(c) ? unsigned(c - '0') : unsigned(llvm::toLower(c) - 'a' + 10);
      if (value > (uint64_t(INT64_MAX) - digit) / base)
        fail("integer literal '" + llvm::StringRef(text_).slice(pos_, end).str() + "' is too large", line_);
      value = value * base + digit;
    }
    tokens_.push_back(Token{TokenKind::Integer, llvm::StringRef(text_).slice(pos_, end).str(), line_, int64_t(value)});
    pos_ = end;
    return true;
  }

  bool lexName() {
    char c = text_[pos_];
    if (!(llvm::isAlpha(c) || c == '_'))
      return false;
    size_t end = pos_ + 1;
    while (end < text_.size() && (llvm::isAlnum(text_[end]) || text_[end] == '_'))
      ++end;
    tokens_.push_back(Token{TokenKind::Name, text_.substr(pos_, end - pos_), line_});
    pos_ = end;
    return true;
  }

  bool lexString() {
    char quote = text_[pos_];
    if (quote != '\'' && quote != '"')
      return false;
    size_t p = pos_ + 1;
    while (p < text_.size() && text_[p] != quote)
      p += text_[p] == '\\' ? 2 : 1;
    if (p >= text_.size())
      return false; // no closing quote: an unexpected character, as in jinja2
    llvm::StringRef body = llvm::StringRef(text_).slice(pos_ + 1, p);
    tokens_.push_back(Token{TokenKind::String, decodeStringLiteral(body), line_});
    line_ += int(body.count('\n'));
    pos_ = p + 1;
    return true;
  }

  // jinja2: value.encode("ascii", "backslashreplace").decode("unicode-escape"). Non-ASCII code
  // points pass through (even after a backslash, where Python keeps the backslash).
  std::string decodeStringLiteral(llvm::StringRef body) {
    std::string out;
    size_t i = 0;
    auto hexValue = [&](size_t digits, const char *what) {
      uint32_t v = 0;
      for (size_t k = 0; k < digits; ++k) {
        if (i + k >= body.size() || !llvm::isHexDigit(body[i + k]))
          fail(std::string("truncated ") + what + " escape in a string literal", line_);
        v = v * 16 + llvm::hexDigitValue(body[i + k]);
      }
      i += digits;
      return v;
    };
    auto appendCodePoint = [&](uint32_t c) {
      if (c > 0x10FFFF)
        fail("illegal Unicode character in a string literal", line_);
      if (c >= 0xD800 && c <= 0xDFFF)
        fail("a string literal names a surrogate code point (not text)", line_);
      py::appendUtf8(out, c);
    };
    while (i < body.size()) {
      char c = body[i];
      if (c != '\\') {
        size_t next = i;
        py::decodeAt(body, next);
        out.append(body.data() + i, next - i);
        i = next;
        continue;
      }
      if (i + 1 >= body.size())
        fail("\\ at end of a string literal", line_);
      char e = body[i + 1];
      i += 2;
      switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': appendCodePoint(hexValue(2, "\\xXX")); break;
      case 'u': appendCodePoint(hexValue(4, "\\uXXXX")); break;
      case 'U': appendCodePoint(hexValue(8, "\\UXXXXXXXX")); break;
      case 'N': fail("unsupported \\N{...} escape in a string literal", line_);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = uint32_t(e - '0');
          for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k)
            v = v * 8 + uint32_t(body[i++] - '0');
          appendCodePoint(v);
        } else {
          // An unknown escape keeps its backslash. After a backslash, a non-ASCII character became
          // \xhh, \uhhhh or \Uhhhhhhhh text in the first step, and "\\" + that text decodes to a
          // backslash and the escape's letters.
          out += '\\';
          if (static_cast<unsigned char>(e) >= 0x80) {
            size_t start = i - 1;
            char32_t point = py::decodeAt(body, start);
            char escape[16];
            if (point <= 0xFF)
              std::snprintf(escape, sizeof escape, "\\x%02x", unsigned(point));
            else if (point <= 0xFFFF)
              std::snprintf(escape, sizeof escape, "\\u%04x", unsigned(point));
            else
              std::snprintf(escape, sizeof escape, "\\U%08x", unsigned(point));
            out += escape + 1; // the first backslash pairs with ours: "\\" -> "\"
            i = start;
          } else {
            out += e;
          }
        }
      }
    }
    return out;
  }

  void lexOperator(std::vector<char> &open) {
    static const char *const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char *op : kTwo)
      if (startsWith(pos_, op)) {
        tokens_.push_back(Token{TokenKind::Operator, op, line_});
        pos_ += 2;
        return;
      }
    char c = text_[pos_];
    if (!llvm::StringRef("+-/*%~[](){}><=.:|,;").contains(c)) {
      size_t p = pos_;
      char32_t point = py::decodeAt(text_, p);
      std::string shown;
      py::appendUtf8(shown, point);
      fail("unexpected character " + py::repr(shown) + " in a tag", line_);
    }
    if (c == '(' || c == '[' || c == '{') {
      open.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (open.empty())
        fail(std::string("unexpected '") + c + "'", line_);
      if (open.back() != c)
        fail(std::string("unexpected '") + c + "', expected '" + open.back() + "'", line_);
      open.pop_back();
    }
    tokens_.push_back(Token{TokenKind::Operator, std::string(1, c), line_});
    ++pos_;
  }

  std::string text_;
  size_t pos_ = 0;
  int line_ = 1;
  bool lineStarting_ = true;
  std::vector<Token> tokens_;
};

} // namespace

[[noreturn]] void fail(const std::string &message, int line) { throw TemplateError{message, line}; }

std::vector<Token> tokenize(llvm::StringRef source) { return Lexer(source).run(); }

} // namespace helm::chat
