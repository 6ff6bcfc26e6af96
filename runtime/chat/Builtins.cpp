//===- Builtins.cpp - filters, tests, globals and methods ------------------------------===//
//
// Each follows jinja2 3.1's definition (jinja2/filters.py, tests.py), transformers' globals and
// tojson, and Python's str / dict / list methods; where Python would raise, these fail with the
// message Python gives. Filters that return generators in jinja2 (map, select, reject, selectattr,
// rejectattr, unique, items, reverse of a list) return one-pass iterators here too: they are always
// true, have no length, and a second loop over them sees nothing, as in jinja2.
//
//===----------------------------------------------------------------------------===//
#include "runtime/chat/Engine.h"
#include "runtime/chat/PythonText.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>

namespace helm::chat {

namespace {

using Keywords = std::vector<std::pair<std::string, Value>>;

// Binds a call's arguments to named parameters, as Python does.
class Arguments {
public:
  Arguments(llvm::StringRef function, std::vector<Value> &positional, Keywords &keywords,
            std::initializer_list<llvm::StringRef> names, int line)
      : function_(function.str()), names_(names), slots_(names.size()), line_(line) {
    if (positional.size() > names_.size())
      fail(function_ + "() takes at most " + std::to_string(names_.size()) + " argument(s) (" +
               std::to_string(positional.size()) + " given)",
           line);
    for (size_t i = 0; i < positional.size(); ++i)
      slots_[i] = positional[i];
    for (auto &[name, value] : keywords) {
      auto it = llvm::find(names_, llvm::StringRef(name));
      if (it == names_.end())
        fail(function_ + "() got an unexpected keyword argument '" + name + "'", line);
      size_t index = size_t(it - names_.begin());
      if (slots_[index])
        fail(function_ + "() got multiple values for argument '" + name + "'", line);
      slots_[index] = value;
    }
  }
  bool has(size_t i) const { return slots_[i].has_value(); }
  Value get(size_t i, const Value &fallback) const { return slots_[i] ? *slots_[i] : fallback; }
  const Value &required(size_t i) const {
    if (!slots_[i])
      fail(function_ + "() missing required argument '" + names_[i].str() + "'", line_);
    return *slots_[i];
  }
  int64_t integer(size_t i, int64_t fallback) const {
    if (!slots_[i] || slots_[i]->isNone())
      return fallback;
    const Value &v = *slots_[i];
    if (v.kind() == Value::Kind::Int)
      return v.asInt();
    if (v.kind() == Value::Kind::Bool)
      return v.asBool();
    fail(function_ + "(): '" + typeName(v) + "' object cannot be interpreted as an integer", line_);
  }
  bool boolean(size_t i, bool fallback) const { return slots_[i] ? truthy(*slots_[i]) : fallback; }
  // A str argument, or nullopt when absent or None.
  std::optional<std::string> text(size_t i) const {
    if (!slots_[i] || slots_[i]->isNone())
      return std::nullopt;
    if (!slots_[i]->isString())
      fail(function_ + "() argument must be str or None, not " + typeName(*slots_[i]), line_);
    return slots_[i]->asString().str();
  }

private:
  std::string function_;
  std::vector<llvm::StringRef> names_;
  std::vector<std::optional<Value>> slots_;
  int line_;
};

// A step per 16 bytes of the strings a filter, test or method reads (its value and arguments):
// what keeps a loop over a long text's length, case or search from running for minutes.
void chargeText(Renderer &r, const Value &value, const std::vector<Value> &pos, const Keywords &kw, int line) {
  size_t bytes = value.isString() ? value.asString().size() : 0;
  for (const Value &v : pos)
    bytes += v.isString() ? v.asString().size() : 0;
  for (const auto &[name, v] : kw)
    bytes += v.isString() ? v.asString().size() : 0;
  r.chargeSteps(bytes / 16, line);
}

Value iteratorOf(std::vector<Value> items, std::string typeName) {
  auto it = std::make_shared<IteratorObject>();
  it->items = std::move(items);
  it->typeName = std::move(typeName);
  return Value::fromObject(Value::Kind::Iterator, std::move(it));
}


// jinja2's soft_str: strings (markup included) as they are, anything else through str().
Value softStr(Renderer &r, const Value &v, int line) {
  if (v.isString())
    return v;
  return r.makeString(toStr(v), line);
}

// A string result that keeps the markup-ness of `like` (markupsafe's wrapped str methods).
Value sameKind(Renderer &r, const Value &like, std::string text, int line) {
  Value v = r.makeString(std::move(text), line);
  return like.isMarkup() ? markup(v.asString().str()) : v;
}

std::string requireStr(const Value &v, llvm::StringRef what, int line) {
  if (v.isUndefined())
    failUndefined(v, line);
  if (!v.isString())
    fail(what.str() + " must be str, not " + typeName(v), line);
  return v.asString().str();
}

//===--- strftime -----------------------------------------------------------===//

std::string strftimeNow(const RenderOptions &options, llvm::StringRef format, int line) {
  std::tm tm{};
  if (options.now) {
    tm = *options.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (format.contains('\0'))
    fail("embedded null character in strftime_now's format", line);
  if (format.size() > 4096)
    fail("strftime_now's format is longer than 4096 bytes", line);
  // datetime.strftime on a naive datetime: %f is the microseconds, %z and %Z are empty.
  std::string prepared;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      char d = format[i + 1];
      if (d == 'f') {
        prepared += "000000";
        ++i;
        continue;
      }
      if (d == 'z' || d == 'Z') {
        ++i;
        continue;
      }
      prepared += format[i];
      prepared += format[++i];
      continue;
    }
    prepared += format[i];
  }
  prepared += '.'; // strftime returns 0 both for an empty result and for a full buffer
  std::vector<char> buffer(prepared.size() * 64 + 256);
  size_t n = std::strftime(buffer.data(), buffer.size(), prepared.c_str(), &tm);
  if (n == 0)
    fail("strftime_now's result is too long", line);
  return std::string(buffer.data(), n - 1);
}

//===--- Python's % and str.format ------------------------------------------===//

} // namespace

// printf-style "%s %d" % args, for the conversions templates use (s, r, d, i, f, x, %).
std::string pythonPercentFormat(Renderer &renderer, llvm::StringRef format, const Value &arguments, int line) {
  // As PyUnicode_Format: a tuple holds the arguments; anything else is the one argument, and one
  // with __getitem__ (a dict, a list, an undefined) may also go unused; %(name)s looks names up
  // in a dict.
  std::vector<Value> args;
  bool tuple = arguments.isTuple();
  bool mappingLike = !tuple && (arguments.isDict() || arguments.isList() || arguments.isUndefined());
  if (tuple)
    args.assign(arguments.items().begin(), arguments.items().end());
  else
    args.push_back(arguments);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++i >= format.size())
      fail("incomplete format", line);
    Value arg;
    bool named = false;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == llvm::StringRef::npos)
        fail("incomplete format key", line);
      if (!arguments.isDict())
        fail("format requires a mapping", line);
      const Value *found = arguments.find(format.slice(i + 1, close));
      if (!found)
        fail("KeyError: " + py::repr(format.slice(i + 1, close)), line);
      arg = *found;
      named = true;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && llvm::StringRef("-+ #0").contains(format[i]))
      flags += format[i++];
    std::string width, precision;
    while (i < format.size() && llvm::isDigit(format[i]))
      width += format[i++];
    if (i < format.size() && format[i] == '.') {
      ++i;
      while (i < format.size() && llvm::isDigit(format[i]))
        precision += format[i++];
    }
    if (width.size() > 4 || precision.size() > 3)
      fail("unsupported: a %-format width or precision this large", line);
    if (i >= format.size())
      fail("incomplete format", line);
    char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (!named) {
      if (next >= args.size())
        fail("not enough arguments for format string", line);
      arg = args[next++];
    }
    std::string spec = "%" + flags + width + (precision.empty() ? "" : "." + precision);
    // printf into `out` whatever the width (up to 9999) and precision (up to 999) make it.
    auto printed = [&](const std::string &format, auto value) {
      int n = std::snprintf(nullptr, 0, format.c_str(), value);
      if (n < 0)
        fail("unsupported %-format '" + format + "'", line);
      size_t at = out.size();
      out.resize(at + size_t(n) + 1);
      std::snprintf(&out[at], size_t(n) + 1, format.c_str(), value);
      out.resize(at + size_t(n));
    };
    const size_t before = out.size();
    switch (conversion) {
    case 's':
    case 'r': {
      std::string text = conversion == 's' ? toStr(arg) : toRepr(arg);
      if (!precision.empty()) // Python's precision counts code points
        text = py::fromCodePoints([&] {
          std::vector<char32_t> points = py::codePoints(text);
          points.resize(std::min(points.size(), size_t(std::stoul(precision))));
          return points;
        }());
      size_t w = width.empty() ? 0 : std::stoul(width);
      size_t len = py::length(text);
      if (len < w)
        text = flags.find('-') != std::string::npos ? text + std::string(w - len, ' ') : std::string(w - len, ' ') + text;
      out += text;
      break;
    }
    case 'd':
    case 'i':
    case 'x':
    case 'X':
    case 'o': {
      int64_t v;
      if (isIntLike(arg))
        v = intOf(arg);
      else if (arg.kind() == Value::Kind::Float && std::isfinite(arg.asFloat()) && std::fabs(arg.asFloat()) < 9e18)
        v = int64_t(arg.asFloat());
      else
        fail(std::string("%") + conversion + " format: a real number is required, not " + typeName(arg), line);
      printed(spec + "ll" + (conversion == 'i' ? 'd' : conversion), static_cast<long long>(v));
      break;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      double v;
      if (isIntLike(arg))
        v = double(intOf(arg));
      else if (arg.kind() == Value::Kind::Float)
        v = arg.asFloat();
      else
        fail(std::string("must be real number, not ") + typeName(arg), line);
      printed(spec + conversion, v);
      break;
    }
    default:
      fail(std::string("unsupported format character '") + conversion + "'", line);
    }
    renderer.chargeBytes(out.size() - before, line);
    if (out.size() > renderer.options().maxOutputBytes)
      fail("a formatted string passes the output limit", line);
  }
  if (next < args.size() && !mappingLike)
    fail("not all arguments converted during string formatting", line);
  return out;
}

