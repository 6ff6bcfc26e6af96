//===- Render.cpp - the tree-walking interpreter ----------------------------------------===//
//
// Scopes follow jinja2's frames: the template's top level (the render variables and top-level
// sets), one scope per for-loop iteration (a set inside a loop does not outlive the iteration,
// which is why templates use namespaces), one per macro call, and one for the bodies of with,
// set and filter blocks and of transformers' generation block. An if is not a scope. A macro keeps
// the scope it was defined in and reads it when called (so it sees top-level variables set after
// its definition, as in jinja2).
//
// Every statement, expression and loop iteration is counted against RenderOptions::maxSteps, and
// so is reading text (one step per 16 bytes compared, searched or scanned), every string and list
// made against maxOutputBytes and maxBytesMade, and nesting against maxDepth: no input makes a
// render run much longer than its step budget.
//
//===----------------------------------------------------------------------------===//
#include "runtime/chat/Engine.h"
#include "runtime/chat/PythonText.h"

#include <cmath>
#include <functional>

namespace helm::chat {

class DepthGuard {
public:
  DepthGuard(Renderer &renderer, int line) : renderer_(renderer) {
    // Checked before counting: a failing constructor runs no destructor to count back.
    if (renderer_.depth_ >= renderer_.options_.maxDepth)
      fail("the template nests deeper than " + std::to_string(renderer_.options_.maxDepth) +
               " levels at run time (macro calls, blocks and expressions)",
           line);
    ++renderer_.depth_;
  }
  ~DepthGuard() { --renderer_.depth_; }

private:
  Renderer &renderer_;
};

/// Filters applied by filters (map('map', 'map', ...)) stop at kMaxFilterDepth levels, well
/// before the nesting limit: each level is a frame of applyFilter, of filterBody (a lookup in
/// Builtins.cpp's table of filters) and of the filter's own function, filterMap, about 4 KiB
/// together under GCC 12's ASan (when filterBody held every filter, 20 KiB: 500 levels overflowed
/// an 8 MiB stack), and real templates nest them a level or two.
class FilterDepthGuard {
public:
  static constexpr unsigned kMaxFilterDepth = 64;
  FilterDepthGuard(Renderer &renderer, int line) : renderer_(renderer) {
    if (renderer_.filterDepth_ >= kMaxFilterDepth)
      fail("filters applied by filters nest deeper than " + std::to_string(kMaxFilterDepth) + " levels", line);
    ++renderer_.filterDepth_;
  }
  ~FilterDepthGuard() { --renderer_.filterDepth_; }

private:
  Renderer &renderer_;
};

namespace {
// The render running on this thread, for chargeWork and currentStringLimit.
thread_local Renderer *currentRenderer = nullptr;


std::string objectTypeRepr(const Value &v) {
  if (v.isNone())
    return "None";
  std::string repr = "'";
  repr += typeName(v);
  repr += " object'";
  return repr;
}

// jinja2 quotes the type for a missing attribute but not for a missing element.
std::string elementMissing(const Value &object, const Value &index) {
  std::string type = objectTypeRepr(object);
  if (type.size() > 2 && type.front() == '\'')
    type = type.substr(1, type.size() - 2);
  return type + " has no element " + toRepr(index);
}

Value missingAttribute(const Value &object, llvm::StringRef name) {
  return Value::undefined(objectTypeRepr(object) + " has no attribute " + py::repr(name));
}
} // namespace

Renderer::Renderer(const TemplateAst &ast, const RenderOptions &options) : ast_(ast), options_(options) {}

Renderer::~Renderer() {
  // Break the cycles (see scopes_). Every scope and namespace is still held by the vectors while
  // its contents go, so no destructor recurses through a chain of them.
  for (const auto &scope : scopes_) {
    scope->variables.clear();
    scope->parent.reset();
  }
  for (const auto &ns : namespaces_)
    ns->attributes.clear();
}

std::shared_ptr<Scope> Renderer::newScope(std::shared_ptr<Scope> parent) {
  return std::make_shared<Scope>(std::move(parent));
}

std::shared_ptr<Scope> Renderer::capture(const std::shared_ptr<Scope> &scope) {
  if (scopes_.empty() || scopes_.back() != scope) {
    chargeBytes(sizeof(Scope), 0);
    scopes_.push_back(scope);
  }
  return scope;
}

std::shared_ptr<NamespaceObject> Renderer::makeNamespace() {
  chargeBytes(sizeof(NamespaceObject), 0);
  return std::make_shared<NamespaceObject>();
}

void Renderer::chargeSteps(size_t steps, int line) {
  steps_ += steps;
  if (steps_ > options_.maxSteps)
    fail("the render passes the limit of " + std::to_string(options_.maxSteps) + " steps (a runaway loop?)", line);
}

void Renderer::chargeBytes(size_t bytes, int line) {
  bytes_ += bytes;
  if (bytes_ > options_.maxBytesMade)
    fail("the render made more than " + std::to_string(options_.maxBytesMade) + " bytes of strings and lists", line);
}

Value Renderer::makeString(std::string text, int line) {
  if (text.size() > options_.maxOutputBytes)
    fail("a string passes the limit of " + std::to_string(options_.maxOutputBytes) + " bytes", line);
  chargeBytes(text.size(), line);
  return Value::string(std::move(text));
}

Value Renderer::makeList(std::vector<Value> items, bool tuple, int line) {
  if (items.size() > kMaxListItems)
    fail("a list passes the limit of " + std::to_string(kMaxListItems) + " items", line);
  chargeBytes(items.size() * sizeof(Value), line);
  Value v = tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  if (v.depth() > Value::kMaxDepth)
    fail("a value nests deeper than " + std::to_string(Value::kMaxDepth) + " levels", line);
  return v;
}

Value Renderer::makeDict(std::vector<std::pair<Value, Value>> entries, int line) {
  for (const auto &entry : entries)
    if (!hashable(entry.first))
      fail("unhashable type: '" + typeName(entry.first) + "'", line);
  chargeBytes(entries.size() * 2 * sizeof(Value), line);
  Value v = Value::dict(std::move(entries));
  if (v.depth() > Value::kMaxDepth)
    fail("a value nests deeper than " + std::to_string(Value::kMaxDepth) + " levels", line);
  return v;
}

void Renderer::write(std::string &out, llvm::StringRef text, int line) {
  if (out.size() + text.size() > options_.maxOutputBytes)
    fail("the output passes the limit of " + std::to_string(options_.maxOutputBytes) + " bytes", line);
  chargeBytes(text.size(), line);
  out += text;
}

void chargeWork(size_t units) {
  if (currentRenderer)
    currentRenderer->chargeSteps(units, 0);
}

size_t currentStringLimit() { return currentRenderer ? currentRenderer->options().maxOutputBytes : SIZE_MAX; }

std::string Renderer::render(const Value &variables) {
  struct Current {
    explicit Current(Renderer *r) : previous(currentRenderer) { currentRenderer = r; }
    ~Current() { currentRenderer = previous; }
    Renderer *previous;
  } current(this);
  auto globals = newScope(nullptr);
  for (llvm::StringRef name : {"raise_exception", "strftime_now", "namespace", "range", "dict", "lipsum", "cycler", "joiner"})
    globals->variables[name] = globalFunction(name);
  auto top = newScope(globals);
  for (const auto &[key, value] : variables.entries()) {
    if (!key.isString())
      fail("a render variable's name is not a string");
    if (value.depth() > Value::kMaxDepth)
      fail("the variable '" + key.asString().str() + "' nests deeper than " + std::to_string(Value::kMaxDepth) + " levels");
    top->variables[key.asString()] = value;
  }
  std::string out;
  execBody(ast_.body, top, out);
  return out;
}

//===--- statements ---------------------------------------------------------===//

Flow Renderer::execBody(const Body &body, const std::shared_ptr<Scope> &scope, std::string &out) {
  for (const auto &stmt : body) {
    Flow flow = exec(*stmt, scope, out);
    if (flow != Flow::Normal)
      return flow;
  }
  return Flow::Normal;
}

Flow Renderer::exec(const Stmt &stmt, const std::shared_ptr<Scope> &scope, std::string &out) {
  try {
    return execStatement(stmt, scope, out);
  } catch (TemplateError &e) {
    // Errors raised away from the syntax tree (comparisons, json.dumps) take the statement's line.
    if (e.line == 0)
      e.line = stmt.line;
    throw;
  }
}

Flow Renderer::execStatement(const Stmt &stmt, const std::shared_ptr<Scope> &scope, std::string &out) {
  DepthGuard guard(*this, stmt.line);
  chargeSteps(1, stmt.line);
  switch (stmt.kind) {
  case StmtKind::Text:
    write(out, stmt.text, stmt.line);
    return Flow::Normal;
  case StmtKind::Output: {
    Value v = eval(*stmt.expr, scope);
    if (v.isString())
      write(out, v.asString(), stmt.line);
    else
      write(out, toStr(v), stmt.line);
    return Flow::Normal;
  }
  case StmtKind::If:
    for (const auto &[condition, body] : stmt.branches)
      if (truthy(eval(*condition, scope)))
        return execBody(body, scope, out);
    return execBody(stmt.elseBody, scope, out);
  case StmtKind::For:
    execFor(stmt, scope, out);
    return Flow::Normal;
  case StmtKind::Set:
    assign(stmt.target, eval(*stmt.expr, scope), scope, stmt.line);
    return Flow::Normal;
  case StmtKind::SetBlock: {
    std::string text;
    Flow flow = execBody(stmt.body, newScope(scope), text);
    if (flow != Flow::Normal)
      return flow;
    Value v = makeString(std::move(text), stmt.line);
    if (stmt.expr)
      v = evalFilterChain(*stmt.expr, scope, v);
    assign(stmt.target, v, scope, stmt.line);
    return Flow::Normal;
  }
  case StmtKind::Macro: {
    auto macro = std::make_shared<CallableObject>();
    macro->kind = CallableObject::Kind::Macro;
    macro->name = stmt.macroName;
    macro->macro = &stmt;
    macro->closure = capture(scope);
    scope->variables[stmt.macroName] = Value::fromObject(Value::Kind::Callable, std::move(macro));
    return Flow::Normal;
  }
  case StmtKind::CallBlock: {
    auto caller = std::make_shared<CallableObject>();
    caller->kind = CallableObject::Kind::Macro;
    caller->name = "caller";
    caller->macro = &stmt;
    caller->closure = capture(scope);
    const Expr &call = *stmt.expr;
    Value callee = eval(*call.operand, scope);
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keywords;
    evalArguments(call, scope, positional, keywords);
    keywords.emplace_back("caller", Value::fromObject(Value::Kind::Callable, std::move(caller)));
    Value result = this->call(callee, std::move(positional), std::move(keywords), stmt.line);
    write(out, toStr(result), stmt.line);
    return Flow::Normal;
  }
  case StmtKind::FilterBlock: {
    std::string text;
    Flow flow = execBody(stmt.body, newScope(scope), text);
    if (flow != Flow::Normal)
      return flow;
    Value v = evalFilterChain(*stmt.expr, scope, makeString(std::move(text), stmt.line));
    write(out, toStr(v), stmt.line);
    return Flow::Normal;
  }
  case StmtKind::With: {
    auto inner = newScope(scope);
    for (const auto &[target, expr] : stmt.assignments)
      assign(target, eval(*expr, scope), inner, stmt.line);
    return execBody(stmt.body, inner, out);
  }
  case StmtKind::Scope:
    return execBody(stmt.body, newScope(scope), out);
  case StmtKind::Break:
    return Flow::Break;
  case StmtKind::Continue:
    return Flow::Continue;
  }
  return Flow::Normal;
}

namespace {
// The names a target binds (duplicates counted once, as a scope holds them).
size_t countNames(const Target &target) {
  std::vector<std::string> names;
  std::function<void(const Target &)> collect = [&](const Target &t) {
    if (t.kind == Target::Kind::Name && !llvm::is_contained(names, t.name) && t.name != "loop")
      names.push_back(t.name);
    for (const Target &item : t.items)
      collect(item);
  };
  collect(target);
  return names.size();
}
} // namespace

void Renderer::execFor(const Stmt &stmt, const std::shared_ptr<Scope> &scope, std::string &out) {
  Value iterable = eval(*stmt.expr, scope);
  std::vector<Value> items = iterate(iterable, stmt.line);
  if (stmt.loopFilter) {
    // jinja2 filters lazily; nothing a filter expression can do observes the difference.
    std::vector<Value> kept;
    for (Value &item : items) {
      chargeSteps(1, stmt.line);
      auto filterScope = newScope(scope);
      assign(stmt.target, item, filterScope, stmt.line);
      if (truthy(eval(*stmt.loopFilter, filterScope)))
        kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    execBody(stmt.elseBody, newScope(scope), out);
    return;
  }
  auto loop = std::make_shared<LoopObject>();
  loop->length = int64_t(items.size());
  loop->items = std::move(items);
  const std::vector<Value> &loopItems = loop->items;
  Value loopValue = Value::fromObject(Value::Kind::Loop, loop);
  std::shared_ptr<Scope> iteration;
  size_t boundNames = 1 + countNames(stmt.target);
  for (size_t i = 0; i < loopItems.size(); ++i) {
    chargeSteps(1, stmt.line);
    loop->index0 = int64_t(i);
    // Each iteration starts from a fresh scope. The last one is reused when nothing kept it: as it
    // is if the body set nothing beyond the loop's own names (which are all set again), else
    // emptied.
    if (iteration && iteration.use_count() == 1) {
      if (iteration->variables.size() != boundNames)
        iteration->variables.clear();
    } else {
      iteration = newScope(scope);
    }
    iteration->variables["loop"] = loopValue;
    assign(stmt.target, loopItems[i], iteration, stmt.line);
    if (execBody(stmt.body, iteration, out) == Flow::Break)
      break;
  }
}

void Renderer::assign(const Target &target, const Value &value, const std::shared_ptr<Scope> &scope, int line) {
  switch (target.kind) {
  case Target::Kind::Name:
    scope->variables[target.name] = value;
    return;
  case Target::Kind::NamespaceAttribute: {
    const Value *ns = scope->lookup(target.name);
    if (!ns || ns->kind() != Value::Kind::Namespace)
      fail("cannot assign attribute on non-namespace object ('" + target.name + "')", line);
    if (llvm::StringRef(target.attribute).starts_with("_"))
      fail("chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
               target.attribute + "'",
           line);
    auto &object = static_cast<NamespaceObject &>(*ns->object());
    if (value.mayHoldReferences())
      keepForCleanup(std::static_pointer_cast<NamespaceObject>(ns->object()));
    if (Value *slot = object.find(target.attribute))
      *slot = value;
    else
      object.attributes.emplace_back(target.attribute, value);
    return;
  }
  case Target::Kind::Tuple: {
    std::vector<Value> items = iterate(value, line);
    if (items.size() != target.items.size()) {
      if (items.size() > target.items.size())
        fail("too many values to unpack (expected " + std::to_string(target.items.size()) + ")", line);
      fail("not enough values to unpack (expected " + std::to_string(target.items.size()) + ", got " +
               std::to_string(items.size()) + ")",
           line);
    }
    for (size_t i = 0; i < items.size(); ++i)
      assign(target.items[i], items[i], scope, line);
    return;
  }
  }
}

//===--- expressions --------------------------------------------------------===//

void Renderer::evalArguments(const Expr &expr, const std::shared_ptr<Scope> &scope, std::vector<Value> &positional,
                             std::vector<std::pair<std::string, Value>> &keywords) {
  for (const Argument &a : expr.arguments) {
    Value v = eval(*a.value, scope);
    if (a.keyword.empty()) {
      positional.push_back(std::move(v));
    } else {
      for (auto &existing : keywords)
        if (existing.first == a.keyword)
          fail("keyword argument repeated: " + a.keyword, expr.line);
      keywords.emplace_back(a.keyword, std::move(v));
    }
  }
}

Value Renderer::eval(const Expr &expr, const std::shared_ptr<Scope> &scope) {
  DepthGuard guard(*this, expr.line);
  chargeSteps(1, expr.line);
  switch (expr.kind) {
  case ExprKind::Literal:
    return expr.literal;
  case ExprKind::Name:
    if (const Value *v = scope->lookup(expr.name))
      return *v;
    return Value::undefined("'" + expr.name + "' is undefined");
  case ExprKind::List:
  case ExprKind::Tuple: {
    std::vector<Value> items;
    items.reserve(expr.elements.size());
    for (const ExprPtr &e : expr.elements)
      items.push_back(eval(*e, scope));
    return makeList(std::move(items), expr.kind == ExprKind::Tuple, expr.line);
  }
  case ExprKind::Dict: {
    std::vector<std::pair<Value, Value>> entries;
    for (size_t i = 0; i + 1 < expr.elements.size(); i += 2) {
      Value key = eval(*expr.elements[i], scope);
      entries.emplace_back(std::move(key), eval(*expr.elements[i + 1], scope));
    }
    return makeDict(std::move(entries), expr.line);
  }
  case ExprKind::GetAttr:
    return getAttribute(eval(*expr.operand, scope), expr.name, expr.line);
  case ExprKind::GetItem: {
    Value object = eval(*expr.operand, scope);
    return getItem(object, eval(*expr.other, scope), expr.line);
  }
  case ExprKind::Slice:
    return slice(eval(*expr.operand, scope), expr, scope);
  case ExprKind::Call: {
    Value callee = eval(*expr.operand, scope);
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keywords;
    evalArguments(expr, scope, positional, keywords);
    return call(callee, std::move(positional), std::move(keywords), expr.line);
  }
  case ExprKind::Filter:
    return evalFilterChain(expr, scope, Value());
  case ExprKind::Test: {
    Value v = eval(*expr.operand, scope);
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keywords;
    evalArguments(expr, scope, positional, keywords);
    bool result = applyTest(expr.name, v, std::move(positional), std::move(keywords), expr.line);
    return Value::boolean(expr.negated ? !result : result);
  }
  case ExprKind::Negate:
  case ExprKind::Plus: {
    Value v = eval(*expr.operand, scope);
    bool negate = expr.kind == ExprKind::Negate;
    switch (v.kind()) {
    case Value::Kind::Bool: return Value::integer(negate ? -int64_t(v.asBool()) : int64_t(v.asBool()));
    case Value::Kind::Int:
      if (negate && v.asInt() == INT64_MIN)
        fail("integer overflow", expr.line);
      return Value::integer(negate ? -v.asInt() : v.asInt());
    case Value::Kind::Float: return Value::number(negate ? -v.asFloat() : v.asFloat());
    case Value::Kind::Undefined: failUndefined(v, expr.line, "an undefined value was negated");
    default:
      fail(std::string("bad operand type for unary ") + (negate ? "-" : "+") + ": '" + typeName(v) + "'", expr.line);
    }
  }
  case ExprKind::Not:
    return Value::boolean(!truthy(eval(*expr.operand, scope)));
  case ExprKind::Binary: {
    Value left = eval(*expr.operand, scope);
    Value right = eval(*expr.other, scope);
    return binary(expr.binaryOp, left, right, expr.line);
  }
  case ExprKind::Compare:
    return evalCompare(expr, scope);
  case ExprKind::And: {
    Value left = eval(*expr.operand, scope);
    return truthy(left) ? eval(*expr.other, scope) : left;
  }
  case ExprKind::Or: {
    Value left = eval(*expr.operand, scope);
    return truthy(left) ? left : eval(*expr.other, scope);
  }
  case ExprKind::Conditional:
    if (truthy(eval(*expr.condition, scope)))
      return eval(*expr.operand, scope);
    if (expr.other)
      return eval(*expr.other, scope);
    return Value::undefined("the inline if-expression on line " + std::to_string(expr.line) +
                            " evaluated to false and no else section was defined.");
  case ExprKind::Concat: {
    std::string text;
    for (const ExprPtr &e : expr.elements) {
      Value v = eval(*e, scope);
      text += v.isString() ? v.asString().str() : toStr(v);
      if (text.size() > options_.maxOutputBytes)
        fail("a string passes the limit of " + std::to_string(options_.maxOutputBytes) + " bytes", expr.line);
    }
    return makeString(std::move(text), expr.line);
  }
  }
  return Value();
}

Value Renderer::evalFilterChain(const Expr &filter, const std::shared_ptr<Scope> &scope, const Value &blockText) {
  Value value = filter.operand ? eval(*filter.operand, scope) : blockText;
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  evalArguments(filter, scope, positional, keywords);
  return applyFilter(filter.name, value, std::move(positional), std::move(keywords), filter.line);
}

namespace {
bool contains(Renderer &renderer, const Value &container, const Value &item, int line) {
  switch (container.kind()) {
  case Value::Kind::String:
    if (!item.isString())
      fail("'in <string>' requires string as left operand, not " + typeName(item), line);
    renderer.chargeSteps(1 + container.asString().size() / 16, line);
    return py::find(container.asString(), item.asString()) != llvm::StringRef::npos;
  case Value::Kind::List:
    renderer.chargeSteps(container.items().size(), line);
    for (const Value &x : container.items())
      if (equals(x, item))
        return true;
    return false;
  case Value::Kind::Dict:
    if (!hashable(item))
      fail("unhashable type: '" + typeName(item) + "'", line);
    return static_cast<const DictObject &>(*container.object()).find(item) != nullptr;
  case Value::Kind::Undefined:
    return false; // jinja2's Undefined iterates as empty
  case Value::Kind::Iterator: {
    auto &it = static_cast<IteratorObject &>(*container.object());
    if (it.consumed)
      return false;
    it.consumed = true;
    for (const Value &x : it.items)
      if (equals(x, item))
        return true;
    return false;
  }
  default:
    fail("argument of type '" + typeName(container) + "' is not iterable", line);
  }
}
} // namespace

Value Renderer::evalCompare(const Expr &expr, const std::shared_ptr<Scope> &scope) {
  Value left = eval(*expr.operand, scope);
  for (const auto &[op, rightExpr] : expr.comparisons) {
    Value right = eval(*rightExpr, scope);
    bool result = false;
    switch (op) {
    case CompareOp::Eq: result = equals(left, right); break;
    case CompareOp::Ne: result = !equals(left, right); break;
    case CompareOp::Lt: result = less(left, right); break;
    case CompareOp::Le: result = less(left, right) || equals(left, right); break;
    case CompareOp::Gt: result = less(right, left); break;
    case CompareOp::Ge: result = less(right, left) || equals(left, right); break;
    case CompareOp::In: result = contains(*this, right, left, expr.line); break;
    case CompareOp::NotIn: result = !contains(*this, right, left, expr.line); break;
    }
    if (!result)
      return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

namespace {

[[noreturn]] void unsupportedOperands(const char *op, const Value &a, const Value &b, int line) {
  fail(std::string("unsupported operand type(s) for ") + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'",
       line);
}

// CPython's float floor division and modulo (the sign follows the divisor).
void floatDivmod(double a, double b, double &div, double &mod, int line) {
  if (b == 0.0)
    fail("float division by zero", line);
  mod = std::fmod(a, b);
  div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  if (div != 0.0) {
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5)
      floordiv += 1.0;
    div = floordiv;
  } else {
    div = std::copysign(0.0, a / b);
  }
}
} // namespace

std::string pythonPercentFormat(Renderer &renderer, llvm::StringRef format, const Value &arguments, int line);

Value Renderer::binary(BinaryOp op, const Value &left, const Value &right, int line) {
  static const char *const kSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};
  const char *symbol = kSymbols[int(op)];
  if (left.isUndefined())
    failUndefined(left, line, "an undefined value was used in arithmetic");
  if (right.isUndefined() && !(op == BinaryOp::Mod && left.isString()))
    failUndefined(right, line, "an undefined value was used in arithmetic");
  bool ints = isIntLike(left) && isIntLike(right);
  bool numbers = isNumeric(left) && isNumeric(right);
  switch (op) {
  case BinaryOp::Add:
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(intOf(left), intOf(right), &r))
        fail("integer overflow", line);
      return Value::integer(r);
    }
    if (numbers)
      return Value::number(floatOf(left) + floatOf(right));
    if (left.isString() && right.isString()) {
      // markupsafe: Markup + str escapes the str (and str + Markup too, through __radd__).
      if (left.isMarkup() || right.isMarkup()) {
        std::string a = left.isMarkup() ? left.asString().str() : htmlEscape(left.asString());
        std::string b = right.isMarkup() ? right.asString().str() : htmlEscape(right.asString());
        Value v = makeString(a + b, line);
        return markup(v.asString().str());
      }
      if (left.asString().size() + right.asString().size() > options_.maxOutputBytes)
        fail("a string passes the limit of " + std::to_string(options_.maxOutputBytes) + " bytes", line);
      return makeString(left.asString().str() + right.asString().str(), line);
    }
    if (left.isList() && right.isList() && left.isTuple() == right.isTuple()) {
      std::vector<Value> items(left.items().begin(), left.items().end());
      items.insert(items.end(), right.items().begin(), right.items().end());
      return makeList(std::move(items), left.isTuple(), line);
    }
    if (left.isString())
      fail("can only concatenate str (not \"" + typeName(right) + "\") to str", line);
    if (left.isList() && !left.isTuple())
      fail("can only concatenate list (not \"" + typeName(right) + "\") to list", line);
    unsupportedOperands(symbol, left, right, line);
  case BinaryOp::Sub:
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(intOf(left), intOf(right), &r))
        fail("integer overflow", line);
      return Value::integer(r);
    }
    if (numbers)
      return Value::number(floatOf(left) - floatOf(right));
    unsupportedOperands(symbol, left, right, line);
  case BinaryOp::Mul: {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(intOf(left), intOf(right), &r))
        fail("integer overflow", line);
      return Value::integer(r);
    }
    if (numbers)
      return Value::number(floatOf(left) * floatOf(right));
    // Sequence repetition: str * int, int * str, list * int.
    const Value &sequence = isIntLike(left) ? right : left;
    const Value &count = isIntLike(left) ? left : right;
    if (isIntLike(count) && (sequence.isString() || sequence.isList())) {
      int64_t n = std::max<int64_t>(0, intOf(count));
      size_t unit = sequence.isString() ? sequence.asString().size() : sequence.items().size();
      size_t limit = sequence.isString() ? options_.maxOutputBytes : kMaxListItems;
      if (unit == 0) // an empty sequence repeated any number of times, at once (not n empty copies)
        n = 0;
      if (unit && uint64_t(n) > limit / unit)
        fail("a repeated " + typeName(sequence) + " passes the limit of " + std::to_string(limit) +
                 (sequence.isString() ? " bytes" : " items"),
             line);
      if (sequence.isString()) {
        std::string text;
        text.reserve(unit * size_t(n));
        for (int64_t i = 0; i < n; ++i)
          text += sequence.asString();
        Value v = makeString(std::move(text), line);
        return sequence.isMarkup() ? markup(v.asString().str()) : v;
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), sequence.items().begin(), sequence.items().end());
      return makeList(std::move(items), sequence.isTuple(), line);
    }
    unsupportedOperands(symbol, left, right, line);
  }
  case BinaryOp::Div:
    if (numbers) {
      if (floatOf(right) == 0.0)
        fail("division by zero", line);
      if (ints) // Python divides ints exactly, then rounds once
        return Value::number(double(intOf(left)) / double(intOf(right)));
      return Value::number(floatOf(left) / floatOf(right));
    }
    unsupportedOperands(symbol, left, right, line);
  case BinaryOp::FloorDiv:
  case BinaryOp::Mod:
    if (ints) {
      int64_t a = intOf(left), b = intOf(right);
      if (b == 0)
        fail("integer division or modulo by zero", line);
      if (a == INT64_MIN && b == -1) {
        if (op == BinaryOp::FloorDiv)
          fail("integer overflow", line);
        return Value::integer(0);
      }
      int64_t q = a / b, r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) {
        q -= 1;
        r += b;
      }
      return Value::integer(op == BinaryOp::FloorDiv ? q : r);
    }
    if (numbers) {
      double div, mod;
      floatDivmod(floatOf(left), floatOf(right), div, mod, line);
      return Value::number(op == BinaryOp::FloorDiv ? div : mod);
    }
    if (op == BinaryOp::Mod && left.isString()) {
      Value v = makeString(pythonPercentFormat(*this, left.asString(), right, line), line);
      return left.isMarkup() ? markup(v.asString().str()) : v;
    }
    unsupportedOperands(symbol, left, right, line);
  case BinaryOp::Pow:
    if (ints && intOf(right) >= 0) {
      int64_t base = intOf(left), exponent = intOf(right), result = 1;
      while (exponent > 0) {
        if (exponent & 1)
          if (__builtin_mul_overflow(result, base, &result))
            fail("integer overflow", line);
        exponent >>= 1;
        if (exponent && __builtin_mul_overflow(base, base, &base))
          fail("integer overflow", line);
      }
      return Value::integer(result);
    }
    if (numbers) {
      double a = floatOf(left), b = floatOf(right);
      if (a == 0.0 && b < 0)
        fail("0.0 cannot be raised to a negative power", line);
      if (a < 0 && b != std::floor(b))
        fail("unsupported: a negative number raised to a fractional power (a complex number)", line);
      double r = std::pow(a, b);
      if (std::isinf(r) && std::isfinite(a) && std::isfinite(b))
        fail("(34, 'Numerical result out of range')", line); // Python's float pow raises OverflowError
      return Value::number(r);
    }
    unsupportedOperands(symbol, left, right, line);
  }
  unsupportedOperands(symbol, left, right, line);
}

