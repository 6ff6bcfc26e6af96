//===- Semantics.cpp - Python's meaning of values: str, repr, truth, ==, <, json ------===//
#include "runtime/chat/Engine.h"
#include "runtime/chat/PythonText.h"

#include <algorithm>
#include <cmath>

namespace helm::chat {

namespace {

const std::string &textOf(const Value &v) { return static_cast<const StringObject &>(*v.object()).text; }

// Printing recurses through namespaces, whose contents can change after they are made (and so can
// hold a chain of namespaces of any length): bounded here.
constexpr unsigned kMaxPrintDepth = 2 * Value::kMaxDepth;

void appendRepr(std::string &out, const Value &v, unsigned depth);

void appendDictRepr(std::string &out, llvm::ArrayRef<std::pair<Value, Value>> entries, unsigned depth) {
  out += '{';
  bool first = true;
  for (const auto &[key, value] : entries) {
    if (!first)
      out += ", ";
    first = false;
    appendRepr(out, key, depth + 1);
    out += ": ";
    appendRepr(out, value, depth + 1);
  }
  out += '}';
}

void appendStr(std::string &out, const Value &v, unsigned depth) {
  if (depth > kMaxPrintDepth)
    fail("a value nests too deeply to print");
  if (out.size() > currentStringLimit())
    fail("a printed value passes the limit of " + std::to_string(currentStringLimit()) + " bytes");
  chargeWork(1);
  switch (v.kind()) {
  case Value::Kind::Undefined: return;
  case Value::Kind::None: out += "None"; return;
  case Value::Kind::Bool: out += v.asBool() ? "True" : "False"; return;
  case Value::Kind::Int: out += std::to_string(v.asInt()); return;
  case Value::Kind::Float: out += py::formatFloat(v.asFloat()); return;
  case Value::Kind::String: out += textOf(v); return;
  case Value::Kind::List: {
    bool tuple = v.isTuple();
    out += tuple ? '(' : '[';
    llvm::ArrayRef<Value> items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += ", ";
      appendRepr(out, items[i], depth + 1);
    }
    if (tuple && items.size() == 1)
      out += ',';
    out += tuple ? ')' : ']';
    return;
  }
  case Value::Kind::Dict: appendDictRepr(out, v.entries(), depth); return;
  case Value::Kind::Namespace: {
    const auto &ns = static_cast<const NamespaceObject &>(*v.object());
    std::vector<std::pair<Value, Value>> entries;
    for (const auto &[name, value] : ns.attributes)
      entries.emplace_back(Value::string(name), value);
    out += "<Namespace ";
    appendDictRepr(out, entries, depth);
    out += '>';
    return;
  }
  case Value::Kind::Callable: {
    const auto &c = static_cast<const CallableObject &>(*v.object());
    if (c.kind == CallableObject::Kind::Macro)
      out += "<Macro " + (c.name.empty() ? std::string("anonymous") : py::repr(c.name)) + ">";
    else
      out += "<function " + c.name + ">";
    return;
  }
  case Value::Kind::Iterator:
    out += "<" + static_cast<const IteratorObject &>(*v.object()).typeName + " object>";
    return;
  case Value::Kind::Loop: {
    const auto &loop = static_cast<const LoopObject &>(*v.object());
    out += "<LoopContext " + std::to_string(loop.index0 + 1) + "/" + std::to_string(loop.length) + ">";
    return;
  }
  }
}

void appendRepr(std::string &out, const Value &v, unsigned depth) {
  if (v.isString()) {
    if (out.size() + textOf(v).size() > currentStringLimit())
      fail("a printed value passes the limit of " + std::to_string(currentStringLimit()) + " bytes");
    chargeWork(1 + textOf(v).size() / 16);
    if (v.isMarkup())
      out += "Markup(" + py::repr(textOf(v)) + ")";
    else
      out += py::repr(textOf(v));
    return;
  }
  if (v.isUndefined()) {
    out += "Undefined";
    return;
  }
  appendStr(out, v, depth);
}


// -1, 0, 1, or 2 when unordered (a NaN); exact between ints and floats, as Python compares them.
int compareNumbers(const Value &a, const Value &b) {
  bool aFloat = a.kind() == Value::Kind::Float, bFloat = b.kind() == Value::Kind::Float;
  if (!aFloat && !bFloat) {
    int64_t x = intOf(a), y = intOf(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (aFloat && bFloat) {
    double x = a.asFloat(), y = b.asFloat();
    if (std::isnan(x) || std::isnan(y))
      return 2;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  // One int, one float.
  int64_t i = aFloat ? intOf(b) : intOf(a);
  double f = aFloat ? a.asFloat() : b.asFloat();
  int intVersusFloat;
  if (std::isnan(f))
    return 2;
  if (f >= 9223372036854775808.0) {
    intVersusFloat = -1;
  } else if (f < -9223372036854775808.0) {
    intVersusFloat = 1;
  } else {
    double floored = std::floor(f);
    auto fi = static_cast<int64_t>(floored);
    if (i != fi)
      intVersusFloat = i < fi ? -1 : 1;
    else
      intVersusFloat = f > floored ? -1 : 0;
  }
  return aFloat ? -intVersusFloat : intVersusFloat;
}

} // namespace

std::string typeName(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined: return "Undefined";
  case Value::Kind::None: return "NoneType";
  case Value::Kind::Bool: return "bool";
  case Value::Kind::Int: return "int";
  case Value::Kind::Float: return "float";
  case Value::Kind::String: return v.isMarkup() ? "Markup" : "str";
  case Value::Kind::List: return v.isTuple() ? "tuple" : "list";
  case Value::Kind::Dict: return "dict";
  case Value::Kind::Namespace: return "Namespace";
  case Value::Kind::Callable: {
    auto kind = static_cast<const CallableObject &>(*v.object()).kind;
    return kind == CallableObject::Kind::Macro ? "Macro" : kind == CallableObject::Kind::Global ? "function"
                                                                                                 : "builtin_function_or_method";
  }
  case Value::Kind::Iterator: return static_cast<const IteratorObject &>(*v.object()).typeName;
  case Value::Kind::Loop: return "LoopContext";
  }
  return "object";
}

std::string toStr(const Value &v) {
  if (v.isString())
    return textOf(v);
  std::string out;
  appendStr(out, v, 0);
  return out;
}

std::string toRepr(const Value &v) {
  std::string out;
  appendRepr(out, v, 0);
  return out;
}

bool truthy(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None: return false;
  case Value::Kind::Bool: return v.asBool();
  case Value::Kind::Int: return v.asInt() != 0;
  case Value::Kind::Float: return v.asFloat() != 0.0;
  case Value::Kind::String: return !textOf(v).empty();
  case Value::Kind::List: return !v.items().empty();
  case Value::Kind::Dict: return !v.entries().empty();
  default: return true;
  }
}

bool equals(const Value &a, const Value &b) {
  if (isNumeric(a) && isNumeric(b))
    return compareNumbers(a, b) == 0;
  if (a.kind() != b.kind())
    return false;
  // One object is equal to itself without a look inside (Python's identity shortcut, which also
  // makes [nan] == [nan] when both are the same list).
  if (a.object() && a.object() == b.object())
    return true;
  chargeWork(1);
  switch (a.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None: return true;
  case Value::Kind::String:
    if (textOf(a).size() != textOf(b).size())
      return false;
    chargeWork(textOf(a).size() / 16);
    return textOf(a) == textOf(b);
  case Value::Kind::List: {
    if (a.isTuple() != b.isTuple())
      return false;
    llvm::ArrayRef<Value> x = a.items(), y = b.items();
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i]))
        return false;
    return true;
  }
  case Value::Kind::Dict: {
    if (a.entries().size() != b.entries().size())
      return false;
    const auto &other = static_cast<const DictObject &>(*b.object());
    for (const auto &[key, value] : a.entries()) {
      const Value *found = other.find(key);
      if (!found || !equals(value, *found))
        return false;
    }
    return true;
  }
  default: return a.object() == b.object(); // namespaces, callables, iterators: identity
  }
}