namespace {

// str.format with {} / {0} / {name} fields, !s / !r conversions and no format specs beyond an
// empty one (templates use it for plain substitution).
std::string pythonStrFormat(Renderer &r, llvm::StringRef format, const std::vector<Value> &args, const Keywords &keywords,
                            int line) {
  std::string out;
  size_t automatic = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string", line);
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == llvm::StringRef::npos)
      fail("Single '{' encountered in format string", line);
    llvm::StringRef field = format.slice(i + 1, close);
    i = close;
    char conversion = 's';
    size_t bang = field.find('!');
    size_t colon = field.find(':');
    if (colon != llvm::StringRef::npos && field.substr(colon + 1).size())
      fail("unsupported: a format spec in str.format ('" + field.str() + "')", line);
    llvm::StringRef name = field.substr(0, std::min(bang, colon));
    if (bang != llvm::StringRef::npos && bang + 1 < field.size())
      conversion = field[bang + 1];
    if (name.contains('.') || name.contains('['))
      fail("unsupported: attribute or index lookup in str.format ('" + field.str() + "')", line);
    Value arg;
    if (name.empty()) {
      if (automatic >= args.size())
        fail("Replacement index " + std::to_string(automatic) + " out of range for positional args tuple", line);
      arg = args[automatic++];
    } else if (llvm::all_of(name, llvm::isDigit)) {
      size_t index;
      if (name.getAsInteger(10, index) || index >= args.size())
        fail("Replacement index " + name.str() + " out of range for positional args tuple", line);
      arg = args[index];
    } else {
      auto it = llvm::find_if(keywords, [&](const auto &k) { return k.first == name; });
      if (it == keywords.end())
        fail("KeyError: '" + name.str() + "'", line);
      arg = it->second;
    }
    out += conversion == 'r' ? toRepr(arg) : toStr(arg);
    if (out.size() > r.options().maxOutputBytes)
      fail("a formatted string passes the output limit", line);
  }
  return out;
}

//===--- methods ------------------------------------------------------------===//

constexpr llvm::StringLiteral kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
    "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
    "lstrip", "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex",
    "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
    "title", "translate", "upper", "zfill"};
constexpr llvm::StringLiteral kDictMethods[] = {"clear", "copy", "fromkeys", "get", "items", "keys", "pop",
                                                "popitem", "setdefault", "update", "values"};
constexpr llvm::StringLiteral kListMethods[] = {"append", "clear", "copy", "count", "extend", "index",
                                                "insert", "pop", "remove", "reverse", "sort"};
constexpr llvm::StringLiteral kTupleMethods[] = {"count", "index"};

bool listed(llvm::ArrayRef<llvm::StringLiteral> list, llvm::StringRef name) {
  return llvm::any_of(list, [&](llvm::StringRef s) { return s == name; });
}

// Python's str.splitlines boundaries (more lines than a list may hold: an error).
std::vector<std::string> splitLines(llvm::StringRef text, bool keepEnds) {
  std::vector<std::string> lines;
  std::string current;
  for (size_t pos = 0; pos < text.size();) {
    if (lines.size() > kMaxListItems)
      fail("a list passes the limit of " + std::to_string(kMaxListItems) + " items");
    size_t start = pos;
    char32_t c = py::decodeAt(text, pos);
    bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                    c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) {
      current.append(text.data() + start, pos - start);
      continue;
    }
    if (c == '\r' && pos < text.size() && text[pos] == '\n')
      ++pos;
    if (keepEnds)
      current.append(text.data() + start, pos - start);
    lines.push_back(std::move(current));
    current.clear();
  }
  if (!current.empty())
    lines.push_back(std::move(current));
  return lines;
}

// Code-point offsets for str.find/count's optional start and end.
std::pair<size_t, size_t> byteRange(llvm::StringRef text, const Arguments &a, size_t startIndex) {
  int64_t n = int64_t(py::length(text));
  py::SliceBounds b = py::sliceIndices(n, a.has(startIndex) && !a.get(startIndex, Value()).isNone()
                                              ? std::optional<int64_t>(a.integer(startIndex, 0))
                                              : std::nullopt,
                                       a.has(startIndex + 1) && !a.get(startIndex + 1, Value()).isNone()
                                           ? std::optional<int64_t>(a.integer(startIndex + 1, n))
                                           : std::nullopt,
                                       1);
  int64_t start = b.start, stop = std::max(b.start, b.stop);
  // Code-point index -> byte offset.
  size_t byte = 0, index = 0, startByte = text.size(), stopByte = text.size();
  while (true) {
    if (int64_t(index) == start)
      startByte = byte;
    if (int64_t(index) == stop) {
      stopByte = byte;
      break;
    }
    if (byte >= text.size())
      break;
    py::decodeAt(text, byte);
    ++index;
  }
  if (startByte > stopByte)
    startByte = stopByte;
  return {startByte, stopByte};
}

size_t codePointIndex(llvm::StringRef text, size_t byte) { return py::length(text.substr(0, byte)); }

std::string center(llvm::StringRef text, int64_t width, llvm::StringRef fill, bool left, bool right) {
  int64_t len = int64_t(py::length(text));
  if (width <= len)
    return text.str();
  int64_t margin = width - len;
  int64_t before = left && right ? margin / 2 + (margin & width & 1) : right ? margin : 0;
  int64_t after = margin - before;
  std::string out;
  for (int64_t i = 0; i < before; ++i)
    out += fill;
  out += text;
  for (int64_t i = 0; i < after; ++i)
    out += fill;
  return out;
}

//===--- filter and method tables -------------------------------------------===//

// One call of a filter or a str method: what its function is given.
struct BuiltinCall {
  Renderer &r;
  llvm::StringRef name; // as called: the names that share a function differ only by it
  const Value &value;   // the filtered value, or the method's self
  std::vector<Value> &pos;
  Keywords &kw;
  int line;
};

using Builtin = Value (*)(const BuiltinCall &);

struct NamedBuiltin {
  std::string_view name;
  Builtin body;
};

// Tables are sorted by name, each name once: checked at compile time.
template <size_t N> constexpr bool sortedByName(const NamedBuiltin (&table)[N]) {
  for (size_t i = 1; i < N; ++i)
    if (!(table[i - 1].name < table[i].name))
      return false;
  return true;
}

// The function of `name` in a table sorted by name, or null.
Builtin lookup(llvm::ArrayRef<NamedBuiltin> table, llvm::StringRef name) {
  std::string_view key(name.data(), name.size());
  auto it = std::lower_bound(table.begin(), table.end(), key,
                             [](const NamedBuiltin &entry, std::string_view k) { return entry.name < k; });
  return it != table.end() && it->name == key ? it->body : nullptr;
}

//===--- str methods --------------------------------------------------------===//

// "str.strip": how Python names the method in its errors.
std::string strMethodName(const BuiltinCall &c) { return "str." + c.name.str(); }

// strip / lstrip / rstrip: the code points of `chars` (whitespace without it) off the given ends.
Value stripEnds(const BuiltinCall &c, bool left, bool right) {
  Arguments a(strMethodName(c), c.pos, c.kw, {"chars"}, c.line);
  std::optional<std::string> set = a.text(0);
  std::optional<llvm::StringRef> setRef;
  if (set)
    setRef = *set;
  return sameKind(c.r, c.value, py::strip(c.value.asString(), setRef, left, right), c.line);
}
Value strStrip(const BuiltinCall &c) { return stripEnds(c, true, true); }
Value strLstrip(const BuiltinCall &c) { return stripEnds(c, true, false); }
Value strRstrip(const BuiltinCall &c) { return stripEnds(c, false, true); }

// split / rsplit: at most maxsplit cuts at `sep`, or at runs of whitespace without it (then
// no empty pieces); rsplit counts its cuts from the end.
Value splitAt(const BuiltinCall &c, bool fromEnd) {
  Arguments a(strMethodName(c), c.pos, c.kw, {"sep", "maxsplit"}, c.line);
  std::optional<std::string> sep = a.text(0);
  if (sep && sep->empty())
    fail("empty separator", c.line);
  std::optional<llvm::StringRef> sepRef;
  if (sep)
    sepRef = *sep;
  // Capped so that a split into more pieces than a list may hold stops early.
  int64_t maxSplit = a.integer(1, -1);
  if (maxSplit < 0 || maxSplit > int64_t(kMaxListItems))
    maxSplit = int64_t(kMaxListItems);
  llvm::StringRef text = c.value.asString();
  std::vector<std::string> parts = fromEnd ? py::rsplit(text, sepRef, maxSplit) : py::split(text, sepRef, maxSplit);
  if (parts.size() > kMaxListItems)
    fail("a list passes the limit of " + std::to_string(kMaxListItems) + " items", c.line);
  std::vector<Value> items;
  for (std::string &p : parts)
    items.push_back(sameKind(c.r, c.value, std::move(p), c.line));
  return c.r.makeList(std::move(items), false, c.line);
}
Value strSplit(const BuiltinCall &c) { return splitAt(c, false); }
Value strRsplit(const BuiltinCall &c) { return splitAt(c, true); }