Value Renderer::slice(const Value &object, const Expr &expr, const std::shared_ptr<Scope> &scope) {
  auto bound = [&](const ExprPtr &e, bool &ok) -> std::optional<int64_t> {
    if (!e)
      return std::nullopt;
    Value v = eval(*e, scope);
    if (v.isNone())
      return std::nullopt;
    if (!isIntLike(v)) {
      ok = false;
      return std::nullopt;
    }
    return intOf(v);
  };
  bool ok = true;
  std::optional<int64_t> start = bound(expr.sliceStart, ok), stop = bound(expr.sliceStop, ok),
                         step = bound(expr.sliceStep, ok);
  // jinja2 compiles a slice to Python's own subscript, not to its getitem: every failure raises.
  if (object.isUndefined())
    failUndefined(object, expr.line, "an undefined value was sliced");
  if (!ok)
    fail("slice indices must be integers or None or have an __index__ method", expr.line);
  if (step && *step == 0)
    fail("slice step cannot be zero", expr.line);
  int64_t stride = step.value_or(1);
  if (object.isList()) {
    llvm::ArrayRef<Value> items = object.items();
    py::SliceBounds b = py::sliceIndices(int64_t(items.size()), start, stop, stride);
    std::vector<Value> out;
    out.reserve(size_t(b.count));
    for (int64_t i = 0; i < b.count; ++i)
      out.push_back(items[b.at(i)]);
    return makeList(std::move(out), object.isTuple(), expr.line);
  }
  if (object.isString()) {
    llvm::StringRef text = object.asString();
    chargeSteps(text.size() / 16, expr.line);
    std::string out;
    if (py::isAscii(text)) {
      py::SliceBounds b = py::sliceIndices(int64_t(text.size()), start, stop, stride);
      if (stride == 1) {
        out = text.substr(size_t(b.start), size_t(b.count)).str();
      } else {
        for (int64_t i = 0; i < b.count; ++i)
          out += text[b.at(i)];
      }
    } else {
      std::vector<char32_t> points = py::codePoints(text);
      py::SliceBounds b = py::sliceIndices(int64_t(points.size()), start, stop, stride);
      for (int64_t i = 0; i < b.count; ++i)
        py::appendUtf8(out, points[b.at(i)]);
    }
    Value v = makeString(std::move(out), expr.line);
    return object.isMarkup() ? markup(v.asString().str()) : v;
  }
  if (object.isDict())
    fail("unhashable type: 'slice'", expr.line);
  fail("'" + typeName(object) + "' object is not subscriptable", expr.line);
}

