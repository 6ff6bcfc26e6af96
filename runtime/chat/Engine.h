//===- Engine.h - the chat-template engine's parts (private to runtime/chat) --------===//
//
// The pieces behind ChatTemplate, one file each:
//   Lexer.cpp       template text -> tokens, with jinja2's whitespace rules (trim_blocks,
//                   lstrip_blocks, `-` and `+`) reproduced from its lexer's regular expressions
//   Parser.cpp      tokens -> the syntax tree below (jinja2's grammar and operator precedence);
//                   constructs outside the subset are refused here, by name and line
//   Semantics.cpp   Python's meaning of the operators on values: str(), repr(), truth, ==, <, +,
//                   json.dumps
//   Render.cpp      the tree-walking interpreter: scopes as jinja2 has them (a for-loop iteration
//                   and a macro call are scopes, an if is not), loops, macros, and the limits
//   Builtins.cpp    filters, tests, globals and the str / dict / list methods templates call
//
// Errors inside the engine are thrown as TemplateError and caught at ChatTemplate's two entry
// points, which return them as llvm::Error: the evaluator is recursive, and one throw per failure
// is simpler and safer than a check after every call. Nothing is thrown past this library.
//
//===----------------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CHAT_ENGINE_H
#define HELM_RUNTIME_CHAT_ENGINE_H

#include "runtime/chat/ChatTemplate.h"
#include "runtime/chat/Value.h"

#include "llvm/ADT/StringMap.h"

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace helm::chat {

/// A failure anywhere in parsing or rendering; `line` is 0 when no template line applies.
struct TemplateError {
  std::string message;
  int line = 0;
  bool raisedByTemplate = false; // raise_exception(): the template's own message, without a line
};
[[noreturn]] void fail(const std::string &message, int line = 0);

/// An undefined value used where a value is needed: its reason ("'x' is undefined"), or `fallback`.
[[noreturn]] inline void failUndefined(const Value &undefined, int line,
                                       llvm::StringRef fallback = "an undefined value was used") {
  llvm::StringRef why = undefined.asString();
  fail(why.empty() ? fallback.str() : why.str(), line);
}

/// Python's numeric tower: bool is an int, ints and bools are numbers, and so are floats.
inline bool isIntLike(const Value &v) { return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool; }
inline bool isNumeric(const Value &v) { return isIntLike(v) || v.kind() == Value::Kind::Float; }
inline int64_t intOf(const Value &v) { return v.kind() == Value::Kind::Bool ? int64_t(v.asBool()) : v.asInt(); }
inline double floatOf(const Value &v) { return v.kind() == Value::Kind::Float ? v.asFloat() : double(intOf(v)); }

//===--- tokens ---------------------------------------------------------------===//

enum class TokenKind { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenKind kind;
  std::string text; // data, name, operator, or a string literal's decoded value
  int line = 1;
  int64_t integer = 0;
  double real = 0;
};

/// Tokenizes `source` as jinja2 does with trim_blocks and lstrip_blocks (raw blocks become data).
std::vector<Token> tokenize(llvm::StringRef source);

//===--- syntax tree ----------------------------------------------------------===//

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class ExprKind {
  Literal, Name, List, Tuple, Dict, GetAttr, GetItem, Slice, Call, Filter, Test, Negate, Plus, Not, Binary,
  Compare, And, Or, Conditional, Concat
};
enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

/// A call's argument: positional when `keyword` is empty.
struct Argument {
  std::string keyword;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;                                      // Literal
  std::string name;                                   // Name; GetAttr's attribute; Filter's, Test's name
  ExprPtr operand;                                    // the object of GetAttr/GetItem/Slice/Call, the
                                                      // value of Filter/Test/Negate/Plus/Not, the left
                                                      // of Binary/And/Or/Compare, Conditional's "then";
                                                      // null in a block filter (the block's text)
  ExprPtr other;                                      // GetItem's index, right of Binary/And/Or,
                                                      // Conditional's "else" (null: undefined)
  ExprPtr condition;                                  // Conditional's test
  ExprPtr sliceStart, sliceStop, sliceStep;           // Slice (each may be null)
  std::vector<ExprPtr> elements;                      // List/Tuple/Concat; Dict: key, value, ...
  std::vector<Argument> arguments;                    // Call/Filter/Test
  BinaryOp binaryOp = BinaryOp::Add;
  std::vector<std::pair<CompareOp, ExprPtr>> comparisons; // Compare: operand op1 e1 op2 e2 ...
  bool negated = false;                               // Test: `is not`
  unsigned depth = 1;                                 // the deepest path below, this node included
};

/// An assignment target: a name, a namespace attribute (`ns.x`, set only) or a tuple of targets.
struct Target {
  enum class Kind { Name, NamespaceAttribute, Tuple } kind = Kind::Name;
  std::string name, attribute;
  std::vector<Target> items;
};

struct Parameter {
  std::string name;
  ExprPtr defaultValue; // null: undefined when not passed
};

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Scope, Break, Continue };

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                                   // Text
  ExprPtr expr;                                       // Output, Set's value, For's iterable,
                                                      // CallBlock's call, SetBlock/FilterBlock's
                                                      // filter chain (null: none)
  std::vector<std::pair<ExprPtr, Body>> branches;     // If: if and elif conditions with their bodies
  Body body, elseBody;                                // For, If (else), blocks
  Target target;                                      // For, Set, SetBlock
  ExprPtr loopFilter;                                 // For: `for x in xs if cond`
  std::string macroName;                              // Macro
  std::vector<Parameter> parameters;                  // Macro, CallBlock (the caller's)
  bool usesCaller = false, usesVarargs = false, usesKwargs = false; // Macro, CallBlock
  std::vector<std::pair<Target, ExprPtr>> assignments; // With
};

