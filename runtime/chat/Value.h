//===- Value.h - the values a chat template computes with ---------------------------===//
//
// A template value is what a Python object is to jinja2: undefined, none, bool, int (64-bit here:
// an overflow is an error, not a big integer), float, str (UTF-8), list or tuple, dict (keys in
// insertion order, as Python's), and, inside the engine, namespaces, callables (macros, globals,
// bound methods) and one-pass iterators (what jinja2's select/map filters return).
//
// Lists, tuples, dicts and strings are immutable and shared (copying a Value copies a pointer): the
// sandbox transformers renders in forbids list.append and dict.update, so nothing can observe the
// sharing. Only a namespace changes after it is made (`{% set ns.x = ... %}`).
//
// JSON comes in through parseJson, which keeps object keys in their order as json.loads does, so
// `tools | tojson` writes a tool's keys in the order the request gave them (the server builds its
// values from its ordered request JSON directly, runtime/server/ChatPrompt).
//
//===----------------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CHAT_VALUE_H
#define HELM_RUNTIME_CHAT_VALUE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace helm::chat {

class Value;

/// The shared body of a string, list, dict, namespace, callable or iterator value.
struct Object {
  virtual ~Object() = default;
};

class Value {
public:
  enum class Kind : uint8_t {
    Undefined, None, Bool, Int, Float, String, List, Dict,
    Namespace, Callable, Iterator, Loop // made by templates only
  };

  /// Undefined (jinja2's Undefined: prints as "", is false, fails when used as an object).
  Value() = default;
  /// An undefined value that remembers why, for the error if it is used: "'x' is undefined".
  static Value undefined(std::string why);
  static Value none();
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value number(double value);
  static Value string(std::string text);
  /// A markupsafe.Markup string (what |safe and |tojson|safe give): see Engine.h's markup().
  static Value markupString(std::string text);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  /// A dict from entries in order; a repeated key keeps its first position and its last value.
  static Value dict(std::vector<std::pair<Value, Value>> entries);
  static Value dict(std::vector<std::pair<std::string, Value>> entries);

  /// JSON text to a value: objects keep their key order (dicts), integers that fit int64 are ints,
  /// other numbers floats. Nesting deeper than kMaxDepth is an error.
  static llvm::Expected<Value> parseJson(llvm::StringRef text);
  /// json.dumps(value, ensure_ascii=False): separators ", " and ": ". Undefined, namespaces,
  /// callables and iterators are not JSON: an error, as json.dumps raises.
  llvm::Expected<std::string> toJson() const;

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::Undefined; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isString() const { return kind_ == Kind::String; }
  bool isMarkup() const { return kind_ == Kind::String && markup_; }
  bool isList() const { return kind_ == Kind::List; } // lists and tuples
  bool isTuple() const;
  bool isDict() const { return kind_ == Kind::Dict; }
  /// int or float (bool excluded).
  bool isNumber() const { return kind_ == Kind::Int || kind_ == Kind::Float; }

  bool asBool() const { return scalar_.boolean; }
  int64_t asInt() const { return scalar_.integer; }
  double asFloat() const { return scalar_.real; }
  /// The text of a string, or why an undefined value is undefined ("" if not known).
  llvm::StringRef asString() const;
  llvm::ArrayRef<Value> items() const;                       // list or tuple
  llvm::ArrayRef<std::pair<Value, Value>> entries() const;   // dict
  /// The dict entry whose key is the string `key`, or nullptr.
  const Value *find(llvm::StringRef key) const;
  /// Nesting of lists and dicts (a scalar is 0, [[1]] is 2).
  unsigned depth() const;
  /// Whether a namespace, callable, iterator or loop is in this value (what a reference cycle
  /// could pass through).
  bool mayHoldReferences() const;

  /// The deepest nesting a value may have: deeper JSON input, and deeper values a template builds,
  /// are errors (printing, comparing and freeing a value recurse once per level).
  static constexpr unsigned kMaxDepth = 256;

  // For the engine: the shared body of a non-scalar value.
  const std::shared_ptr<Object> &object() const { return object_; }
  static Value fromObject(Kind kind, std::shared_ptr<Object> object);

private:
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  union {
    bool boolean;
    int64_t integer;
    double real;
  } scalar_{};
  std::shared_ptr<Object> object_;
};

/// Destroys `values` without recursing through what they hold. A destructor already freeing
/// values on this thread takes them into its queue, so a long chain of objects (a namespace
/// holding a namespace holding ..., built in a loop) is freed in a loop, not on the stack. Objects
/// that can hold a namespace, iterator, callable or loop free their values through this.
void releaseValues(std::vector<Value> &&values);

/// The bodies behind Value's kinds.
struct StringObject : Object {
  explicit StringObject(std::string text) : text(std::move(text)) {}
  std::string text;
};

struct ListObject : Object {
  ~ListObject() override {
    if (holdsReferences) // plain data nests at most kMaxDepth: only references can chain on
      releaseValues(std::move(items));
  }
  std::vector<Value> items;
  bool tuple = false;
  bool holdsReferences = false;
  unsigned depth = 1;
};

struct DictObject : Object {
  ~DictObject() override;
  std::vector<std::pair<Value, Value>> entries;
  bool holdsReferences = false;
  unsigned depth = 1;
  /// The entry for `key` (Python equality: 1, 1.0 and True are one key), or nullptr.
  const Value *find(const Value &key) const;
  const Value *findString(llvm::StringRef key) const;
  /// Adds an entry while the dict is being made; a key already present keeps its place and takes
  /// the new value (Python's d[k] = v).
  void insert(Value key, Value value);
  /// Where each string key is, once the dict is large enough for an index to pay.
  llvm::StringMap<size_t> stringIndex;
};

} // namespace helm::chat

#endif
