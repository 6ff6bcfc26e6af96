//===- Parser.cpp - tokens to the syntax tree, jinja2's grammar ------------------------===//
//
// A recursive-descent parser shaped like jinja2's (jinja2/parser.py), so that precedence and the
// odd corners agree: filters bind tighter than arithmetic (`'a' + x | tojson` filters x), `**` is
// left-associative, `-x | f` filters -x, tests take one bare argument (`x is divisibleby 3`),
// `if` in `{% if %}` and `{% for ... in %}` is not a conditional expression, adjacent string
// literals concatenate.
//
// What is refused here, by name: the tags that need a template loader or that transformers'
// environment has no use for (extends, block, include, import, from, autoescape), recursive for
// loops, *args/**kwargs in calls, and jinja2 filters/tests this engine does not implement.
// Unknown filter and test names are not refused: jinja2 fails on them only when they run.
//
// Nesting is bounded (kMaxNesting): parentheses, blocks and unary operators recurse here, and
// chains (`a + a + ...`, `x|f|f|...`, `a.b.c...`) make trees the evaluator recurses through.
//
//===----------------------------------------------------------------------------===//
#include "runtime/chat/Engine.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <initializer_list>

namespace helm::chat {

namespace {

constexpr unsigned kMaxNesting = 256;

// jinja2's builtin filters and tests, and the filters this engine implements (Builtins.cpp); every
// jinja2 test is implemented.
constexpr llvm::StringLiteral kJinjaFilters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
    "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
    "wordwrap", "xmlattr"};
constexpr llvm::StringLiteral kSupportedFilters[] = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list", "lower",
    "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
    "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};
constexpr llvm::StringLiteral kJinjaTests[] = {
    "odd", "even", "divisibleby", "defined", "undefined", "filter", "test", "none", "boolean", "false", "true",
    "integer", "float", "lower", "upper", "string", "mapping", "number", "sequence", "iterable", "callable",
    "sameas", "escaped", "in", "==", "eq", "equalto", "!=", "ne", ">", "gt", "greaterthan", ">=", "ge", "<",
    "lt", "lessthan", "<=", "le"};

bool contains(llvm::ArrayRef<llvm::StringLiteral> list, llvm::StringRef name) {
  return llvm::any_of(list, [&](llvm::StringRef s) { return s == name; });
}

unsigned childDepth(const Expr &e) {
  unsigned d = 0;
  auto visit = [&](const Expr *child) {
    if (child)
      d = std::max(d, child->depth);
  };
  visit(e.operand.get());
  visit(e.other.get());
  visit(e.condition.get());
  visit(e.sliceStart.get());
  visit(e.sliceStop.get());
  visit(e.sliceStep.get());
  for (const ExprPtr &x : e.elements)
    visit(x.get());
  for (const Argument &a : e.arguments)
    visit(a.value.get());
  for (const auto &c : e.comparisons)
    visit(c.second.get());
  return d;
}

class Parser {
public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::shared_ptr<const TemplateAst> run() {
    auto ast = std::make_shared<TemplateAst>();
    ast->body = subparse({});
    if (current().kind != TokenKind::End)
      fail("unexpected " + describe(current()), current().line);
    return ast;
  }

private:
  //===--- the token stream -------------------------------------------------===//
  const Token &current() const { return tokens_[index_]; }
  const Token &look() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }
  const Token &next() {
    const Token &t = tokens_[index_];
    if (index_ + 1 < tokens_.size())
      ++index_;
    return t;
  }
  bool isName(llvm::StringRef name) const { return current().kind == TokenKind::Name && current().text == name; }
  bool isOperator(llvm::StringRef op) const { return current().kind == TokenKind::Operator && current().text == op; }
  bool skipName(llvm::StringRef name) {
    if (!isName(name))
      return false;
    next();
    return true;
  }
  bool skipOperator(llvm::StringRef op) {
    if (!isOperator(op))
      return false;
    next();
    return true;
  }
  static std::string describe(const Token &t) {
    switch (t.kind) {
    case TokenKind::End: return "end of template";
    case TokenKind::BlockEnd: return "end of statement block";
    case TokenKind::VariableEnd: return "end of print statement";
    case TokenKind::BlockBegin: return "begin of statement block";
    case TokenKind::VariableBegin: return "begin of print statement";
    case TokenKind::Data: return "template data";
    case TokenKind::String: return "string literal";
    default: return "'" + t.text + "'";
    }
  }
  void expectOperator(llvm::StringRef op) {
    if (!skipOperator(op))
      fail("expected '" + op.str() + "', got " + describe(current()), current().line);
  }
  void expect(TokenKind kind, llvm::StringRef what) {
    if (current().kind != kind)
      fail("expected " + what.str() + ", got " + describe(current()), current().line);
    next();
  }
  std::string expectName() {
    if (current().kind != TokenKind::Name)
      fail("expected a name, got " + describe(current()), current().line);
    return next().text;
  }