Value strSplitlines(const BuiltinCall &c) {
  Arguments a(strMethodName(c), c.pos, c.kw, {"keepends"}, c.line);
  std::vector<Value> items;
  for (std::string &p : splitLines(c.value.asString(), a.boolean(0, false)))
    items.push_back(sameKind(c.r, c.value, std::move(p), c.line));
  return c.r.makeList(std::move(items), false, c.line);
}

// startswith / endswith: the affix (or any of a tuple of them) at that end of text[start:end].
Value hasAffix(const BuiltinCall &c, bool prefix) {
  std::string fn = strMethodName(c);
  Arguments a(fn, c.pos, c.kw, {"prefix", "start", "end"}, c.line);
  const Value &affix = a.required(0);
  llvm::StringRef text = c.value.asString();
  auto [begin, end] = byteRange(text, a, 1);
  llvm::StringRef window = text.slice(begin, end);
  auto matches = [&](const Value &v) {
    std::string s = requireStr(v, fn + " first arg", c.line);
    return prefix ? window.starts_with(s) : window.ends_with(s);
  };
  if (affix.isTuple())
    return Value::boolean(llvm::any_of(affix.items(), matches));
  return Value::boolean(matches(affix));
}
Value strStartswith(const BuiltinCall &c) { return hasAffix(c, true); }
Value strEndswith(const BuiltinCall &c) { return hasAffix(c, false); }

// upper / lower / title / capitalize / swapcase read no arguments (nor check for any).
Value strUpper(const BuiltinCall &c) { return sameKind(c.r, c.value, py::upper(c.value.asString()), c.line); }
Value strLower(const BuiltinCall &c) { return sameKind(c.r, c.value, py::lower(c.value.asString()), c.line); }
Value strTitle(const BuiltinCall &c) { return sameKind(c.r, c.value, py::title(c.value.asString()), c.line); }
Value strCapitalize(const BuiltinCall &c) {
  return sameKind(c.r, c.value, py::capitalize(c.value.asString()), c.line);
}

Value strSwapcase(const BuiltinCall &c) {
  llvm::StringRef text = c.value.asString();
  std::string out;
  for (size_t p = 0; p < text.size();) {
    size_t start = p;
    char32_t ch = py::decodeAt(text, p);
    std::string one(text.data() + start, p - start);
    out += py::isUpperChar(ch) ? py::lower(one) : py::isLowerChar(ch) ? py::upper(one) : one;
  }
  return sameKind(c.r, c.value, std::move(out), c.line);
}

// On markup, markupsafe escapes the arguments that are not markup themselves.
Value strReplace(const BuiltinCall &c) {
  Renderer &r = c.r;
  llvm::StringRef text = c.value.asString();
  Arguments a(strMethodName(c), c.pos, c.kw, {"old", "new", "count"}, c.line);
  std::string old = requireStr(a.required(0), "replace() argument 1", c.line);
  std::string replacement = requireStr(a.required(1), "replace() argument 2", c.line);
  if (c.value.isMarkup()) {
    if (!a.required(0).isMarkup())
      old = htmlEscape(old);
    if (!a.required(1).isMarkup())
      replacement = htmlEscape(replacement);
  }
  int64_t count = a.integer(2, -1);
  if (old.empty() && !replacement.empty() &&
      (py::length(text) + 1) > r.options().maxOutputBytes / replacement.size())
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  if (!old.empty() && replacement.size() > old.size() &&
      py::count(text, old) > r.options().maxOutputBytes / (replacement.size() - old.size() + 1))
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  return sameKind(r, c.value, py::replace(text, old, replacement, count), c.line);
}

// find / rfind / index / rindex: the code-point index of the first (last) `sub` in
// text[start:end]; when there is none, find gives -1 and index raises.
Value search(const BuiltinCall &c, bool fromEnd, bool raises) {
  llvm::StringRef text = c.value.asString();
  Arguments a(strMethodName(c), c.pos, c.kw, {"sub", "start", "end"}, c.line);
  std::string sub = requireStr(a.required(0), "must be str", c.line);
  auto [begin, end] = byteRange(text, a, 1);
  llvm::StringRef window = text.slice(begin, end);
  size_t found = fromEnd ? py::rfind(window, sub) : py::find(window, sub);
  if (found == llvm::StringRef::npos) {
    if (raises)
      fail("substring not found", c.line);
    return Value::integer(-1);
  }
  return Value::integer(int64_t(codePointIndex(text, begin + found)));
}
Value strFind(const BuiltinCall &c) { return search(c, false, false); }
Value strRfind(const BuiltinCall &c) { return search(c, true, false); }
Value strIndex(const BuiltinCall &c) { return search(c, false, true); }
Value strRindex(const BuiltinCall &c) { return search(c, true, true); }

// Non-overlapping occurrences in text[start:end]; of an empty `sub`, one more than the code points.
Value strCount(const BuiltinCall &c) {
  llvm::StringRef text = c.value.asString();
  Arguments a(strMethodName(c), c.pos, c.kw, {"sub", "start", "end"}, c.line);
  std::string sub = requireStr(a.required(0), "must be str", c.line);
  auto [begin, end] = byteRange(text, a, 1);
  llvm::StringRef window = text.slice(begin, end);
  if (sub.empty())
    return Value::integer(int64_t(py::length(window)) + 1);
  return Value::integer(int64_t(py::count(window, sub)));
}

// Every item must be a str; a markup separator escapes the items that are not markup.
Value strJoin(const BuiltinCall &c) {
  Renderer &r = c.r;
  Arguments a(strMethodName(c), c.pos, c.kw, {"iterable"}, c.line);
  std::vector<Value> items = r.iterate(a.required(0), c.line);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].isString())
      fail("sequence item " + std::to_string(i) + ": expected str instance, " + typeName(items[i]) + " found",
           c.line);
    if (i)
      out += c.value.asString();
    out += c.value.isMarkup() && !items[i].isMarkup() ? htmlEscape(items[i].asString()) : items[i].asString().str();
    if (out.size() > r.options().maxOutputBytes)
      fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  }
  return sameKind(r, c.value, std::move(out), c.line);
}

Value strFormat(const BuiltinCall &c) {
  return sameKind(c.r, c.value, pythonStrFormat(c.r, c.value.asString(), c.pos, c.kw, c.line), c.line);
}

// center / ljust / rjust: padded with `fillchar` (one code point) to `width` code points;
// center puts the odd one on the right unless both width and margin are odd (CPython's rule).
Value pad(const BuiltinCall &c, bool left, bool right) {
  Renderer &r = c.r;
  Arguments a(strMethodName(c), c.pos, c.kw, {"width", "fillchar"}, c.line);
  int64_t width = a.integer(0, 0);
  std::string fill = a.has(1) ? requireStr(a.get(1, Value()), "fillchar", c.line) : " ";
  if (py::length(fill) != 1)
    fail("The fill character must be exactly one character long", c.line);
  if (width > int64_t(r.options().maxOutputBytes))
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  return sameKind(r, c.value, center(c.value.asString(), width, fill, left, right), c.line);
}
Value strCenter(const BuiltinCall &c) { return pad(c, true, true); }
Value strLjust(const BuiltinCall &c) { return pad(c, true, false); }
Value strRjust(const BuiltinCall &c) { return pad(c, false, true); }

// Zeros on the left to `width` code points, after a leading sign.
Value strZfill(const BuiltinCall &c) {
  Renderer &r = c.r;
  llvm::StringRef text = c.value.asString();
  Arguments a(strMethodName(c), c.pos, c.kw, {"width"}, c.line);
  int64_t width = a.integer(0, 0);
  if (width > int64_t(r.options().maxOutputBytes))
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  int64_t len = int64_t(py::length(text));
  if (width <= len)
    return c.value;
  std::string out = text.str();
  size_t at = !out.empty() && (out[0] == '+' || out[0] == '-') ? 1 : 0;
  out.insert(at, std::string(size_t(width - len), '0'));
  return sameKind(r, c.value, std::move(out), c.line);
}

// partition / rpartition: (before, sep, after) around the first (last) `sep`; without one, the
// whole string and two empty ones (the string last for rpartition).
Value partitionAt(const BuiltinCall &c, bool fromEnd) {
  Renderer &r = c.r;
  const Value &self = c.value;
  llvm::StringRef text = self.asString();
  Arguments a(strMethodName(c), c.pos, c.kw, {"sep"}, c.line);
  std::string sep = requireStr(a.required(0), "must be str", c.line);
  if (sep.empty())
    fail("empty separator", c.line);
  size_t found = fromEnd ? py::rfind(text, sep) : py::find(text, sep);
  std::vector<Value> parts;
  if (found == llvm::StringRef::npos) {
    if (!fromEnd)
      parts = {self, Value::string(""), Value::string("")};
    else
      parts = {Value::string(""), Value::string(""), self};
  } else {
    parts = {sameKind(r, self, text.substr(0, found).str(), c.line), sameKind(r, self, sep, c.line),
             sameKind(r, self, text.substr(found + sep.size()).str(), c.line)};
  }
  return r.makeList(std::move(parts), true, c.line);
}
Value strPartition(const BuiltinCall &c) { return partitionAt(c, false); }
Value strRpartition(const BuiltinCall &c) { return partitionAt(c, true); }