//===--- attribute and item access ------------------------------------------===//

Value Renderer::getAttribute(const Value &object, llvm::StringRef name, int line) {
  switch (object.kind()) {
  case Value::Kind::Undefined:
    failUndefined(object, line, "an undefined value has no attribute '" + name.str() + "'");
  case Value::Kind::Dict:
    if (isMethodOf(object, name))
      break;
    if (const Value *v = object.find(name))
      return *v;
    return missingAttribute(object, name);
  case Value::Kind::Namespace:
    if (Value *v = static_cast<NamespaceObject &>(*object.object()).find(name))
      return *v;
    return missingAttribute(object, name);
  case Value::Kind::Loop: {
    const auto &loop = static_cast<const LoopObject &>(*object.object());
    int64_t i = loop.index0, n = loop.length;
    if (name == "index")
      return Value::integer(i + 1);
    if (name == "index0")
      return Value::integer(i);
    if (name == "revindex")
      return Value::integer(n - i);
    if (name == "revindex0")
      return Value::integer(n - i - 1);
    if (name == "first")
      return Value::boolean(i == 0);
    if (name == "last")
      return Value::boolean(i == n - 1);
    if (name == "length")
      return Value::integer(n);
    if (name == "depth")
      return Value::integer(loop.depth0 + 1);
    if (name == "depth0")
      return Value::integer(loop.depth0);
    if (name == "previtem")
      return i > 0 ? loop.items[size_t(i - 1)] : Value::undefined("there is no previous item");
    if (name == "nextitem")
      return i + 1 < n ? loop.items[size_t(i + 1)] : Value::undefined("there is no next item");
    if (name == "cycle" || name == "changed") {
      auto method = std::make_shared<CallableObject>();
      method->kind = name == "cycle" ? CallableObject::Kind::LoopCycle : CallableObject::Kind::LoopChanged;
      method->name = name.str();
      method->self = object;
      return Value::fromObject(Value::Kind::Callable, std::move(method));
    }
    return missingAttribute(object, name);
  }
  default:
    if (!isMethodOf(object, name))
      return missingAttribute(object, name);
  }
  // A method of str, dict or list: bound, or refused as the sandbox refuses mutation.
  static const char *const kMutators[] = {"append", "clear", "extend", "insert", "pop", "popitem", "remove",
                                          "reverse", "setdefault", "sort", "update"};
  if ((object.isList() || object.isDict()) && llvm::is_contained(kMutators, name))
    return Value::undefined("access to attribute '" + name.str() + "' of '" + typeName(object) +
                            "' object is unsafe.");
  auto method = std::make_shared<CallableObject>();
  method->kind = CallableObject::Kind::Method;
  method->name = name.str();
  method->self = object;
  return Value::fromObject(Value::Kind::Callable, std::move(method));
}