  struct NestingGuard {
    explicit NestingGuard(Parser &p) : parser(p) {
      if (++parser.nesting_ > kMaxNesting)
        fail("the template nests deeper than " + std::to_string(kMaxNesting) + " levels", parser.current().line);
    }
    ~NestingGuard() { --parser.nesting_; }
    Parser &parser;
  };

  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Records a finished node's depth; chains deeper than kMaxNesting are refused.
  ExprPtr seal(ExprPtr e) {
    unsigned d = childDepth(*e) + 1;
    if (d > kMaxNesting)
      fail("an expression nests deeper than " + std::to_string(kMaxNesting) + " levels", e->line);
    e->depth = d;
    return e;
  }

  //===--- statements -------------------------------------------------------===//

  // Statements until a `{% name %}` with a name in `endTags` (left as the current token) or the
  // end of the template.
  Body subparse(std::initializer_list<llvm::StringRef> endTags) {
    Body body;
    while (current().kind != TokenKind::End) {
      const Token &t = current();
      if (t.kind == TokenKind::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == TokenKind::VariableBegin) {
        int line = next().line;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = line;
        s->expr = parseTuple(true, {}, false);
        expect(TokenKind::VariableEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::BlockBegin) {
        next();
        if (current().kind == TokenKind::Name && llvm::is_contained(endTags, llvm::StringRef(current().text)))
          return body;
        parseStatement(body);
        expect(TokenKind::BlockEnd, "end of statement block");
      } else {
        fail("unexpected " + describe(t), t.line);
      }
    }
    return body;
  }

  // A block's body up to one of `endTags`: the current token is then that tag's name (consumed
  // when `dropEndTag`).
  Body parseStatements(std::initializer_list<llvm::StringRef> endTags, bool dropEndTag, llvm::StringRef opener,
                       int openerLine) {
    skipOperator(":");
    expect(TokenKind::BlockEnd, "end of statement block");
    Body body = subparse(endTags);
    if (current().kind == TokenKind::End) {
      std::string wanted;
      for (llvm::StringRef tag : endTags)
        wanted += (wanted.empty() ? "'" : " or '") + tag.str() + "'";
      fail("unexpected end of template: the '" + opener.str() + "' block opened on line " +
               std::to_string(openerLine) + " needs " + wanted,
           current().line);
    }
    if (dropEndTag)
      next();
    return body;
  }

  std::unique_ptr<Stmt> makeStmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  void parseStatement(Body &body) {
    NestingGuard guard(*this);
    const Token &t = current();
    if (t.kind != TokenKind::Name)
      fail("tag name expected, got " + describe(t), t.line);
    std::string tag = t.text;
    int line = t.line;
    if (tag == "for")
      return body.push_back(parseFor());
    if (tag == "if")
      return body.push_back(parseIf());
    if (tag == "set")
      return body.push_back(parseSet());
    if (tag == "macro")
      return body.push_back(parseMacro());
    if (tag == "call")
      return body.push_back(parseCallBlock());
    if (tag == "filter")
      return body.push_back(parseFilterBlock());
    if (tag == "with")
      return body.push_back(parseWith());
    if (tag == "print") {
      next();
      bool first = true;
      while (current().kind != TokenKind::BlockEnd) {
        if (!first)
          expectOperator(",");
        first = false;
        auto s = makeStmt(StmtKind::Output, line);
        s->expr = parseExpression(true);
        body.push_back(std::move(s));
      }
      return;
    }
    if (tag == "generation") {
      // transformers' AssistantTracker: the body renders as it is, in a scope of its own (it is a
      // call block in jinja2).
      next();
      auto s = makeStmt(StmtKind::Scope, line);
      int savedLoops = loopDepth_;
      loopDepth_ = 0;
      s->body = parseStatements({"endgeneration"}, true, "generation", line);
      loopDepth_ = savedLoops;
      return body.push_back(std::move(s));
    }
    if (tag == "break" || tag == "continue") {
      if (loopDepth_ == 0)
        fail("'" + tag + "' outside a for loop", line);
      next();
      return body.push_back(makeStmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, line));
    }
    if (tag == "extends" || tag == "block" || tag == "include" || tag == "import" || tag == "from" ||
        tag == "autoescape")
      fail("unsupported tag '" + tag + "'", line);
    fail("unknown tag '" + tag + "'", line);
  }

