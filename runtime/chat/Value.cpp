//===- Value.cpp - template values, and JSON in and out ------------------------------===//
#include "runtime/chat/Value.h"

#include "runtime/chat/Engine.h"
#include "runtime/chat/PythonText.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace helm::chat {

//===--- construction -------------------------------------------------------===//

Value Value::fromObject(Kind kind, std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = kind;
  v.object_ = std::move(object);
  return v;
}

Value Value::undefined(std::string why) {
  if (why.empty())
    return Value();
  return fromObject(Kind::Undefined, std::make_shared<StringObject>(std::move(why)));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool value) {
  Value v;
  v.kind_ = Kind::Bool;
  v.scalar_.boolean = value;
  return v;
}

Value Value::integer(int64_t value) {
  Value v;
  v.kind_ = Kind::Int;
  v.scalar_.integer = value;
  return v;
}

Value Value::number(double value) {
  Value v;
  v.kind_ = Kind::Float;
  v.scalar_.real = value;
  return v;
}

Value Value::string(std::string text) { return fromObject(Kind::String, std::make_shared<StringObject>(std::move(text))); }

Value Value::markupString(std::string text) {
  Value v = string(std::move(text));
  v.markup_ = true;
  return v;
}

namespace {
Value makeSequence(std::vector<Value> items, bool tuple) {
  auto list = std::make_shared<ListObject>();
  unsigned deepest = 0;
  for (const Value &item : items) {
    deepest = std::max(deepest, item.depth());
    list->holdsReferences |= item.mayHoldReferences();
  }
  list->items = std::move(items);
  list->tuple = tuple;
  list->depth = deepest + 1;
  return Value::fromObject(Value::Kind::List, std::move(list));
}

// Below this many entries a dict is searched in order; above, through an index of its string keys.
constexpr size_t kIndexFrom = 8;
} // namespace

Value Value::list(std::vector<Value> items) { return makeSequence(std::move(items), false); }
Value Value::tuple(std::vector<Value> items) { return makeSequence(std::move(items), true); }

Value Value::dict(std::vector<std::pair<Value, Value>> entries) {
  auto dict = std::make_shared<DictObject>();
  unsigned deepest = 0;
  dict->entries.reserve(entries.size());
  for (auto &entry : entries) {
    deepest = std::max({deepest, entry.first.depth(), entry.second.depth()});
    dict->holdsReferences |= entry.second.mayHoldReferences();
    dict->insert(std::move(entry.first), std::move(entry.second));
  }
  dict->depth = deepest + 1;
  return fromObject(Kind::Dict, std::move(dict));
}

Value Value::dict(std::vector<std::pair<std::string, Value>> entries) {
  std::vector<std::pair<Value, Value>> converted;
  converted.reserve(entries.size());
  for (auto &entry : entries)
    converted.emplace_back(string(std::move(entry.first)), std::move(entry.second));
  return dict(std::move(converted));
}

bool Value::isTuple() const { return kind_ == Kind::List && static_cast<const ListObject &>(*object_).tuple; }

llvm::StringRef Value::asString() const {
  if ((kind_ == Kind::String || kind_ == Kind::Undefined) && object_)
    return static_cast<const StringObject &>(*object_).text;
  return "";
}

llvm::ArrayRef<Value> Value::items() const {
  if (kind_ != Kind::List)
    return {};
  return static_cast<const ListObject &>(*object_).items;
}

llvm::ArrayRef<std::pair<Value, Value>> Value::entries() const {
  if (kind_ != Kind::Dict)
    return {};
  return static_cast<const DictObject &>(*object_).entries;
}

const Value *Value::find(llvm::StringRef key) const {
  if (kind_ != Kind::Dict)
    return nullptr;
  return static_cast<const DictObject &>(*object_).findString(key);
}

unsigned Value::depth() const {
  if (kind_ == Kind::List)
    return static_cast<const ListObject &>(*object_).depth;
  if (kind_ == Kind::Dict)
    return static_cast<const DictObject &>(*object_).depth;
  return 0;
}