struct TemplateAst {
  Body body;
};

/// Parses template text (the caller has checked it is UTF-8). Throws TemplateError.
std::shared_ptr<const TemplateAst> parseTemplate(llvm::StringRef source);

/// Whether jinja2 has a filter / test of this name, and whether this engine implements a filter
/// (it implements every test).
bool isJinjaFilter(llvm::StringRef name);
bool isSupportedFilter(llvm::StringRef name);
bool isJinjaTest(llvm::StringRef name);

//===--- runtime objects ------------------------------------------------------===//

class Renderer;
struct Scope;

/// jinja2's Namespace: attributes set with `{% set ns.x = ... %}`.
struct NamespaceObject : Object {
  ~NamespaceObject() override {
    std::vector<Value> values;
    for (auto &attribute : attributes)
      values.push_back(std::move(attribute.second));
    releaseValues(std::move(values));
  }
  std::vector<std::pair<std::string, Value>> attributes;
  Value *find(llvm::StringRef name);
};

/// A callable: a global function, a bound method of a str/dict/list, or a macro (with the scope
/// it was defined in, for the names its body reads).
struct CallableObject : Object {
  ~CallableObject() override {
    std::vector<Value> values;
    values.push_back(std::move(self));
    releaseValues(std::move(values));
  }
  enum class Kind { Global, Method, Macro, LoopCycle, LoopChanged } kind;
  std::string name;
  Value self;                      // Method: the object; LoopCycle, LoopChanged: the loop
  const Stmt *macro = nullptr;     // Macro (a Macro statement or a CallBlock's body as `caller`)
  std::shared_ptr<Scope> closure;  // Macro
};

/// What jinja2's select/map/unique/reverse filters return: a generator, iterable once, always true
/// and without a length.
struct IteratorObject : Object {
  ~IteratorObject() override { releaseValues(std::move(items)); }
  std::vector<Value> items;
  bool consumed = false;
  std::string typeName;
};