  std::unique_ptr<Stmt> parseFor() {
    int line = next().line;
    auto s = makeStmt(StmtKind::For, line);
    s->target = parseAssignTarget(false, {"in"});
    if (!skipName("in"))
      fail("expected 'in', got " + describe(current()), current().line);
    s->expr = parseTuple(false, {"recursive"}, false);
    if (skipName("if"))
      s->loopFilter = parseExpression(true);
    if (isName("recursive"))
      fail("unsupported: recursive for loops", current().line);
    ++loopDepth_;
    s->body = parseStatements({"endfor", "else"}, false, "for", line);
    --loopDepth_;
    if (next().text == "else") {
      int savedLoops = loopDepth_;
      loopDepth_ = 0; // jinja2 compiles a loop's else after the loop: break there is an error
      s->elseBody = parseStatements({"endfor"}, true, "for", line);
      loopDepth_ = savedLoops;
    }
    return s;
  }

  std::unique_ptr<Stmt> parseIf() {
    int line = next().line;
    auto s = makeStmt(StmtKind::If, line);
    while (true) {
      ExprPtr condition = parseTuple(false, {}, false);
      Body body = parseStatements({"elif", "else", "endif"}, false, "if", line);
      s->branches.emplace_back(std::move(condition), std::move(body));
      std::string tag = next().text;
      if (tag == "elif")
        continue;
      if (tag == "else")
        s->elseBody = parseStatements({"endif"}, true, "if", line);
      break;
    }
    return s;
  }

  std::unique_ptr<Stmt> parseSet() {
    int line = next().line;
    Target target = parseAssignTarget(true, {});
    if (skipOperator("=")) {
      auto s = makeStmt(StmtKind::Set, line);
      s->target = std::move(target);
      s->expr = parseTuple(true, {}, false);
      return s;
    }
    auto s = makeStmt(StmtKind::SetBlock, line);
    s->target = std::move(target);
    if (isOperator("|"))
      s->expr = parseFilterChain(nullptr, false);
    s->body = parseStatements({"endset"}, true, "set", line);
    return s;
  }

  void parseSignature(Stmt &s) {
    expectOperator("(");
    bool haveDefault = false;
    while (!isOperator(")")) {
      if (!s.parameters.empty())
        expectOperator(",");
      Parameter p;
      p.name = expectName();
      if (skipOperator("=")) {
        p.defaultValue = parseExpression(true);
        haveDefault = true;
      } else if (haveDefault) {
        fail("non-default argument follows default argument", current().line);
      }
      s.parameters.push_back(std::move(p));
    }
    expectOperator(")");
  }