bool Value::mayHoldReferences() const {
  switch (kind_) {
  case Kind::List: return static_cast<const ListObject &>(*object_).holdsReferences;
  case Kind::Dict: return static_cast<const DictObject &>(*object_).holdsReferences;
  case Kind::Namespace:
  case Kind::Callable:
  case Kind::Iterator:
  case Kind::Loop: return true;
  default: return false;
  }
}

//===--- dicts --------------------------------------------------------------===//

const Value *DictObject::findString(llvm::StringRef key) const {
  if (!stringIndex.empty() || entries.size() > kIndexFrom) {
    auto it = stringIndex.find(key);
    return it == stringIndex.end() ? nullptr : &entries[it->second].second;
  }
  for (const auto &entry : entries)
    if (entry.first.isString() && entry.first.asString() == key)
      return &entry.second;
  return nullptr;
}

const Value *DictObject::find(const Value &key) const {
  if (key.isString())
    return findString(key.asString());
  for (const auto &entry : entries)
    if (!entry.first.isString() && equals(entry.first, key))
      return &entry.second;
  return nullptr;
}

void DictObject::insert(Value key, Value value) {
  Value *existing = const_cast<Value *>(find(key));
  if (existing) {
    *existing = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
  if (entries.size() > kIndexFrom) {
    if (stringIndex.empty()) {
      for (size_t i = 0; i < entries.size(); ++i)
        if (entries[i].first.isString())
          stringIndex.try_emplace(entries[i].first.asString(), i);
    } else if (entries.back().first.isString()) {
      stringIndex.try_emplace(entries.back().first.asString(), entries.size() - 1);
    }
  }
}

//===--- JSON in ------------------------------------------------------------===//

namespace {

// json.loads, keeping object key order. Also accepts NaN, Infinity and -Infinity, as Python does.
class JsonReader {
public:
  explicit JsonReader(llvm::StringRef text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skipSpace();
    if (pos_ != text_.size())
      error("extra data after the JSON value");
    return v;
  }

private:
  [[noreturn]] void error(const std::string &what) {
    fail("invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(llvm::StringRef word) {
    if (!text_.substr(pos_).starts_with(word))
      return false;
    pos_ += word.size();
    return true;
  }

  Value value(unsigned depth) {
    skipSpace();
    if (pos_ >= text_.size())
      error("unexpected end of text");
    char c = text_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= Value::kMaxDepth)
        error("nesting deeper than " + std::to_string(Value::kMaxDepth) + " levels");
      return c == '{' ? object(depth + 1) : array(depth + 1);
    }
    if (c == '"')
      return Value::string(string());
    if (consume("true"))
      return Value::boolean(true);
    if (consume("false"))
      return Value::boolean(false);
    if (consume("null"))
      return Value::none();
    if (consume("NaN"))
      return Value::number(std::nan(""));
    if (consume("Infinity"))
      return Value::number(INFINITY);
    if (consume("-Infinity"))
      return Value::number(-INFINITY);
    return number();
  }

  Value object(unsigned depth) {
    ++pos_;
    std::vector<std::pair<Value, Value>> entries;
    skipSpace();
    if (consume("}"))
      return Value::dict(std::move(entries));
    while (true) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        error("expected a string key");
      Value key = Value::string(string());
      skipSpace();
      if (!consume(":"))
        error("expected ':'");
      entries.emplace_back(std::move(key), value(depth));
      skipSpace();
      if (consume("}"))
        return Value::dict(std::move(entries));
      if (!consume(","))
        error("expected ',' or '}'");
    }
  }

  Value array(unsigned depth) {
    ++pos_;
    std::vector<Value> items;
    skipSpace();
    if (consume("]"))
      return Value::list(std::move(items));
    while (true) {
      items.push_back(value(depth));
      skipSpace();
      if (consume("]"))
        return Value::list(std::move(items));
      if (!consume(","))
        error("expected ',' or ']'");
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > text_.size())
      error("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char h = text_[pos_ + k];
      if (!llvm::isHexDigit(h))
        error("bad \\u escape");
      v = v * 16 + llvm::hexDigitValue(h);
    }
    pos_ += 4;
    return v;
  }

  std::string string() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size())
        error("unterminated string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        error("control character in a string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= text_.size())
        error("unterminated string");
      char e = text_[pos_++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        unsigned c1 = hex4();
        if (c1 >= 0xD800 && c1 <= 0xDBFF && text_.substr(pos_).starts_with("\\u")) {
          size_t save = pos_;
          pos_ += 2;
          unsigned c2 = hex4();
          if (c2 >= 0xDC00 && c2 <= 0xDFFF) {
            py::appendUtf8(out, 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00));
            break;
          }
          pos_ = save;
        }
        if (c1 >= 0xD800 && c1 <= 0xDFFF)
          error("a lone surrogate \\u escape is not text");
        py::appendUtf8(out, c1);
        break;
      }
      default: error(std::string("bad escape \\") + e);
      }
    }
  }

  Value number() {
    size_t start = pos_;
    bool isFloat = false;
    if (pos_ < text_.size() && text_[pos_] == '-')
      ++pos_;
    if (pos_ >= text_.size() || !llvm::isDigit(text_[pos_]))
      error("unexpected character");
    if (text_[pos_] == '0')
      ++pos_;
    else
      while (pos_ < text_.size() && llvm::isDigit(text_[pos_]))
        ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      size_t digits = ++pos_;
      while (pos_ < text_.size() && llvm::isDigit(text_[pos_]))
        ++pos_;
      if (pos_ == digits)
        error("expected digits after '.'");
      isFloat = true;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      size_t digits = pos_;
      while (pos_ < text_.size() && llvm::isDigit(text_[pos_]))
        ++pos_;
      if (pos_ == digits)
        error("expected exponent digits");
      isFloat = true;
    }
    std::string literal = text_.slice(start, pos_).str();
    if (!isFloat) {
      errno = 0;
      char *end = nullptr;
      long long v = std::strtoll(literal.c_str(), &end, 10);
      if (errno == 0)
        return Value::integer(v);
      // Beyond int64: Python keeps the exact integer; this engine keeps the nearest double.
    }
    return Value::number(std::strtod(literal.c_str(), nullptr));
  }

  llvm::StringRef text_;
  size_t pos_ = 0;
};