// removeprefix / removesuffix: the string without the affix, when it has it there.
Value removeAffix(const BuiltinCall &c, bool prefix) {
  Arguments a(strMethodName(c), c.pos, c.kw, {"affix"}, c.line);
  std::string affix = requireStr(a.required(0), "must be str", c.line);
  llvm::StringRef out = c.value.asString();
  if (prefix)
    out.consume_front(affix);
  else
    out.consume_back(affix);
  return sameKind(c.r, c.value, out.str(), c.line);
}
Value strRemoveprefix(const BuiltinCall &c) { return removeAffix(c, true); }
Value strRemovesuffix(const BuiltinCall &c) { return removeAffix(c, false); }

// The is* methods take no arguments. ASCII classes exactly; outside ASCII, letters are
// approximated by the cased letters known to PythonText and digits by none.
template <typename Predicate> Value everyCodePoint(const BuiltinCall &c, Predicate predicate) {
  Arguments a(strMethodName(c), c.pos, c.kw, {}, c.line);
  std::vector<char32_t> points = py::codePoints(c.value.asString());
  return Value::boolean(!points.empty() && llvm::all_of(points, predicate));
}
Value strIsspace(const BuiltinCall &c) {
  return everyCodePoint(c, [](char32_t ch) { return py::isSpace(ch); });
}
// isdigit / isdecimal / isnumeric.
Value strIsdigit(const BuiltinCall &c) {
  return everyCodePoint(c, [](char32_t ch) { return ch >= '0' && ch <= '9'; });
}
Value strIsalpha(const BuiltinCall &c) {
  return everyCodePoint(c, [](char32_t ch) {
    return (ch < 0x80 && llvm::isAlpha(char(ch))) || (ch >= 0x80 && (py::isUpperChar(ch) || py::isLowerChar(ch)));
  });
}
Value strIsalnum(const BuiltinCall &c) {
  return everyCodePoint(c, [](char32_t ch) {
    return (ch < 0x80 && llvm::isAlnum(char(ch))) || (ch >= 0x80 && (py::isUpperChar(ch) || py::isLowerChar(ch)));
  });
}
// True for the empty string too.
Value strIsascii(const BuiltinCall &c) {
  Arguments a(strMethodName(c), c.pos, c.kw, {}, c.line);
  return Value::boolean(py::isAscii(c.value.asString()));
}

// isupper / islower: at least one cased code point, and every cased one in that case.
Value allCased(const BuiltinCall &c, bool upper) {
  Arguments a(strMethodName(c), c.pos, c.kw, {}, c.line);
  bool cased = false, ok = true;
  for (char32_t ch : py::codePoints(c.value.asString())) {
    if (py::isUpperChar(ch)) {
      cased = true;
      ok &= upper;
    } else if (py::isLowerChar(ch)) {
      cased = true;
      ok &= !upper;
    }
  }
  return Value::boolean(cased && ok);
}
Value strIsupper(const BuiltinCall &c) { return allCased(c, true); }
Value strIslower(const BuiltinCall &c) { return allCased(c, false); }

// The str methods implemented (kStrMethods lists those of Python's str; the rest fail).
constexpr NamedBuiltin kStrMethodBodies[] = {
    {"capitalize", strCapitalize}, {"center", strCenter}, {"count", strCount}, {"endswith", strEndswith},
    {"find", strFind}, {"format", strFormat}, {"index", strIndex}, {"isalnum", strIsalnum}, {"isalpha", strIsalpha},
    {"isascii", strIsascii}, {"isdecimal", strIsdigit}, {"isdigit", strIsdigit}, {"islower", strIslower},
    {"isnumeric", strIsdigit}, {"isspace", strIsspace}, {"isupper", strIsupper}, {"join", strJoin},
    {"ljust", strLjust}, {"lower", strLower}, {"lstrip", strLstrip}, {"partition", strPartition},
    {"removeprefix", strRemoveprefix}, {"removesuffix", strRemovesuffix}, {"replace", strReplace},
    {"rfind", strRfind}, {"rindex", strRindex}, {"rjust", strRjust}, {"rpartition", strRpartition},
    {"rsplit", strRsplit}, {"rstrip", strRstrip}, {"split", strSplit}, {"splitlines", strSplitlines},
    {"startswith", strStartswith}, {"strip", strStrip}, {"swapcase", strSwapcase}, {"title", strTitle},
    {"upper", strUpper}, {"zfill", strZfill}};
static_assert(sortedByName(kStrMethodBodies));

Value stringMethod(Renderer &r, const Value &self, llvm::StringRef name, std::vector<Value> &pos, Keywords &kw, int line) {
  chargeText(r, self, pos, kw, line);
  BuiltinCall call{r, name, self, pos, kw, line};
  if (Builtin body = lookup(kStrMethodBodies, name))
    return body(call);
  // The is* methods not implemented refuse arguments first, as the implemented ones do.
  if (name.starts_with("is")) {
    Arguments a(strMethodName(call), pos, kw, {}, line);
  }
  fail("unsupported str method '" + name.str() + "'", line);
}

Value dictMethod(Renderer &r, const Value &self, llvm::StringRef name, std::vector<Value> &pos, Keywords &kw, int line) {
  std::string fn = "dict." + name.str();
  const auto &dict = static_cast<const DictObject &>(*self.object());
  if (name == "get") {
    Arguments a(fn, pos, kw, {"key", "default"}, line);
    const Value &key = a.required(0);
    if (!hashable(key))
      fail("unhashable type: '" + typeName(key) + "'", line);
    const Value *found = dict.find(key);
    return found ? *found : a.get(1, Value::none());
  }
  if (name == "items" || name == "keys" || name == "values") {
    Arguments a(fn, pos, kw, {}, line);
    std::vector<Value> items;
    for (const auto &[key, value] : dict.entries) {
      if (name == "items")
        items.push_back(r.makeList({key, value}, true, line));
      else
        items.push_back(name == "keys" ? key : value);
    }
    return r.makeList(std::move(items), false, line);
  }
  if (name == "copy") {
    Arguments a(fn, pos, kw, {}, line);
    return self;
  }
  fail("unsupported dict method '" + name.str() + "'", line);
}

Value listMethod(Renderer &r, const Value &self, llvm::StringRef name, std::vector<Value> &pos, Keywords &kw, int line) {
  std::string fn = typeName(self) + "." + name.str();
  llvm::ArrayRef<Value> items = self.items();
  r.chargeSteps(items.size(), line);
  if (name == "count") {
    Arguments a(fn, pos, kw, {"value"}, line);
    return Value::integer(llvm::count_if(items, [&](const Value &v) { return equals(v, a.required(0)); }));
  }
  if (name == "index") {
    Arguments a(fn, pos, kw, {"value"}, line);
    for (size_t i = 0; i < items.size(); ++i)
      if (equals(items[i], a.required(0)))
        return Value::integer(int64_t(i));
    fail(toRepr(a.required(0)) + " is not in list", line);
  }
  if (name == "copy") {
    Arguments a(fn, pos, kw, {}, line);
    return self;
  }
  fail("unsupported " + typeName(self) + " method '" + name.str() + "'", line);
}

//===--- filters ------------------------------------------------------------===//

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, each through getitem.
Value attributeOf(Renderer &r, const Value &item, llvm::StringRef path, int line) {
  Value current = item;
  llvm::SmallVector<llvm::StringRef, 4> parts;
  path.split(parts, '.');
  for (llvm::StringRef part : parts) {
    int64_t index;
    if (!part.empty() && llvm::all_of(part, llvm::isDigit) && !part.getAsInteger(10, index))
      current = r.getItem(current, Value::integer(index), line);
    else
      current = r.getItem(current, Value::string(part.str()), line);
  }
  return current;
}

Value attributePath(const Value &v, int line) {
  if (isIntLike(v))
    return Value::string(std::to_string(intOf(v)));
  if (!v.isString())
    fail("an attribute name must be a string", line);
  return v;
}

// For sort/unique/min/max with case_sensitive=False: strings compare lowercased (a new string
// each, counted as every string a template makes).
Value sortKey(Renderer &r, const Value &v, bool caseSensitive, int line) {
  if (!caseSensitive && v.isString()) {
    r.chargeSteps(v.asString().size() / 16, line);
    return r.makeString(py::lower(v.asString()), line);
  }
  return v;
}

// select / reject / selectattr / rejectattr.
Value selectOrReject(Renderer &r, const Value &value, std::vector<Value> &pos, Keywords &kw, bool byAttribute,
                     bool select, int line) {
  if (!truthy(value)) // jinja2: `if value:` before anything else, so none | select(...) is empty
    return iteratorOf({}, "generator");
  if (!kw.empty())
    fail("unsupported: keyword arguments to select/reject filters", line);
  size_t next = 0;
  std::optional<std::string> attribute;
  if (byAttribute) {
    if (pos.empty())
      fail("Missing parameter for attribute name", line);
    attribute = attributePath(pos[next++], line).asString().str();
  }
  std::optional<std::string> test;
  if (next < pos.size())
    test = requireStr(pos[next++], "a test name", line);
  std::vector<Value> testArgs(pos.begin() + long(next), pos.end());
  std::vector<Value> kept;
  for (Value &item : r.iterate(value, line)) {
    Value subject = attribute ? attributeOf(r, item, *attribute, line) : item;
    bool passed = test ? r.applyTest(*test, subject, testArgs, {}, line) : truthy(subject);
    if (passed == select)
      kept.push_back(std::move(item));
  }
  return iteratorOf(std::move(kept), "generator");
}