/// A for loop's `loop` variable.
struct LoopObject : Object {
  ~LoopObject() override {
    releaseValues(std::move(items));
    if (lastChanged)
      releaseValues(std::move(*lastChanged));
  }
  int64_t index0 = 0, length = 0;
  std::vector<Value> items; // previtem / nextitem
  int64_t depth0 = 0;
  std::optional<std::vector<Value>> lastChanged; // loop.changed()'s last arguments
};

/// The longest list a template may build (lists also count against RenderOptions::maxBytesMade).
constexpr size_t kMaxListItems = size_t(1) << 20;

/// Work done away from the renderer (comparing, printing) is counted against the render running
/// on this thread: `units` steps (one per element, one per 16 bytes read), which throws past the
/// limit. Outside a render (Value's own JSON code), nothing.
void chargeWork(size_t units);
/// The longest string a value may print as in the render running on this thread (SIZE_MAX
/// outside one): printing a list that holds one long string a million times stops here.
size_t currentStringLimit();

/// Python's type name of a value, for messages ("'int' object is not iterable").
std::string typeName(const Value &value);
/// str(value) (markup strings as their text); undefined prints as "".
std::string toStr(const Value &value);
/// repr(value) as Python writes it inside a list.
std::string toRepr(const Value &value);
/// bool(value).
bool truthy(const Value &value);
/// a == b with Python's rules (1 == 1.0 == True; lists element-wise; dicts by content).
bool equals(const Value &a, const Value &b);
/// a < b etc.; throws on types Python cannot order.
bool less(const Value &a, const Value &b);
/// Whether a value can be a dict key (str, number, bool, none, undefined, tuples of those).
bool hashable(const Value &value);
/// A string that is markupsafe.Markup (from |safe, |e, |tojson|safe...): `+` escapes the other
/// string, as Markup.__add__ does.
Value markup(std::string text);
bool isMarkup(const Value &value);
/// markupsafe.escape on text.
std::string htmlEscape(llvm::StringRef text);

/// json.dumps's options as transformers' tojson passes them.
struct JsonFormat {
  bool ensureAscii = false;
  std::optional<std::string> indent; // nullopt: one line
  std::string itemSeparator = ", ", keySeparator = ": ";
  bool sortKeys = false;
};
/// json.dumps(value, ...): throws TemplateError for what Python cannot serialize, or once the text
/// passes `maxBytes`.
std::string dumpJson(const Value &value, const JsonFormat &format, size_t maxBytes);

//===--- the renderer ---------------------------------------------------------===//

/// A chain of variable scopes: globals <- the template's variables <- loop iterations / macro calls.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent) : parent(std::move(parent)) {}
  std::shared_ptr<Scope> parent;
  llvm::StringMap<Value> variables;
  const Value *lookup(llvm::StringRef name) const;
};

enum class Flow { Normal, Break, Continue };

class Renderer {
public:
  Renderer(const TemplateAst &ast, const RenderOptions &options);
  ~Renderer();
  std::string render(const Value &variables);