bool less(const Value &a, const Value &b) {
  if (isNumeric(a) && isNumeric(b))
    return compareNumbers(a, b) == -1;
  if (a.isUndefined() || b.isUndefined()) {
    const Value &u = a.isUndefined() ? a : b;
    fail(u.asString().empty() ? std::string("an undefined value was compared") : u.asString().str());
  }
  chargeWork(1);
  if (a.isString() && b.isString()) {
    chargeWork(std::min(textOf(a).size(), textOf(b).size()) / 16);
    return textOf(a) < textOf(b); // UTF-8 byte order is code point order
  }
  if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
    llvm::ArrayRef<Value> x = a.items(), y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i]))
        return less(x[i], y[i]);
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
}

bool hashable(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined: // jinja2's Undefined defines __hash__
  case Value::Kind::None:
  case Value::Kind::Bool:
  case Value::Kind::Int:
  case Value::Kind::Float:
  case Value::Kind::String: return true;
  case Value::Kind::List:
    return v.isTuple() && std::all_of(v.items().begin(), v.items().end(), [](const Value &x) { return hashable(x); });
  default: return false;
  }
}

Value markup(std::string text) { return Value::markupString(std::move(text)); }
bool isMarkup(const Value &value) { return value.isMarkup(); }

std::string htmlEscape(llvm::StringRef text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&#34;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  }
  return out;
}