std::string doTitle(llvm::StringRef s) {
  // jinja2: re.split(r"([-\s({\[<]+)") and each piece's first character upper, the rest lower.
  std::vector<char32_t> points = py::codePoints(s);
  auto isBreak = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::isSpace(c); };
  std::string out;
  size_t i = 0;
  while (i < points.size()) {
    size_t j = i;
    bool breaking = isBreak(points[i]);
    while (j < points.size() && isBreak(points[j]) == breaking)
      ++j;
    std::string first, rest;
    py::appendUtf8(first, points[i]);
    for (size_t k = i + 1; k < j; ++k)
      py::appendUtf8(rest, points[k]);
    out += py::upper(first) + py::lower(rest);
    i = j;
  }
  return out;
}

// Python's int(str, base) for bases 2..36 (spaces, a sign, underscores between digits).
std::optional<int64_t> parseInt(llvm::StringRef text, int64_t base) {
  std::string trimmed = py::strip(text, std::nullopt, true, true);
  llvm::StringRef s = trimmed;
  bool negative = false;
  if (s.consume_front("-"))
    negative = true;
  else
    s.consume_front("+");
  if (base == 16)
    s.consume_front_insensitive("0x");
  else if (base == 8)
    s.consume_front_insensitive("0o");
  else if (base == 2)
    s.consume_front_insensitive("0b");
  if (s.empty() || s.front() == '_' || s.back() == '_' || s.contains("__"))
    return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    if (c == '_')
      continue;
    int digit = llvm::isDigit(c) ? c - '0' : llvm::isAlpha(c) ? llvm::toLower(c) - 'a' + 10 : 99;
    if (digit >= base)
      return std::nullopt;
    if (value > (uint64_t(INT64_MAX) + (negative ? 1 : 0) - uint64_t(digit)) / uint64_t(base))
      return std::nullopt;
    value = value * uint64_t(base) + uint64_t(digit);
  }
  return negative ? int64_t(0 - value) : int64_t(value);
}

// Python's float(str).
std::optional<double> parseFloat(llvm::StringRef text) {
  std::string trimmed = py::strip(text, std::nullopt, true, true);
  std::string lowered = llvm::StringRef(trimmed).lower();
  llvm::StringRef s = lowered;
  bool negative = s.consume_front("-");
  if (!negative)
    s.consume_front("+");
  if (s == "inf" || s == "infinity")
    return negative ? -INFINITY : INFINITY;
  if (s == "nan")
    return std::nan("");
  std::string digits;
  bool sawDigit = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (i == 0 || i + 1 >= s.size() || !llvm::isDigit(s[i - 1]) || !llvm::isDigit(s[i + 1]))
        return std::nullopt;
      continue;
    }
    if (!(llvm::isDigit(c) || c == '.' || c == 'e' || c == '+' || c == '-'))
      return std::nullopt;
    sawDigit |= bool(llvm::isDigit(c));
    digits += c;
  }
  if (!sawDigit)
    return std::nullopt;
  char *end = nullptr;
  double v = std::strtod(digits.c_str(), &end);
  if (*end != '\0')
    return std::nullopt;
  return negative ? -v : v;
}

std::string indentText(const Value &s, const Value &width, bool first, bool blank, size_t limit, int line) {
  std::string indention;
  if (width.isString())
    indention = width.asString().str();
  else if (isIntLike(width))
    indention = std::string(size_t(std::clamp<int64_t>(intOf(width), 0, 1 << 20)), ' ');
  else
    fail("indent width must be an int or a str", line);
  if (!s.isString())
    fail("can only indent a string, not " + typeName(s), line);
  std::string text = s.asString().str() + "\n";
  std::vector<std::string> lines = splitLines(text, false);
  // Many lines times a wide indent: the limit is checked while the text grows.
  if (lines.size() > 1 && indention.size() > limit / lines.size())
    fail("a string passes the limit of " + std::to_string(limit) + " bytes", line);
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i)
        out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      out += "\n";
      for (size_t i = 1; i < lines.size(); ++i) {
        if (i > 1)
          out += "\n";
        if (!lines[i].empty())
          out += indention;
        out += lines[i];
      }
    }
  }
  if (first)
    out = indention + out;
  return out;
}

//===--- the filters' functions ---------------------------------------------===//

// transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Value filterTojson(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  Arguments a("tojson", c.pos, c.kw, {"ensure_ascii", "indent", "separators", "sort_keys"}, line);
  JsonFormat format;
  format.ensureAscii = a.boolean(0, false);
  Value indent = a.get(1, Value::none());
  if (indent.isString()) {
    format.indent = indent.asString().str();
  } else if (isIntLike(indent)) {
    int64_t n = intOf(indent);
    if (n > int64_t(r.options().maxOutputBytes))
      fail("tojson indent is too large", line);
    format.indent = std::string(size_t(std::max<int64_t>(0, n)), ' ');
  } else if (!indent.isNone()) {
    fail("tojson indent must be an int or a str", line);
  }
  if (format.indent)
    format.itemSeparator = ",";
  Value separators = a.get(2, Value::none());
  if (!separators.isNone()) {
    if (!separators.isList() || separators.items().size() != 2 || !separators.items()[0].isString() ||
        !separators.items()[1].isString())
      fail("tojson separators must be a pair of strings", line);
    format.itemSeparator = separators.items()[0].asString().str();
    format.keySeparator = separators.items()[1].asString().str();
  }
  format.sortKeys = a.boolean(3, false);
  return r.makeString(dumpJson(c.value, format, r.options().maxOutputBytes), line);
}

// str(value).strip(chars).
Value filterTrim(const BuiltinCall &c) {
  Arguments a("trim", c.pos, c.kw, {"chars"}, c.line);
  Value s = softStr(c.r, c.value, c.line);
  std::optional<std::string> set = a.text(0);
  std::optional<llvm::StringRef> setRef;
  if (set)
    setRef = *set;
  return sameKind(c.r, s, py::strip(s.asString(), setRef, true, true), c.line);
}

// length / count: len(value); an undefined has none.
Value filterLength(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  const Value &value = c.value;
  switch (value.kind()) {
  case Value::Kind::String: return Value::integer(int64_t(py::length(value.asString())));
  case Value::Kind::List: return Value::integer(int64_t(value.items().size()));
  case Value::Kind::Dict: return Value::integer(int64_t(value.entries().size()));
  case Value::Kind::Undefined: return Value::integer(0);
  case Value::Kind::Loop: return Value::integer(static_cast<const LoopObject &>(*value.object()).length);
  default: fail("object of type '" + typeName(value) + "' has no len()", c.line);
  }
}

// upper / lower / capitalize: the str() of the value, case-mapped as Python does.
Value caseMapped(const BuiltinCall &c, std::string (*map)(llvm::StringRef)) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  Value s = softStr(c.r, c.value, c.line);
  return sameKind(c.r, s, map(s.asString()), c.line);
}
Value filterUpper(const BuiltinCall &c) { return caseMapped(c, py::upper); }
Value filterLower(const BuiltinCall &c) { return caseMapped(c, py::lower); }
Value filterCapitalize(const BuiltinCall &c) { return caseMapped(c, py::capitalize); }

// jinja2's title, not str.title: words start after spaces and -({[< only (doTitle).
Value filterTitle(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  return c.r.makeString(doTitle(softStr(c.r, c.value, c.line).asString()), c.line);
}

Value filterString(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  return softStr(c.r, c.value, c.line);
}

Value filterSafe(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  return markup(toStr(c.value));
}

// e / escape: HTML-escaped markup, unless the value is markup already.
Value filterEscape(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  if (c.value.isMarkup())
    return c.value;
  return markup(htmlEscape(toStr(c.value)));
}

// Escapes markup too.
Value filterForceescape(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  return markup(htmlEscape(toStr(c.value)));
}

// default / d: the fallback for an undefined value, or with boolean=true for any false one.
Value filterDefault(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {"default_value", "boolean"}, c.line);
  if (c.value.isUndefined() || (a.boolean(1, false) && !truthy(c.value)))
    return a.get(0, Value::string(""));
  return c.value;
}

// The str() of each item (or of its attribute) with the separator between; never markup.
Value filterJoin(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  Arguments a("join", c.pos, c.kw, {"d", "attribute"}, line);
  std::string separator = toStr(a.get(0, Value::string("")));
  std::vector<Value> items = r.iterate(c.value, line);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += separator;
    Value item = a.has(1) ? attributeOf(r, items[i], attributePath(a.get(1, Value()), line).asString(), line) : items[i];
    out += toStr(item);
    if (out.size() > r.options().maxOutputBytes)
      fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", line);
  }
  return r.makeString(std::move(out), line);
}

Value filterList(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  return c.r.makeList(c.r.iterate(c.value, c.line), false, c.line);
}