  // For Builtins.cpp.
  Value call(const Value &callee, std::vector<Value> positional, std::vector<std::pair<std::string, Value>> keywords,
             int line);
  Value applyFilter(llvm::StringRef name, const Value &value, std::vector<Value> positional,
                    std::vector<std::pair<std::string, Value>> keywords, int line);
  bool applyTest(llvm::StringRef name, const Value &value, std::vector<Value> positional,
                 std::vector<std::pair<std::string, Value>> keywords, int line);
  Value getAttribute(const Value &object, llvm::StringRef name, int line);
  Value getItem(const Value &object, const Value &index, int line);
  /// The items a for loop over `value` visits (consumes an iterator).
  std::vector<Value> iterate(const Value &value, int line);
  /// Counts work against the render's limits; throws past them.
  void chargeSteps(size_t steps, int line);
  void chargeBytes(size_t bytes, int line);
  /// A list / tuple / dict / string the template made, checked against the limits.
  Value makeList(std::vector<Value> items, bool tuple, int line);
  Value makeDict(std::vector<std::pair<Value, Value>> entries, int line);
  Value makeString(std::string text, int line);
  std::shared_ptr<NamespaceObject> makeNamespace();
  /// A namespace given a value that may lead back to it: held until the end of the render.
  void keepForCleanup(std::shared_ptr<NamespaceObject> ns) {
    if (namespaces_.empty() || namespaces_.back() != ns)
      namespaces_.push_back(std::move(ns));
  }
  const RenderOptions &options() const { return options_; }

private:
  Flow execBody(const Body &body, const std::shared_ptr<Scope> &scope, std::string &out);
  Flow exec(const Stmt &stmt, const std::shared_ptr<Scope> &scope, std::string &out);
  Flow execStatement(const Stmt &stmt, const std::shared_ptr<Scope> &scope, std::string &out);
  void execFor(const Stmt &stmt, const std::shared_ptr<Scope> &scope, std::string &out);
  Value eval(const Expr &expr, const std::shared_ptr<Scope> &scope);
  Value evalFilterChain(const Expr &filter, const std::shared_ptr<Scope> &scope, const Value &blockText);
  Value evalCompare(const Expr &expr, const std::shared_ptr<Scope> &scope);
  Value binary(BinaryOp op, const Value &left, const Value &right, int line);
  Value slice(const Value &object, const Expr &expr, const std::shared_ptr<Scope> &scope);
  void evalArguments(const Expr &expr, const std::shared_ptr<Scope> &scope, std::vector<Value> &positional,
                     std::vector<std::pair<std::string, Value>> &keywords);
  void assign(const Target &target, const Value &value, const std::shared_ptr<Scope> &scope, int line);
  Value callMacro(const CallableObject &macro, std::vector<Value> positional,
                  std::vector<std::pair<std::string, Value>> keywords, int line);
  void write(std::string &out, llvm::StringRef text, int line);
  std::shared_ptr<Scope> newScope(std::shared_ptr<Scope> parent);
  /// A scope a macro or caller keeps (its closure): held until the end of the render.
  std::shared_ptr<Scope> capture(const std::shared_ptr<Scope> &scope);

  const TemplateAst &ast_;
  RenderOptions options_;
  size_t steps_ = 0, bytes_ = 0;
  unsigned depth_ = 0;
  unsigned filterDepth_ = 0; // filters applied by filters (map('map', ...)), see applyFilter
  // The only objects that can close a reference cycle, which shared_ptr alone would never free: a
  // macro holds the scope it was defined in (which holds the macro), and a namespace can be given
  // a value that leads back to it (`{% set ns.me = ns %}`). Every cycle passes through a captured
  // scope or such a namespace; clearing them at the end breaks it. Other scopes and namespaces
  // are freed as soon as they are out of reach.
  std::vector<std::shared_ptr<Scope>> scopes_;
  std::vector<std::shared_ptr<NamespaceObject>> namespaces_;

  friend class DepthGuard;
  friend class FilterDepthGuard;
};

/// The global functions transformers gives templates (raise_exception, strftime_now, namespace,
/// range, dict) and the builtin filter/test/method bodies.
Value globalFunction(llvm::StringRef name);
Value callGlobal(Renderer &renderer, const CallableObject &callee, std::vector<Value> &positional,
                 std::vector<std::pair<std::string, Value>> &keywords, int line);
Value callMethod(Renderer &renderer, const CallableObject &method, std::vector<Value> &positional,
                 std::vector<std::pair<std::string, Value>> &keywords, int line);
/// Whether `name` is a method of the value's Python type (for attribute lookup: methods first).
bool isMethodOf(const Value &value, llvm::StringRef name);
Value filterBody(Renderer &renderer, llvm::StringRef name, const Value &value, std::vector<Value> &positional,
                 std::vector<std::pair<std::string, Value>> &keywords, int line);
bool testBody(Renderer &renderer, llvm::StringRef name, const Value &value, std::vector<Value> &positional,
              std::vector<std::pair<std::string, Value>> &keywords, int line);

} // namespace helm::chat

#endif