Value Renderer::getItem(const Value &object, const Value &index, int line) {
  auto fallback = [&]() -> Value {
    // jinja2's getitem: on TypeError or LookupError, a string index is tried as an attribute.
    if (index.isString())
      return getAttribute(object, index.asString(), line);
    return Value::undefined(elementMissing(object, index));
  };
  switch (object.kind()) {
  case Value::Kind::Undefined:
    failUndefined(object, line, "an undefined value was indexed");
  case Value::Kind::Dict: {
    if (!hashable(index))
      return Value::undefined("unhashable type: '" + typeName(index) + "'");
    if (const Value *v = static_cast<const DictObject &>(*object.object()).find(index))
      return *v;
    if (index.isString() && isMethodOf(object, index.asString()))
      return getAttribute(object, index.asString(), line);
    return Value::undefined(objectTypeRepr(object) + " has no attribute " + toRepr(index));
  }
  case Value::Kind::List: {
    if (!isIntLike(index))
      return fallback();
    int64_t i = intOf(index), n = int64_t(object.items().size());
    if (i < 0)
      i += n;
    if (i < 0 || i >= n)
      return Value::undefined(elementMissing(object, index));
    return object.items()[size_t(i)];
  }
  case Value::Kind::String: {
    if (!isIntLike(index))
      return fallback();
    llvm::StringRef text = object.asString();
    chargeSteps(text.size() / 16, line); // finding a code point reads the text up to it
    int64_t i = intOf(index);
    std::string out;
    if (py::isAscii(text)) {
      int64_t n = int64_t(text.size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return Value::undefined(elementMissing(object, index));
      out = text.substr(size_t(i), 1).str();
    } else {
      std::vector<char32_t> points = py::codePoints(text);
      int64_t n = int64_t(points.size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return Value::undefined(elementMissing(object, index));
      py::appendUtf8(out, points[size_t(i)]);
    }
    return object.isMarkup() ? markup(out) : Value::string(std::move(out));
  }
  default:
    return fallback();
  }
}

std::vector<Value> Renderer::iterate(const Value &value, int line) {
  switch (value.kind()) {
  case Value::Kind::List:
    chargeSteps(value.items().size(), line);
    return std::vector<Value>(value.items().begin(), value.items().end());
  case Value::Kind::Dict: {
    std::vector<Value> keys;
    for (const auto &entry : value.entries())
      keys.push_back(entry.first);
    chargeSteps(keys.size(), line);
    return keys;
  }
  case Value::Kind::String: {
    std::vector<Value> chars;
    llvm::StringRef text = value.asString();
    size_t count = py::length(text);
    if (count > kMaxListItems)
      fail("iterating a string of " + std::to_string(count) + " characters passes the limit of " +
               std::to_string(kMaxListItems) + " items",
           line);
    chargeSteps(count, line);
    chargeBytes(count * sizeof(Value), line);
    chars.reserve(count);
    for (size_t pos = 0; pos < text.size();) {
      size_t start = pos;
      py::decodeAt(text, pos);
      // Markup does not wrap str's iterator: its characters are plain strings.
      chars.push_back(Value::string(text.slice(start, pos).str()));
    }
    return chars;
  }
  case Value::Kind::Undefined:
    return {};
  case Value::Kind::Iterator: {
    auto &it = static_cast<IteratorObject &>(*value.object());
    if (it.consumed)
      return {};
    it.consumed = true;
    chargeSteps(it.items.size(), line);
    return it.items;
  }
  case Value::Kind::Loop:
    return static_cast<const LoopObject &>(*value.object()).items;
  default:
    fail("'" + typeName(value) + "' object is not iterable", line);
  }
}

//===--- calls --------------------------------------------------------------===//

Value Renderer::call(const Value &callee, std::vector<Value> positional,
                     std::vector<std::pair<std::string, Value>> keywords, int line) {
  DepthGuard guard(*this, line);
  if (callee.isUndefined())
    failUndefined(callee, line, "an undefined value was called");
  if (callee.kind() != Value::Kind::Callable)
    fail("'" + typeName(callee) + "' object is not callable", line);
  const auto &c = static_cast<const CallableObject &>(*callee.object());
  switch (c.kind) {
  case CallableObject::Kind::Global:
    return callGlobal(*this, c, positional, keywords, line);
  case CallableObject::Kind::Method:
    return callMethod(*this, c, positional, keywords, line);
  case CallableObject::Kind::Macro:
    return callMacro(c, std::move(positional), std::move(keywords), line);
  case CallableObject::Kind::LoopCycle: {
    if (positional.empty())
      fail("no items for cycling given", line);
    const auto &loop = static_cast<const LoopObject &>(*c.self.object());
    return positional[size_t(loop.index0) % positional.size()];
  }
  case CallableObject::Kind::LoopChanged: {
    // True the first time and whenever the arguments differ from the previous call's.
    auto &loop = static_cast<LoopObject &>(*c.self.object());
    bool changed = !loop.lastChanged || loop.lastChanged->size() != positional.size() ||
                   !std::equal(positional.begin(), positional.end(), loop.lastChanged->begin(),
                               [](const Value &a, const Value &b) { return equals(a, b); });
    if (changed)
      loop.lastChanged = std::move(positional);
    return Value::boolean(changed);
  }
  }
  return Value();
}

Value Renderer::callMacro(const CallableObject &macro, std::vector<Value> positional,
                          std::vector<std::pair<std::string, Value>> keywords, int line) {
  DepthGuard guard(*this, line);
  const Stmt &m = *macro.macro;
  auto scope = newScope(macro.closure);
  size_t count = m.parameters.size();
  auto takeKeyword = [&](llvm::StringRef name) -> std::optional<Value> {
    for (auto it = keywords.begin(); it != keywords.end(); ++it)
      if (it->first == name) {
        Value v = std::move(it->second);
        keywords.erase(it);
        return v;
      }
    return std::nullopt;
  };
  // As jinja2's Macro.__call__: positional first, then keywords for the rest, then defaults
  // (evaluated in the macro's scope, so they see the parameters before them).
  std::vector<std::optional<Value>> bound(count);
  for (size_t i = 0; i < count; ++i)
    if (i < positional.size())
      bound[i] = positional[i];
  if (positional.size() < count)
    for (size_t i = positional.size(); i < count; ++i)
      bound[i] = takeKeyword(m.parameters[i].name);
  std::optional<Value> caller;
  if (m.usesCaller)
    caller = takeKeyword("caller");
  if (!m.usesKwargs && !keywords.empty()) {
    if (keywords.front().first == "caller")
      fail("macro '" + macro.name + "' was invoked with two values for the special caller argument", line);
    fail("macro '" + macro.name + "' takes no keyword argument '" + keywords.front().first + "'", line);
  }
  if (!m.usesVarargs && positional.size() > count)
    fail("macro '" + macro.name + "' takes not more than " + std::to_string(count) + " argument(s)", line);
  for (size_t i = 0; i < count; ++i) {
    const Parameter &p = m.parameters[i];
    Value v;
    if (bound[i])
      v = *bound[i];
    else if (p.defaultValue)
      v = eval(*p.defaultValue, scope);
    else
      v = Value::undefined("parameter '" + p.name + "' was not provided");
    scope->variables[p.name] = std::move(v);
  }
  if (m.usesCaller)
    scope->variables["caller"] = caller ? *caller : Value::undefined("No caller defined");
  if (m.usesKwargs) {
    std::vector<std::pair<Value, Value>> entries;
    for (auto &[name, value] : keywords)
      entries.emplace_back(Value::string(name), std::move(value));
    scope->variables["kwargs"] = makeDict(std::move(entries), line);
  }
  if (m.usesVarargs) {
    std::vector<Value> extra;
    for (size_t i = count; i < positional.size(); ++i)
      extra.push_back(positional[i]);
    scope->variables["varargs"] = makeList(std::move(extra), true, line);
  }
  std::string out;
  execBody(m.body, scope, out);
  return makeString(std::move(out), line);
}

Value Renderer::applyFilter(llvm::StringRef name, const Value &value, std::vector<Value> positional,
                            std::vector<std::pair<std::string, Value>> keywords, int line) {
  // A filter may apply filters (map('map', ...)): each level counts against the nesting limit,
  // and against the shorter limit of filters in filters.
  DepthGuard guard(*this, line);
  FilterDepthGuard filterGuard(*this, line);
  chargeSteps(1, line);
  return filterBody(*this, name, value, positional, keywords, line);
}

bool Renderer::applyTest(llvm::StringRef name, const Value &value, std::vector<Value> positional,
                         std::vector<std::pair<std::string, Value>> keywords, int line) {
  DepthGuard guard(*this, line);
  chargeSteps(1, line);
  return testBody(*this, name, value, positional, keywords, line);
}

} // namespace helm::chat