  std::unique_ptr<Stmt> parseMacro() {
    int line = next().line;
    auto s = makeStmt(StmtKind::Macro, line);
    s->macroName = expectName();
    parseSignature(*s);
    int savedLoops = loopDepth_;
    loopDepth_ = 0;
    s->body = parseStatements({"endmacro"}, true, "macro", line);
    loopDepth_ = savedLoops;
    noteSpecialNames(*s);
    return s;
  }

  std::unique_ptr<Stmt> parseCallBlock() {
    int line = next().line;
    auto s = makeStmt(StmtKind::CallBlock, line);
    if (isOperator("("))
      parseSignature(*s);
    s->expr = parseExpression(true);
    if (s->expr->kind != ExprKind::Call)
      fail("expected a call after 'call'", line);
    int savedLoops = loopDepth_;
    loopDepth_ = 0;
    s->body = parseStatements({"endcall"}, true, "call", line);
    loopDepth_ = savedLoops;
    noteSpecialNames(*s);
    return s;
  }

  std::unique_ptr<Stmt> parseFilterBlock() {
    int line = next().line;
    auto s = makeStmt(StmtKind::FilterBlock, line);
    s->expr = parseFilterChain(nullptr, true);
    s->body = parseStatements({"endfilter"}, true, "filter", line);
    return s;
  }

  std::unique_ptr<Stmt> parseWith() {
    int line = next().line;
    auto s = makeStmt(StmtKind::With, line);
    while (current().kind != TokenKind::BlockEnd) {
      if (!s->assignments.empty())
        expectOperator(",");
      Target target = parseAssignTarget(false, {});
      expectOperator("=");
      s->assignments.emplace_back(std::move(target), parseExpression(true));
    }
    s->body = parseStatements({"endwith"}, true, "with", line);
    return s;
  }

  // Whether a macro's body reads caller, varargs or kwargs (jinja2 then accepts a caller, extra
  // positional or extra keyword arguments).
  static void scanNames(const Expr *e, Stmt &macro) {
    if (!e)
      return;
    if (e->kind == ExprKind::Name) {
      macro.usesCaller |= e->name == "caller";
      macro.usesVarargs |= e->name == "varargs";
      macro.usesKwargs |= e->name == "kwargs";
    }
    for (const Expr *child : {e->operand.get(), e->other.get(), e->condition.get(), e->sliceStart.get(),
                              e->sliceStop.get(), e->sliceStep.get()})
      scanNames(child, macro);
    for (const ExprPtr &x : e->elements)
      scanNames(x.get(), macro);
    for (const Argument &a : e->arguments)
      scanNames(a.value.get(), macro);
    for (const auto &c : e->comparisons)
      scanNames(c.second.get(), macro);
  }
  static void scanBody(const Body &body, Stmt &macro) {
    for (const auto &s : body) {
      scanNames(s->expr.get(), macro);
      scanNames(s->loopFilter.get(), macro);
      for (const auto &b : s->branches) {
        scanNames(b.first.get(), macro);
        scanBody(b.second, macro);
      }
      for (const auto &p : s->parameters)
        scanNames(p.defaultValue.get(), macro);
      for (const auto &a : s->assignments)
        scanNames(a.second.get(), macro);
      scanBody(s->body, macro);
      scanBody(s->elseBody, macro);
    }
  }
  static void noteSpecialNames(Stmt &macro) {
    scanBody(macro.body, macro);
    for (const auto &p : macro.parameters)
      scanNames(p.defaultValue.get(), macro);
  }

  //===--- assignment targets -----------------------------------------------===//