llvm::Error toLlvmError(const TemplateError &e) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), e.message);
}

} // namespace

llvm::Expected<Value> Value::parseJson(llvm::StringRef text) {
  if (!py::isValidUtf8(text))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "invalid JSON: not valid UTF-8");
  try {
    return JsonReader(text).document();
  } catch (const TemplateError &e) {
    return toLlvmError(e);
  } catch (const std::bad_alloc &) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "out of memory reading JSON");
  }
}

llvm::Expected<std::string> Value::toJson() const {
  if (depth() > kMaxDepth) // only a value built by hand can be; writing it would recurse as deep
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the value nests deeper than " + std::to_string(kMaxDepth) + " levels");
  try {
    return dumpJson(*this, JsonFormat(), SIZE_MAX);
  } catch (const TemplateError &e) {
    return toLlvmError(e);
  } catch (const std::bad_alloc &) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "out of memory writing JSON");
  }
}

//===--- freeing ------------------------------------------------------------===//

namespace {
/// The queue of the outermost releaseValues on this thread (null when none runs).
thread_local std::vector<Value> *releasing = nullptr;
} // namespace

void releaseValues(std::vector<Value> &&values) {
  if (releasing) {
    for (Value &v : values)
      releasing->push_back(std::move(v));
    values.clear();
    return;
  }
  std::vector<Value> queue = std::move(values);
  releasing = &queue;
  while (!queue.empty()) {
    Value last = std::move(queue.back());
    queue.pop_back();
    // `last` is destroyed here; what its object holds joins the queue instead of recursing.
  }
  releasing = nullptr;
}

DictObject::~DictObject() {
  if (!holdsReferences)
    return;
  std::vector<Value> values;
  values.reserve(entries.size() * 2);
  for (auto &[key, value] : entries) {
    values.push_back(std::move(key));
    values.push_back(std::move(value));
  }
  releaseValues(std::move(values));
}

} // namespace helm::chat