// An undefined when the sequence is empty.
Value filterFirst(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  std::vector<Value> items = c.r.iterate(c.value, c.line);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

// jinja2 reverses the value (reversed()): a generator cannot be.
Value filterLast(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  if (c.value.kind() == Value::Kind::Iterator)
    fail("'" + typeName(c.value) + "' object is not reversible", c.line);
  std::vector<Value> items = c.r.iterate(c.value, c.line);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// On str() of the value and of both arguments; never markup.
Value filterReplace(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  Arguments a("replace", c.pos, c.kw, {"old", "new", "count"}, line);
  std::string text = toStr(c.value), old = toStr(a.required(0)), replacement = toStr(a.required(1));
  if (old.empty() && !replacement.empty() && py::length(text) + 1 > r.options().maxOutputBytes / replacement.size())
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", line);
  if (!old.empty() && replacement.size() > old.size() &&
      py::count(text, old) > r.options().maxOutputBytes / (replacement.size() - old.size() + 1))
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", line);
  return r.makeString(py::replace(text, old, replacement, a.integer(2, -1)), line);
}

// A generator of (key, value) tuples; of an undefined, an empty one.
Value filterItems(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  if (c.value.isUndefined())
    return iteratorOf({}, "generator");
  if (!c.value.isDict())
    fail("Can only get item pairs from a mapping.", c.line);
  std::vector<Value> pairs;
  for (const auto &[k, v] : c.value.entries())
    pairs.push_back(c.r.makeList({k, v}, true, c.line));
  return iteratorOf(std::move(pairs), "generator");
}

Value filterSelectattr(const BuiltinCall &c) { return selectOrReject(c.r, c.value, c.pos, c.kw, true, true, c.line); }
Value filterRejectattr(const BuiltinCall &c) { return selectOrReject(c.r, c.value, c.pos, c.kw, true, false, c.line); }
Value filterSelect(const BuiltinCall &c) { return selectOrReject(c.r, c.value, c.pos, c.kw, false, true, c.line); }
Value filterReject(const BuiltinCall &c) { return selectOrReject(c.r, c.value, c.pos, c.kw, false, false, c.line); }

// map(attribute=..., default=...) looks the attribute up in each item; map('filter', args...)
// applies the filter to each (the one way filters nest: see FilterDepthGuard in Render.cpp).
Value filterMap(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  if (!truthy(c.value)) // jinja2: `if value:` before anything else
    return iteratorOf({}, "generator");
  std::vector<Value> items = r.iterate(c.value, line);
  std::vector<Value> mapped;
  if (c.pos.empty()) {
    Arguments a("map", c.pos, c.kw, {"attribute", "default"}, line);
    std::string attribute = attributePath(a.required(0), line).asString().str();
    for (const Value &item : items) {
      Value v = attributeOf(r, item, attribute, line);
      mapped.push_back(v.isUndefined() && a.has(1) ? a.get(1, Value()) : v);
    }
  } else {
    std::string filter = requireStr(c.pos[0], "map's filter name", line);
    std::vector<Value> rest(c.pos.begin() + 1, c.pos.end());
    for (const Value &item : items) {
      r.chargeBytes(rest.size() * sizeof(Value), line); // each call gets its own copy
      mapped.push_back(r.applyFilter(filter, item, rest, c.kw, line));
    }
  }
  return iteratorOf(std::move(mapped), "generator");
}

// A string reversed by code points; a generator into a list; anything else into a reverse iterator.
Value filterReverse(const BuiltinCall &c) {
  Renderer &r = c.r;
  const Value &value = c.value;
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  if (value.isString()) {
    std::vector<char32_t> points = py::codePoints(value.asString());
    std::reverse(points.begin(), points.end());
    return sameKind(r, value, py::fromCodePoints(points), c.line);
  }
  if (value.kind() == Value::Kind::Iterator) {
    std::vector<Value> items = r.iterate(value, c.line);
    std::reverse(items.begin(), items.end());
    return r.makeList(std::move(items), false, c.line);
  }
  std::vector<Value> items = r.iterate(value, c.line);
  std::reverse(items.begin(), items.end());
  return iteratorOf(std::move(items), value.isDict() ? "dict_reversekeyiterator" : "list_reverseiterator");
}

// The first item of each key (the item or its attribute, lowercased unless case_sensitive).
Value filterUnique(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  Arguments a(c.name, c.pos, c.kw, {"case_sensitive", "attribute"}, line);
  bool caseSensitive = a.boolean(0, false);
  std::vector<Value> seenKeys, kept;
  for (const Value &item : r.iterate(c.value, line)) {
    Value key = a.has(1) ? attributeOf(r, item, attributePath(a.get(1, Value()), line).asString(), line) : item;
    key = sortKey(r, key, caseSensitive, line);
    if (!hashable(key))
      fail("unhashable type: '" + typeName(key) + "'", line);
    r.chargeSteps(seenKeys.size(), line);
    if (llvm::none_of(seenKeys, [&](const Value &s) { return equals(s, key); })) {
      seenKeys.push_back(key);
      kept.push_back(item);
    }
  }
  return iteratorOf(std::move(kept), "generator");
}

// The items of sort / min / max and the key of each: its attributes (`attribute` may list
// several, comma-separated) or the item itself, strings lowercased unless case_sensitive.
struct KeyedItems {
  std::vector<Value> items;
  std::vector<std::vector<Value>> keys;
};

KeyedItems keyedItems(const BuiltinCall &c, const Arguments &a, size_t caseSensitiveIndex) {
  Renderer &r = c.r;
  int line = c.line;
  bool caseSensitive = a.boolean(caseSensitiveIndex, false);
  std::vector<std::string> attributes;
  if (a.has(caseSensitiveIndex + 1)) {
    Value path = attributePath(a.get(caseSensitiveIndex + 1, Value()), line);
    llvm::SmallVector<llvm::StringRef, 4> parts;
    path.asString().split(parts, ',');
    for (llvm::StringRef p : parts)
      attributes.push_back(p.trim().str());
  }
  KeyedItems keyed;
  keyed.items = r.iterate(c.value, line);
  for (const Value &item : keyed.items) {
    std::vector<Value> key;
    if (attributes.empty())
      key.push_back(sortKey(r, item, caseSensitive, line));
    for (const std::string &attribute : attributes)
      key.push_back(sortKey(r, attributeOf(r, item, attribute, line), caseSensitive, line));
    keyed.keys.push_back(std::move(key));
  }
  r.chargeSteps(keyed.items.size() * 8, line);
  return keyed;
}

bool keyLess(const std::vector<Value> &x, const std::vector<Value> &y) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!equals(x[i], y[i]))
      return less(x[i], y[i]);
  return false;
}

// A stable sort: equal keys keep their order, reverse=true too.
Value filterSort(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {"reverse", "case_sensitive", "attribute"}, c.line);
  KeyedItems keyed = keyedItems(c, a, 1);
  std::vector<size_t> order(keyed.items.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  bool reverse = a.boolean(0, false);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? keyLess(keyed.keys[y], keyed.keys[x]) : keyLess(keyed.keys[x], keyed.keys[y]);
  });
  std::vector<Value> sorted;
  for (size_t i : order)
    sorted.push_back(keyed.items[i]);
  return c.r.makeList(std::move(sorted), false, c.line);
}

// min / max: the first item of the least (greatest) key; an undefined for an empty sequence.
Value extremeItem(const BuiltinCall &c, bool least) {
  Arguments a(c.name, c.pos, c.kw, {"case_sensitive", "attribute"}, c.line);
  KeyedItems keyed = keyedItems(c, a, 0);
  if (keyed.items.empty())
    return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < keyed.items.size(); ++i)
    if (least ? keyLess(keyed.keys[i], keyed.keys[best]) : keyLess(keyed.keys[best], keyed.keys[i]))
      best = i;
  return keyed.items[best];
}
Value filterMin(const BuiltinCall &c) { return extremeItem(c, true); }
Value filterMax(const BuiltinCall &c) { return extremeItem(c, false); }