  Target parseTargetPrimary(bool withNamespace) {
    const Token &t = current();
    if (t.kind == TokenKind::Name) {
      if (t.text == "true" || t.text == "false" || t.text == "True" || t.text == "False" || t.text == "none" ||
          t.text == "None")
        fail("can't assign to '" + t.text + "'", t.line);
      Target target;
      target.name = next().text;
      if (withNamespace && isOperator(".")) {
        next();
        target.kind = Target::Kind::NamespaceAttribute;
        target.attribute = expectName();
      }
      return target;
    }
    if (isOperator("(")) {
      next();
      Target target = parseTargetTuple(withNamespace, {}, true);
      expectOperator(")");
      return target;
    }
    fail("can't assign to " + describe(t), t.line);
  }

  bool isTupleEnd(std::initializer_list<llvm::StringRef> extraEnd) const {
    TokenKind k = current().kind;
    if (k == TokenKind::VariableEnd || k == TokenKind::BlockEnd || isOperator(")"))
      return true;
    return current().kind == TokenKind::Name && llvm::is_contained(extraEnd, llvm::StringRef(current().text));
  }

  Target parseTargetTuple(bool withNamespace, std::initializer_list<llvm::StringRef> extraEnd, bool explicitParens) {
    NestingGuard guard(*this);
    std::vector<Target> items;
    bool isTuple = false;
    while (true) {
      if (!items.empty())
        expectOperator(",");
      if (isTupleEnd(extraEnd))
        break;
      items.push_back(parseTargetPrimary(withNamespace));
      if (isOperator(","))
        isTuple = true;
      else
        break;
    }
    if (!isTuple) {
      if (!items.empty())
        return std::move(items[0]);
      if (!explicitParens)
        fail("expected an assignment target, got " + describe(current()), current().line);
    }
    Target tuple;
    tuple.kind = Target::Kind::Tuple;
    tuple.items = std::move(items);
    return tuple;
  }

  Target parseAssignTarget(bool withNamespace, std::initializer_list<llvm::StringRef> extraEnd) {
    return parseTargetTuple(withNamespace, extraEnd, false);
  }

  //===--- expressions ------------------------------------------------------===//

  ExprPtr parseExpression(bool withCondexpr) { return withCondexpr ? parseCondexpr() : parseOr(); }