const Value *Scope::lookup(llvm::StringRef name) const {
  for (const Scope *s = this; s; s = s->parent.get()) {
    auto it = s->variables.find(name);
    if (it != s->variables.end())
      return &it->second;
  }
  return nullptr;
}

Value *NamespaceObject::find(llvm::StringRef name) {
  for (auto &[key, value] : attributes)
    if (key == name)
      return &value;
  return nullptr;
}

//===--- json.dumps ---------------------------------------------------------===//

namespace {

class JsonWriter {
public:
  JsonWriter(const JsonFormat &format, size_t maxBytes) : format_(format), maxBytes_(maxBytes) {}

  void write(const Value &v, unsigned level) {
    check();
    switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.asBool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.asInt()); return;
    case Value::Kind::Float: out += floatText(v.asFloat()); return;
    case Value::Kind::String: py::appendJsonString(out, textOf(v), format_.ensureAscii); return;
    case Value::Kind::List: writeList(v.items(), level); return;
    case Value::Kind::Dict: writeDict(v, level); return;
    default: fail("Object of type " + typeName(v) + " is not JSON serializable");
    }
  }

  std::string out;

private:
  static std::string floatText(double f) {
    if (std::isnan(f))
      return "NaN";
    if (std::isinf(f))
      return f < 0 ? "-Infinity" : "Infinity";
    return py::formatFloat(f);
  }
  void check() {
    if (out.size() > maxBytes_)
      fail("tojson output passes the limit of " + std::to_string(maxBytes_) + " bytes");
  }
  void newline(unsigned level) {
    out += '\n';
    for (unsigned i = 0; i < level; ++i) {
      out += *format_.indent;
      check();
    }
  }

  void writeList(llvm::ArrayRef<Value> items, unsigned level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += format_.itemSeparator;
      if (format_.indent)
        newline(level + 1);
      write(items[i], level + 1);
    }
    if (format_.indent)
      newline(level);
    out += ']';
  }

  void writeKey(const Value &key) {
    switch (key.kind()) {
    case Value::Kind::String: py::appendJsonString(out, textOf(key), format_.ensureAscii); return;
    case Value::Kind::Int: out += '"' + std::to_string(key.asInt()) + '"'; return;
    case Value::Kind::Float: out += '"' + floatText(key.asFloat()) + '"'; return;
    case Value::Kind::Bool: out += key.asBool() ? "\"true\"" : "\"false\""; return;
    case Value::Kind::None: out += "\"null\""; return;
    default: fail("keys must be str, int, float, bool or None, not " + typeName(key));
    }
  }

  void writeDict(const Value &dict, unsigned level) {
    std::vector<const std::pair<Value, Value> *> entries;
    for (const auto &entry : dict.entries())
      entries.push_back(&entry);
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (format_.sortKeys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto *x, const auto *y) { return less(x->first, y->first); });
    out += '{';
    bool first = true;
    for (const auto *entry : entries) {
      if (!first)
        out += format_.itemSeparator;
      first = false;
      if (format_.indent)
        newline(level + 1);
      writeKey(entry->first);
      out += format_.keySeparator;
      write(entry->second, level + 1);
    }
    if (format_.indent)
      newline(level);
    out += '}';
  }

  const JsonFormat &format_;
  size_t maxBytes_;
};

} // namespace

std::string dumpJson(const Value &value, const JsonFormat &format, size_t maxBytes) {
  JsonWriter writer(format, maxBytes);
  writer.write(value, 0);
  if (writer.out.size() > maxBytes)
    fail("tojson output passes the limit of " + std::to_string(maxBytes) + " bytes");
  return std::move(writer.out);
}

} // namespace helm::chat