// A list of (key, value) tuples sorted by key or by value, stable.
Value filterDictsort(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  Arguments a(c.name, c.pos, c.kw, {"case_sensitive", "by", "reverse"}, line);
  if (!c.value.isDict())
    fail("dictsort needs a mapping, not " + typeName(c.value), line);
  bool caseSensitive = a.boolean(0, false);
  std::string by = a.has(1) ? requireStr(a.get(1, Value()), "dictsort's by", line) : "key";
  if (by != "key" && by != "value")
    fail("You can only sort by either \"key\" or \"value\"", line);
  std::vector<std::pair<Value, Value>> entries(c.value.entries().begin(), c.value.entries().end());
  bool reverse = a.boolean(2, false);
  r.chargeSteps(entries.size() * 8, line);
  std::stable_sort(entries.begin(), entries.end(), [&](const auto &x, const auto &y) {
    Value kx = sortKey(r, by == "key" ? x.first : x.second, caseSensitive, line);
    Value ky = sortKey(r, by == "key" ? y.first : y.second, caseSensitive, line);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  std::vector<Value> pairs;
  for (auto &[k, v] : entries)
    pairs.push_back(r.makeList({k, v}, true, line));
  return r.makeList(std::move(pairs), false, line);
}

// jinja2: int(value, base) for a string (int(value) for the rest), and int(float(value)) where
// that fails; the default where both fail (NaN included). Infinity and an undefined raise.
Value filterInt(const BuiltinCall &c) {
  const Value &value = c.value;
  int line = c.line;
  Arguments a(c.name, c.pos, c.kw, {"default", "base"}, line);
  Value fallback = a.get(0, Value::integer(0));
  int64_t base = a.integer(1, 10);
  switch (value.kind()) {
  case Value::Kind::Int: return value;
  case Value::Kind::Bool: return Value::integer(value.asBool());
  case Value::Kind::Float: {
    double f = value.asFloat();
    if (std::isnan(f))
      return fallback;
    if (std::isinf(f))
      fail("cannot convert float infinity to integer", line);
    if (std::fabs(f) >= 9.2e18)
      fail("integer overflow", line);
    return Value::integer(int64_t(f));
  }
  case Value::Kind::String: {
    if (base < 2 || base > 36)
      fail("int() base must be >= 2 and <= 36", line);
    if (auto v = parseInt(value.asString(), base))
      return Value::integer(*v);
    if (auto f = parseFloat(value.asString())) {
      if (std::isnan(*f))
        return fallback;
      if (std::isinf(*f))
        fail("cannot convert float infinity to integer", line);
      if (std::fabs(*f) >= 9.2e18)
        fail("integer overflow", line);
      return Value::integer(int64_t(*f));
    }
    return fallback;
  }
  case Value::Kind::Undefined: failUndefined(value, line);
  default: return fallback;
  }
}

// float(value), or the default where Python's float() would fail; an undefined raises.
Value filterFloat(const BuiltinCall &c) {
  const Value &value = c.value;
  Arguments a(c.name, c.pos, c.kw, {"default"}, c.line);
  Value fallback = a.get(0, Value::number(0.0));
  switch (value.kind()) {
  case Value::Kind::Float: return value;
  case Value::Kind::Int:
  case Value::Kind::Bool: return Value::number(double(intOf(value)));
  case Value::Kind::String: {
    auto f = parseFloat(value.asString());
    return f ? Value::number(*f) : fallback;
  }
  case Value::Kind::Undefined: failUndefined(value, c.line);
  default: return fallback;
  }
}

Value filterAbs(const BuiltinCall &c) {
  const Value &value = c.value;
  Arguments a(c.name, c.pos, c.kw, {}, c.line);
  if (isIntLike(value)) {
    if (intOf(value) == INT64_MIN)
      fail("integer overflow", c.line);
    return Value::integer(std::abs(intOf(value)));
  }
  if (value.kind() == Value::Kind::Float)
    return Value::number(std::fabs(value.asFloat()));
  fail("bad operand type for abs(): '" + typeName(value) + "'", c.line);
}

// jinja2: an int stays an int with method 'common'; otherwise a float, rounded to `precision`
// decimals half to even ('common') or towards +/- infinity ('ceil', 'floor').
Value filterRound(const BuiltinCall &c) {
  const Value &value = c.value;
  int line = c.line;
  Arguments a(c.name, c.pos, c.kw, {"precision", "method"}, line);
  int64_t precision = a.integer(0, 0);
  std::string method = a.has(1) ? requireStr(a.get(1, Value()), "round's method", line) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be common, ceil or floor", line);
  if (isIntLike(value) && method == "common")
    return Value::integer(intOf(value));
  if (!isIntLike(value) && value.kind() != Value::Kind::Float)
    fail("type " + typeName(value) + " doesn't define __round__ method", line);
  if (precision < 0 || precision > 300)
    fail("unsupported: round to a precision of " + std::to_string(precision), line);
  double v = value.kind() == Value::Kind::Float ? value.asFloat() : double(intOf(value));
  if (!std::isfinite(v))
    return Value::number(v);
  if (method == "common") {
    // Python's round(): correctly rounded, ties to even, on the exact binary value (as printf).
    std::vector<char> buffer(size_t(precision) + 400);
    std::snprintf(buffer.data(), buffer.size(), "%.*f", int(precision), v);
    return Value::number(std::strtod(buffer.data(), nullptr));
  }
  double scale = std::pow(10.0, double(precision));
  return Value::number((method == "ceil" ? std::ceil(v * scale) : std::floor(v * scale)) / scale);
}

// start + the items (or their attribute), numbers only: ints while every term is one.
Value filterSum(const BuiltinCall &c) {
  Renderer &r = c.r;
  int line = c.line;
  Arguments a(c.name, c.pos, c.kw, {"attribute", "start"}, line);
  Value total = a.get(1, Value::integer(0));
  for (const Value &item : r.iterate(c.value, line)) {
    Value term = a.has(0) ? attributeOf(r, item, attributePath(a.get(0, Value()), line).asString(), line) : item;
    bool ints = isIntLike(total) && isIntLike(term);
    bool numbers = (ints || total.kind() == Value::Kind::Float || term.kind() == Value::Kind::Float) &&
                   (isIntLike(total) || total.kind() == Value::Kind::Float) &&
                   (isIntLike(term) || term.kind() == Value::Kind::Float);
    if (ints) {
      int64_t s;
      if (__builtin_add_overflow(intOf(total), intOf(term), &s))
        fail("integer overflow", line);
      total = Value::integer(s);
    } else if (numbers) {
      auto f = [](const Value &v) { return v.kind() == Value::Kind::Float ? v.asFloat() : double(intOf(v)); };
      total = Value::number(f(total) + f(term));
    } else {
      fail("unsupported operand type(s) for +: '" + typeName(total) + "' and '" + typeName(term) + "'", line);
    }
  }
  return total;
}

// str(value).center(width), width 80 by default.
Value filterCenter(const BuiltinCall &c) {
  Renderer &r = c.r;
  Arguments a(c.name, c.pos, c.kw, {"width"}, c.line);
  int64_t width = a.integer(0, 80);
  if (width > int64_t(r.options().maxOutputBytes))
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  Value s = softStr(r, c.value, c.line);
  return sameKind(r, s, center(s.asString(), width, " ", true, true), c.line);
}

// Every line but the first (with first=true, that too) indented; blank lines only with blank=true.
Value filterIndent(const BuiltinCall &c) {
  Renderer &r = c.r;
  Arguments a(c.name, c.pos, c.kw, {"width", "first", "blank"}, c.line);
  std::string out = indentText(c.value, a.get(0, Value::integer(4)), a.boolean(1, false), a.boolean(2, false),
                               r.options().maxOutputBytes, c.line);
  if (out.size() > r.options().maxOutputBytes)
    fail("a string passes the limit of " + std::to_string(r.options().maxOutputBytes) + " bytes", c.line);
  return sameKind(r, c.value, std::move(out), c.line);
}

// printf-style: value % args (a tuple of the positional arguments) or value % kwargs (a dict).
Value filterFormat(const BuiltinCall &c) {
  Renderer &r = c.r;
  if (!c.pos.empty() && !c.kw.empty())
    fail("can't handle positional and keyword arguments at the same time", c.line);
  Value s = softStr(r, c.value, c.line);
  Value arguments;
  if (!c.kw.empty()) {
    std::vector<std::pair<Value, Value>> entries;
    for (auto &[k, v] : c.kw)
      entries.emplace_back(Value::string(k), v);
    arguments = r.makeDict(std::move(entries), c.line);
  } else {
    arguments = r.makeList(c.pos, true, c.line);
  }
  return sameKind(r, s, pythonPercentFormat(r, s.asString(), arguments, c.line), c.line);
}

Value filterAttr(const BuiltinCall &c) {
  Arguments a(c.name, c.pos, c.kw, {"name"}, c.line);
  std::string attribute = toStr(a.required(0));
  // getattr only: a dict's keys are not attributes.
  if (c.value.isDict() && !isMethodOf(c.value, attribute))
    return Value::undefined("'dict object' has no attribute " + py::repr(attribute));
  return c.r.getAttribute(c.value, attribute, c.line);
}

// The filters implemented; applying any other name fails ("no filter named ..."). Parser.cpp
// refuses most of jinja2's other filters when it parses a template.
constexpr NamedBuiltin kFilterBodies[] = {
    {"abs", filterAbs}, {"attr", filterAttr}, {"capitalize", filterCapitalize}, {"center", filterCenter},
    {"count", filterLength}, {"d", filterDefault}, {"default", filterDefault}, {"dictsort", filterDictsort},
    {"e", filterEscape}, {"escape", filterEscape}, {"first", filterFirst}, {"float", filterFloat},
    {"forceescape", filterForceescape}, {"format", filterFormat}, {"indent", filterIndent}, {"int", filterInt},
    {"items", filterItems}, {"join", filterJoin}, {"last", filterLast}, {"length", filterLength},
    {"list", filterList}, {"lower", filterLower}, {"map", filterMap}, {"max", filterMax}, {"min", filterMin},
    {"reject", filterReject}, {"rejectattr", filterRejectattr}, {"replace", filterReplace},
    {"reverse", filterReverse}, {"round", filterRound}, {"safe", filterSafe}, {"select", filterSelect},
    {"selectattr", filterSelectattr}, {"sort", filterSort}, {"string", filterString}, {"sum", filterSum},
    {"title", filterTitle}, {"tojson", filterTojson}, {"trim", filterTrim}, {"unique", filterUnique},
    {"upper", filterUpper}};
static_assert(sortedByName(kFilterBodies));

} // namespace

Value filterBody(Renderer &r, llvm::StringRef name, const Value &value, std::vector<Value> &pos, Keywords &kw, int line) {
  // Filters read their string value and arguments (length, trim, int...): a step per 16 bytes.
  chargeText(r, value, pos, kw, line);
  Builtin body = lookup(kFilterBodies, name);
  if (!body)
    fail("no filter named '" + name.str() + "'", line);
  return body(BuiltinCall{r, name, value, pos, kw, line});
}

bool testBody(Renderer &r, llvm::StringRef name, const Value &value, std::vector<Value> &pos, Keywords &kw, int line) {
  chargeText(r, value, pos, kw, line);
  auto noArguments = [&]() { Arguments a(name, pos, kw, {}, line); };
  auto other = [&]() -> const Value & {
    Arguments a(name, pos, kw, {"other"}, line);
    (void)a.required(0);
    return pos.empty() ? kw.front().second : pos[0];
  };
  Value::Kind k = value.kind();
  // The tests that ask only for the value's kind.
  auto kindIn = [&](std::initializer_list<Value::Kind> kinds) {
    noArguments();
    return llvm::is_contained(kinds, k);
  };
  if (name == "defined" || name == "undefined") {
    noArguments();
    return (k == Value::Kind::Undefined) == (name == "undefined");
  }
  if (name == "none")
    return kindIn({Value::Kind::None});
  if (name == "boolean")
    return kindIn({Value::Kind::Bool});
  if (name == "true" || name == "false") {
    noArguments();
    return k == Value::Kind::Bool && value.asBool() == (name == "true");
  }
  if (name == "integer")
    return kindIn({Value::Kind::Int});
  if (name == "float")
    return kindIn({Value::Kind::Float});
  if (name == "number")
    return kindIn({Value::Kind::Int, Value::Kind::Float, Value::Kind::Bool});
  if (name == "string")
    return kindIn({Value::Kind::String});
  if (name == "mapping")
    return kindIn({Value::Kind::Dict});
  if (name == "iterable")
    return kindIn({Value::Kind::String, Value::Kind::List, Value::Kind::Dict, Value::Kind::Iterator,
                   Value::Kind::Undefined, Value::Kind::Loop});
  if (name == "sequence")
    return kindIn({Value::Kind::String, Value::Kind::List, Value::Kind::Dict, Value::Kind::Undefined});
  if (name == "callable")
    return kindIn({Value::Kind::Callable, Value::Kind::Undefined, Value::Kind::Loop});
  if (name == "escaped") {
    noArguments();
    return value.isMarkup();
  }
  if (name == "lower" || name == "upper") {
    noArguments();
    std::string text = toStr(value);
    bool cased = false, ok = true;
    for (size_t p = 0; p < text.size();) {
      char32_t c = py::decodeAt(text, p);
      if (py::isUpperChar(c)) {
        cased = true;
        ok &= name == "upper";
      } else if (py::isLowerChar(c)) {
        cased = true;
        ok &= name == "lower";
      }
    }
    return cased && ok;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    Value divisor = Value::integer(2);
    if (name == "divisibleby") {
      Arguments a(name, pos, kw, {"num"}, line);
      divisor = a.required(0);
    } else {
      noArguments();
    }
    if (k == Value::Kind::Undefined)
      failUndefined(value, line);
    if (isIntLike(value) && isIntLike(divisor)) {
      int64_t d = intOf(divisor), v = intOf(value);
      if (d == 0)
        fail("integer division or modulo by zero", line);
      int64_t m = d == -1 ? 0 : v % d;
      if (m != 0 && ((m < 0) != (d < 0)))
        m += d;
      return name == "odd" ? m == 1 : m == 0;
    }
    auto asDouble = [&](const Value &v) -> double {
      if (isIntLike(v))
        return double(intOf(v));
      if (v.kind() == Value::Kind::Float)
        return v.asFloat();
      fail("unsupported operand type(s) for %: '" + typeName(value) + "' and '" + typeName(divisor) + "'", line);
    };
    double d = asDouble(divisor), v = asDouble(value);
    if (d == 0.0)
      fail("float modulo", line);
    double m = std::fmod(v, d);
    if (m != 0 && ((m < 0) != (d < 0)))
      m += d;
    return name == "odd" ? m == 1.0 : m == 0.0;
  }
  if (name == "eq" || name == "equalto" || name == "==")
    return equals(value, other());
  if (name == "ne" || name == "!=")
    return !equals(value, other());
  if (name == "lt" || name == "lessthan" || name == "<")
    return less(value, other());
  if (name == "le" || name == "<=") {
    const Value &o = other();
    return less(value, o) || equals(value, o);
  }
  if (name == "gt" || name == "greaterthan" || name == ">")
    return less(other(), value);
  if (name == "ge" || name == ">=") {
    const Value &o = other();
    return less(o, value) || equals(value, o);
  }
  if (name == "in") {
    Arguments a(name, pos, kw, {"seq"}, line);
    const Value &seq = a.required(0);
    switch (seq.kind()) {
    case Value::Kind::String:
      if (!value.isString())
        fail("'in <string>' requires string as left operand, not " + typeName(value), line);
      r.chargeSteps(1 + seq.asString().size() / 64, line);
      return py::find(seq.asString(), value.asString()) != llvm::StringRef::npos;
    case Value::Kind::Dict:
      return hashable(value) && static_cast<const DictObject &>(*seq.object()).find(value);
    case Value::Kind::Undefined:
      return false;
    default:
      for (const Value &x : r.iterate(seq, line))
        if (equals(x, value))
          return true;
      return false;
    }
  }
  if (name == "sameas") {
    const Value &o = other();
    if (value.kind() != o.kind())
      return false;
    switch (k) {
    case Value::Kind::None:
    case Value::Kind::Undefined: return true;
    case Value::Kind::Bool: return value.asBool() == o.asBool();
    case Value::Kind::Int: return value.asInt() == o.asInt() && value.asInt() >= -5 && value.asInt() <= 256;
    case Value::Kind::Float: return false;
    default: return value.object() == o.object();
    }
  }
  if (name == "filter" || name == "test") {
    Arguments a(name, pos, kw, {}, line);
    if (!value.isString())
      return false;
    // What jinja2 answers: whether its environment has the name (implemented here or not).
    return name == "filter" ? isJinjaFilter(value.asString()) : isJinjaTest(value.asString());
  }
  fail("no test named '" + name.str() + "'", line);
}

//===--- globals and method dispatch ----------------------------------------===//

Value globalFunction(llvm::StringRef name) {
  auto f = std::make_shared<CallableObject>();
  f->kind = CallableObject::Kind::Global;
  f->name = name.str();
  return Value::fromObject(Value::Kind::Callable, std::move(f));
}

Value callGlobal(Renderer &r, const CallableObject &callee, std::vector<Value> &pos, Keywords &kw, int line) {
  llvm::StringRef name = callee.name;
  if (name == "raise_exception") {
    Arguments a(name, pos, kw, {"message"}, line);
    throw TemplateError{"template raised: " + toStr(a.required(0)), line, true};
  }
  if (name == "strftime_now") {
    Arguments a(name, pos, kw, {"format"}, line);
    std::string format = requireStr(a.required(0), "strftime() argument 1", line);
    return r.makeString(strftimeNow(r.options(), format, line), line);
  }
  if (name == "range") {
    if (!kw.empty())
      fail("range() takes no keyword arguments", line);
    if (pos.empty() || pos.size() > 3)
      fail("range expected 1 to 3 arguments, got " + std::to_string(pos.size()), line);
    for (const Value &v : pos)
      if (!isIntLike(v))
        fail("'" + typeName(v) + "' object cannot be interpreted as an integer", line);
    int64_t start = pos.size() == 1 ? 0 : intOf(pos[0]);
    int64_t stop = pos.size() == 1 ? intOf(pos[0]) : intOf(pos[1]);
    int64_t step = pos.size() == 3 ? intOf(pos[2]) : 1;
    if (step == 0)
      fail("range() arg 3 must not be zero", line);
    // len(range(start, stop, step)) in 128-bit arithmetic: the bounds are any int64.
    __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
    __int128 count = span <= 0 ? 0 : (span - 1) / (step > 0 ? __int128(step) : -__int128(step)) + 1;
    // The sandbox's safe_range.
    if (count > 100000)
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).", line);
    std::vector<Value> items;
    // start + i * step is inside [start, stop) for i < count: no intermediate overflows.
    for (int64_t i = 0; i < int64_t(count); ++i)
      items.push_back(Value::integer(int64_t(__int128(start) + __int128(i) * step)));
    return r.makeList(std::move(items), false, line);
  }
  if (name == "namespace" || name == "dict") {
    if (pos.size() > 1)
      fail(name.str() + " expected at most 1 positional argument, got " + std::to_string(pos.size()), line);
    std::vector<std::pair<Value, Value>> entries;
    if (!pos.empty()) {
      if (pos[0].isDict()) {
        entries.assign(pos[0].entries().begin(), pos[0].entries().end());
      } else {
        for (const Value &pair : r.iterate(pos[0], line)) {
          std::vector<Value> kv = r.iterate(pair, line);
          if (kv.size() != 2)
            fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required", line);
          entries.emplace_back(kv[0], kv[1]);
        }
      }
    }
    for (auto &[k, v] : kw)
      entries.emplace_back(Value::string(k), v);
    if (name == "dict")
      return r.makeDict(std::move(entries), line);
    auto ns = r.makeNamespace();
    for (auto &[k, v] : entries) {
      if (!k.isString())
        fail("namespace attribute names must be strings", line);
      if (k.asString().starts_with("_"))
        fail("chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
                 py::repr(k.asString()),
             line);
      if (Value *slot = ns->find(k.asString()))
        *slot = v;
      else
        ns->attributes.emplace_back(k.asString().str(), v);
    }
    return Value::fromObject(Value::Kind::Namespace, std::move(ns));
  }
  fail("unsupported function '" + name.str() + "'", line);
}

bool isMethodOf(const Value &value, llvm::StringRef name) {
  switch (value.kind()) {
  case Value::Kind::String: return listed(kStrMethods, name);
  case Value::Kind::Dict: return listed(kDictMethods, name);
  case Value::Kind::List: return listed(value.isTuple() ? llvm::ArrayRef(kTupleMethods) : llvm::ArrayRef(kListMethods), name);
  default: return false;
  }
}

Value callMethod(Renderer &r, const CallableObject &method, std::vector<Value> &pos, Keywords &kw, int line) {
  const Value &self = method.self;
  if (self.isString())
    return stringMethod(r, self, method.name, pos, kw, line);
  if (self.isDict())
    return dictMethod(r, self, method.name, pos, kw, line);
  if (self.isList())
    return listMethod(r, self, method.name, pos, kw, line);
  fail("unsupported method '" + method.name + "'", line);
}

} // namespace helm::chat