  ExprPtr parseCondexpr() {
    int line = current().line;
    ExprPtr expr1 = parseOr();
    while (skipName("if")) {
      auto e = make(ExprKind::Conditional, line);
      e->condition = parseOr();
      if (skipName("else")) {
        // `a if b else c if d else ...` recurses here without passing parseUnary's guard.
        NestingGuard guard(*this);
        e->other = parseCondexpr();
      }
      e->operand = std::move(expr1);
      expr1 = seal(std::move(e));
      line = current().line;
    }
    return expr1;
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) {
      int line = next().line;
      auto e = make(ExprKind::Or, line);
      e->operand = std::move(left);
      e->other = parseAnd();
      left = seal(std::move(e));
    }
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) {
      int line = next().line;
      auto e = make(ExprKind::And, line);
      e->operand = std::move(left);
      e->other = parseNot();
      left = seal(std::move(e));
    }
    return left;
  }

  ExprPtr parseNot() {
    if (isName("not")) {
      NestingGuard guard(*this);
      int line = next().line;
      auto e = make(ExprKind::Not, line);
      e->operand = parseNot();
      return seal(std::move(e));
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    int line = current().line;
    ExprPtr expr = parseMath1();
    std::vector<std::pair<CompareOp, ExprPtr>> ops;
    while (true) {
      std::optional<CompareOp> op;
      if (current().kind == TokenKind::Operator)
        op = llvm::StringSwitch<std::optional<CompareOp>>(current().text)
                 .Case("==", CompareOp::Eq)
                 .Case("!=", CompareOp::Ne)
                 .Case("<", CompareOp::Lt)
                 .Case("<=", CompareOp::Le)
                 .Case(">", CompareOp::Gt)
                 .Case(">=", CompareOp::Ge)
                 .Default(std::nullopt);
      if (op) {
        next();
      } else if (isName("in")) {
        next();
        op = CompareOp::In;
      } else if (isName("not") && look().kind == TokenKind::Name && look().text == "in") {
        next();
        next();
        op = CompareOp::NotIn;
      } else {
        break;
      }
      ops.emplace_back(*op, parseMath1());
    }
    if (ops.empty())
      return expr;
    auto e = make(ExprKind::Compare, line);
    e->operand = std::move(expr);
    e->comparisons = std::move(ops);
    return seal(std::move(e));
  }

  ExprPtr binary(BinaryOp op, ExprPtr left, ExprPtr right, int line) {
    auto e = make(ExprKind::Binary, line);
    e->binaryOp = op;
    e->operand = std::move(left);
    e->other = std::move(right);
    return seal(std::move(e));
  }

  ExprPtr parseMath1() {
    int line = current().line;
    ExprPtr left = parseConcat();
    while (isOperator("+") || isOperator("-")) {
      BinaryOp op = next().text == "+" ? BinaryOp::Add : BinaryOp::Sub;
      ExprPtr right = parseConcat();
      left = binary(op, std::move(left), std::move(right), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parseConcat() {
    int line = current().line;
    ExprPtr first = parseMath2();
    if (!isOperator("~"))
      return first;
    auto e = make(ExprKind::Concat, line);
    e->elements.push_back(std::move(first));
    while (skipOperator("~"))
      e->elements.push_back(parseMath2());
    return seal(std::move(e));
  }

  ExprPtr parseMath2() {
    int line = current().line;
    ExprPtr left = parsePow();
    while (isOperator("*") || isOperator("/") || isOperator("//") || isOperator("%")) {
      std::string op = next().text;
      BinaryOp kind = op == "*" ? BinaryOp::Mul : op == "/" ? BinaryOp::Div : op == "//" ? BinaryOp::FloorDiv : BinaryOp::Mod;
      ExprPtr right = parsePow();
      left = binary(kind, std::move(left), std::move(right), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parsePow() {
    int line = current().line;
    ExprPtr left = parseUnary(true);
    while (skipOperator("**")) {
      ExprPtr right = parseUnary(true);
      left = binary(BinaryOp::Pow, std::move(left), std::move(right), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parseUnary(bool withFilter) {
    NestingGuard guard(*this);
    int line = current().line;
    ExprPtr node;
    if (isOperator("-") || isOperator("+")) {
      bool negate = next().text == "-";
      auto e = make(negate ? ExprKind::Negate : ExprKind::Plus, line);
      e->operand = parseUnary(false);
      node = seal(std::move(e));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (withFilter)
      node = parseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr literal(Value v, int line) {
    auto e = make(ExprKind::Literal, line);
    e->literal = std::move(v);
    return seal(std::move(e));
  }

  ExprPtr parsePrimary() {
    const Token &t = current();
    int line = t.line;
    switch (t.kind) {
    case TokenKind::Name: {
      std::string name = next().text;
      if (name == "true" || name == "True")
        return literal(Value::boolean(true), line);
      if (name == "false" || name == "False")
        return literal(Value::boolean(false), line);
      if (name == "none" || name == "None")
        return literal(Value::none(), line);
      auto e = make(ExprKind::Name, line);
      e->name = std::move(name);
      return seal(std::move(e));
    }
    case TokenKind::String: {
      std::string text;
      while (current().kind == TokenKind::String)
        text += next().text;
      return literal(Value::string(std::move(text)), line);
    }
    case TokenKind::Integer:
      return literal(Value::integer(next().integer), line);
    case TokenKind::Float:
      return literal(Value::number(next().real), line);
    case TokenKind::Operator:
      if (t.text == "(") {
        next();
        ExprPtr e = parseTuple(true, {}, true);
        expectOperator(")");
        return e;
      }
      if (t.text == "[")
        return parseList();
      if (t.text == "{")
        return parseDict();
      break;
    default:
      break;
    }
    fail("unexpected " + describe(t), line);
  }

  // A comma-separated tuple or a single expression (assignment targets have their own parser).
  ExprPtr parseTuple(bool withCondexpr, std::initializer_list<llvm::StringRef> extraEnd, bool explicitParens) {
    int line = current().line;
    std::vector<ExprPtr> items;
    bool isTuple = false;
    while (true) {
      if (!items.empty())
        expectOperator(",");
      if (isTupleEnd(extraEnd))
        break;
      items.push_back(parseExpression(withCondexpr));
      if (isOperator(","))
        isTuple = true;
      else
        break;
    }
    if (!isTuple) {
      if (!items.empty())
        return std::move(items[0]);
      if (!explicitParens)
        fail("expected an expression, got " + describe(current()), current().line);
    }
    auto e = make(ExprKind::Tuple, line);
    e->elements = std::move(items);
    return seal(std::move(e));
  }

  ExprPtr parseList() {
    int line = next().line;
    auto e = make(ExprKind::List, line);
    while (!isOperator("]")) {
      if (!e->elements.empty())
        expectOperator(",");
      if (isOperator("]"))
        break;
      e->elements.push_back(parseExpression(true));
    }
    expectOperator("]");
    return seal(std::move(e));
  }

  ExprPtr parseDict() {
    int line = next().line;
    auto e = make(ExprKind::Dict, line);
    while (!isOperator("}")) {
      if (!e->elements.empty())
        expectOperator(",");
      if (isOperator("}"))
        break;
      e->elements.push_back(parseExpression(true));
      expectOperator(":");
      e->elements.push_back(parseExpression(true));
    }
    expectOperator("}");
    return seal(std::move(e));
  }

  ExprPtr parsePostfix(ExprPtr node) {
    while (true) {
      if (isOperator(".") || isOperator("["))
        node = parseSubscript(std::move(node));
      else if (isOperator("("))
        node = parseCall(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parseFilterExpr(ExprPtr node) {
    while (true) {
      if (isOperator("|"))
        node = parseFilterChain(std::move(node), false);
      else if (isName("is"))
        node = parseTest(std::move(node));
      else if (isOperator("("))
        node = parseCall(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parseSubscript(ExprPtr node) {
    const Token &t = next();
    int line = t.line;
    if (t.text == ".") {
      const Token &attr = current();
      if (attr.kind == TokenKind::Name) {
        auto e = make(ExprKind::GetAttr, line);
        e->operand = std::move(node);
        e->name = next().text;
        return seal(std::move(e));
      }
      if (attr.kind != TokenKind::Integer)
        fail("expected name or number after '.'", attr.line);
      auto e = make(ExprKind::GetItem, line);
      e->operand = std::move(node);
      e->other = literal(Value::integer(next().integer), line);
      return seal(std::move(e));
    }
    std::vector<ExprPtr> args;
    while (!isOperator("]")) {
      if (!args.empty())
        expectOperator(",");
      args.push_back(parseSubscribed());
    }
    expectOperator("]");
    if (args.size() == 1 && args[0]->kind == ExprKind::Slice) {
      args[0]->operand = std::move(node);
      return seal(std::move(args[0]));
    }
    auto e = make(ExprKind::GetItem, line);
    e->operand = std::move(node);
    if (args.size() == 1) {
      e->other = std::move(args[0]);
    } else {
      for (const ExprPtr &a : args)
        if (a->kind == ExprKind::Slice)
          fail("unsupported: a slice inside a tuple index", line);
      auto tuple = make(ExprKind::Tuple, line);
      tuple->elements = std::move(args);
      e->other = seal(std::move(tuple));
    }
    return seal(std::move(e));
  }

  ExprPtr parseSubscribed() {
    int line = current().line;
    ExprPtr start;
    if (!isOperator(":")) {
      ExprPtr node = parseExpression(true);
      if (!isOperator(":"))
        return node;
      start = std::move(node);
    }
    next(); // ':'
    auto e = make(ExprKind::Slice, line);
    e->sliceStart = std::move(start);
    if (!isOperator(":") && !isOperator("]") && !isOperator(","))
      e->sliceStop = parseExpression(true);
    if (skipOperator(":"))
      if (!isOperator("]") && !isOperator(","))
        e->sliceStep = parseExpression(true);
    return e; // sealed once its operand is attached
  }

  void parseCallArguments(Expr &e) {
    int line = current().line;
    expectOperator("(");
    bool sawKeyword = false;
    bool needComma = false;
    while (!isOperator(")")) {
      if (needComma) {
        expectOperator(",");
        if (isOperator(")"))
          break;
      }
      if (isOperator("*") || isOperator("**"))
        fail("unsupported: *args or **kwargs in a call", current().line);
      Argument a;
      if (current().kind == TokenKind::Name && look().kind == TokenKind::Operator && look().text == "=") {
        a.keyword = next().text;
        next();
        sawKeyword = true;
      } else if (sawKeyword) {
        fail("invalid syntax for function call expression (a positional argument after a keyword one)", line);
      }
      a.value = parseExpression(true);
      e.arguments.push_back(std::move(a));
      needComma = true;
    }
    expectOperator(")");
  }

  ExprPtr parseCall(ExprPtr node) {
    auto e = make(ExprKind::Call, current().line);
    e->operand = std::move(node);
    parseCallArguments(*e);
    return seal(std::move(e));
  }

  std::string dottedName() {
    std::string name = expectName();
    while (skipOperator(".")) {
      name += '.';
      name += expectName();
    }
    return name;
  }

  // `| name(args) | ...` applied to `node` (null in a filter block or `{% set x | f %}`).
  ExprPtr parseFilterChain(ExprPtr node, bool startInline) {
    while (isOperator("|") || startInline) {
      if (!startInline)
        next();
      startInline = false;
      int line = current().line;
      auto e = make(ExprKind::Filter, line);
      e->name = dottedName();
      if (isJinjaFilter(e->name) && !isSupportedFilter(e->name))
        fail("unsupported filter '" + e->name + "'", line);
      if (isOperator("("))
        parseCallArguments(*e);
      e->operand = std::move(node);
      node = seal(std::move(e));
    }
    return node;
  }

  ExprPtr parseTest(ExprPtr node) {
    int line = next().line; // 'is'
    bool negated = skipName("not");
    auto e = make(ExprKind::Test, line);
    e->name = dottedName();
    e->negated = negated;
    if (isOperator("(")) {
      parseCallArguments(*e);
    } else {
      const Token &t = current();
      bool argumentStarts = t.kind == TokenKind::Name || t.kind == TokenKind::String || t.kind == TokenKind::Integer ||
                            t.kind == TokenKind::Float || isOperator("(") || isOperator("[") || isOperator("{");
      if (argumentStarts && !isName("else") && !isName("or") && !isName("and")) {
        if (isName("is"))
          fail("you cannot chain multiple tests with is", t.line);
        NestingGuard guard(*this);
        Argument a;
        a.value = parsePostfix(parsePrimary());
        e->arguments.push_back(std::move(a));
      }
    }
    e->operand = std::move(node);
    return seal(std::move(e));
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
  unsigned nesting_ = 0;
  int loopDepth_ = 0;
};

} // namespace

bool isJinjaFilter(llvm::StringRef name) { return contains(kJinjaFilters, name); }
bool isSupportedFilter(llvm::StringRef name) { return contains(kSupportedFilters, name); }
bool isJinjaTest(llvm::StringRef name) { return contains(kJinjaTests, name); }

std::shared_ptr<const TemplateAst> parseTemplate(llvm::StringRef source) {
  Parser parser(tokenize(source));
  return parser.run();
}

} // namespace helm::chat
