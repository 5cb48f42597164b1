// A recursive-descent parser for the Jinja that chat templates use, with Jinja's operator
// precedence (conditional, or, and, not, comparisons, + -, ~, * / // %, **, unary, then
// filters and tests).
#include <cstdlib>
#include <set>

#include "chat_template/lexer.h"
#include "chat_template/syntax.h"

namespace trident::chat_template {
namespace {

// Deeper nesting than any real template, and well inside the stack.
constexpr int kMaxNesting = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_all() {
    Body body = parse_body({});
    if (peek().type != TokenType::kEnd) fail("unexpected '" + peek().text + "'");
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kOperator && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kName && peek(ahead).text == name;
  }
  bool skip_op(const char* op) { return is_op(op) ? (next(), true) : false; }
  bool skip_name(const char* name) { return is_name(name) ? (next(), true) : false; }

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError("line " + std::to_string(peek().line) + ": " + what);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got '" + peek().text + "'");
  }
  std::string expect_identifier() {
    if (peek().type != TokenType::kName) fail("expected a name, got '" + peek().text + "'");
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != TokenType::kBlockEnd)
      fail("expected the end of the tag, got '" + peek().text + "'");
    next();
  }

  ExprPtr node(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = peek().line;
    return e;
  }

  // --- statements ---------------------------------------------------------------------

  // Statements up to a block tag whose first word is in `ends` (left unconsumed).
  Body parse_body(const std::set<std::string>& ends) {
    Body body;
    for (;;) {
      const Token& tok = peek();
      if (tok.type == TokenType::kEnd) {
        if (!ends.empty()) {
          std::string closing = *ends.begin();
          for (const std::string& e : ends)
            if (e.rfind("end", 0) == 0) closing = e;
          fail("unexpected end of template: expected {% " + closing + " %}");
        }
        return body;
      }
      if (tok.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = tok.line;
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (tok.type == TokenType::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        s->expr = parse_tuple_or_expression();
        if (peek().type != TokenType::kVarEnd) fail("expected '}}', got '" + peek().text + "'");
        next();
        body.push_back(std::move(s));
      } else {
        if (ends.count(peek(1).text) && peek(1).type == TokenType::kName) return body;
        next();
        body.push_back(parse_statement());
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    Nesting nesting(*this);
    auto s = std::make_unique<Stmt>();
    s->line = peek().line;
    const std::string word = expect_identifier();
    if (word == "if") return parse_if(std::move(s));
    if (word == "for") return parse_for(std::move(s));
    if (word == "set") return parse_set(std::move(s));
    if (word == "macro") return parse_macro(std::move(s));
    if (word == "generation") {
      s->kind = Stmt::Kind::kGeneration;
      expect_block_end();
      s->bodies.push_back(parse_body({"endgeneration"}));
      close_tag("endgeneration");
      return s;
    }
    if (word == "break" || word == "continue") {
      s->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
      return s;
    }
    throw TemplateError("line " + std::to_string(s->line) + ": the '" + word +
                        "' tag is not supported in chat templates (supported: if, for, set, "
                        "macro, break, continue, raw, generation)");
  }

  void close_tag(const char* word) {
    expect_block_begin_word(word);
    expect_block_end();
  }
  void expect_block_begin_word(const char* word) {
    if (peek().type != TokenType::kBlockBegin || !is_name(word, 1))
      fail(std::string("expected {% ") + word + " %}");
    next();
    next();
  }

  std::unique_ptr<Stmt> parse_if(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kIf;
    s->conditions.push_back(parse_expression());
    expect_block_end();
    for (;;) {
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      next();  // {%
      const std::string word = next().text;
      if (word == "elif") {
        s->conditions.push_back(parse_expression());
        expect_block_end();
      } else if (word == "else") {
        expect_block_end();
        s->bodies.push_back(parse_body({"endif"}));
        close_tag("endif");
        return s;
      } else {
        expect_block_end();
        return s;
      }
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names{expect_identifier()};
    while (skip_op(",")) names.push_back(expect_identifier());
    return names;
  }

  std::unique_ptr<Stmt> parse_for(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kFor;
    s->targets = parse_targets();
    if (!skip_name("in")) fail("expected 'in' in a for loop");
    s->expr = parse_tuple_or_expression(false);
    if (skip_name("if")) s->condition = parse_expression();
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    s->bodies.push_back(parse_body({"else", "endfor"}));
    next();
    if (next().text == "else") {
      expect_block_end();
      s->bodies.push_back(parse_body({"endfor"}));
      close_tag("endfor");
    } else {
      expect_block_end();
    }
    return s;
  }

  std::unique_ptr<Stmt> parse_set(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kSet;
    if (peek().type == TokenType::kName && is_op(".", 1)) {
      s->targets.push_back(next().text);
      next();
      s->attribute = expect_identifier();
    } else {
      s->targets = parse_targets();
    }
    if (skip_op("=")) {
      s->expr = parse_tuple_or_expression();
      expect_block_end();
      return s;
    }
    if (s->targets.size() != 1 || !s->attribute.empty()) fail("a block set takes one name");
    if (is_op("|")) fail("filters on a block set are not supported");
    expect_block_end();
    s->kind = Stmt::Kind::kSetBlock;
    s->bodies.push_back(parse_body({"endset"}));
    close_tag("endset");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kMacro;
    s->name = expect_identifier();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (skip_op(")")) break;
      std::string param = expect_identifier();
      s->params.emplace_back(param, skip_op("=") ? parse_expression() : nullptr);
    }
    expect_block_end();
    s->bodies.push_back(parse_body({"endmacro"}));
    close_tag("endmacro");
    return s;
  }

  // --- expressions --------------------------------------------------------------------

  // `a, b` is a tuple where Jinja allows one: output, set values and the for loop's iterable.
  ExprPtr parse_tuple_or_expression(bool conditional = true) {
    ExprPtr first = conditional ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    ExprPtr tuple = node(Expr::Kind::kTuple);
    tuple->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().type == TokenType::kBlockEnd || peek().type == TokenType::kVarEnd || is_name("if"))
        break;
      tuple->items.push_back(conditional ? parse_expression() : parse_or());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    Nesting nesting(*this);
    ExprPtr value = parse_or();
    while (skip_name("if")) {
      ExprPtr e = node(Expr::Kind::kIf);
      e->items.push_back(std::move(value));
      e->items.push_back(parse_or());
      e->items.push_back(skip_name("else") ? parse_expression() : nullptr);
      value = std::move(e);
    }
    return value;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    ExprPtr e = node(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    Nesting nesting(*this);
    if (!is_name("not")) return parse_compare();
    ExprPtr e = node(Expr::Kind::kUnary);
    next();
    e->name = "not";
    e->items.push_back(parse_not());
    return e;
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr chain;
    for (;;) {
      std::string op;
      if (peek().type == TokenType::kOperator &&
          std::set<std::string>{"==", "!=", "<", ">", "<=", ">="}.count(peek().text)) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!chain) {
        chain = node(Expr::Kind::kCompare);
        chain->items.push_back(std::move(first));
      }
      chain->ops.push_back(op);
      chain->items.push_back(parse_math1());
    }
    return chain ? std::move(chain) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = binary("~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nesting nesting(*this);
    ExprPtr value;
    if (is_op("-") || is_op("+")) {
      value = node(Expr::Kind::kUnary);
      value->name = next().text;
      value->items.push_back(parse_unary(false));
    } else {
      value = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(value)) : std::move(value);
  }

  ExprPtr literal(Value v) {
    ExprPtr e = node(Expr::Kind::kLiteral);
    e->literal = std::move(v);
    next();
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tok = peek();
    switch (tok.type) {
      case TokenType::kName: {
        const std::string& n = tok.text;
        if (n == "true" || n == "True") return literal(Value(true));
        if (n == "false" || n == "False") return literal(Value(false));
        if (n == "none" || n == "None") return literal(Value::none());
        ExprPtr e = node(Expr::Kind::kName);
        e->name = next().text;
        return e;
      }
      case TokenType::kString: {
        ExprPtr e = literal(Value(tok.text));
        std::string joined = e->literal.as_string();
        while (peek().type == TokenType::kString) joined += next().text;  // "a" "b"
        e->literal = Value(joined);
        return e;
      }
      case TokenType::kInteger:
        return literal(Value(parse_int64(tok.text)));
      case TokenType::kFloat:
        return literal(Value(std::strtod(tok.text.c_str(), nullptr)));
      default:
        break;
    }
    if (skip_op("(")) return parse_parenthesised();
    if (is_op("[")) return parse_sequence(Expr::Kind::kList, "]");
    if (is_op("{")) return parse_dict();
    fail("unexpected '" + tok.text + "'");
  }

  ExprPtr parse_parenthesised() {
    ExprPtr tuple = node(Expr::Kind::kTuple);
    if (skip_op(")")) return tuple;
    ExprPtr first = parse_expression();
    if (skip_op(")")) return first;
    tuple->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (is_op(")")) break;
      tuple->items.push_back(parse_expression());
    }
    expect_op(")");
    return tuple;
  }

  ExprPtr parse_sequence(Expr::Kind kind, const char* close) {
    ExprPtr e = node(kind);
    next();
    while (!skip_op(close)) {
      if (!e->items.empty()) expect_op(",");
      if (skip_op(close)) break;
      e->items.push_back(parse_expression());
    }
    return e;
  }

  ExprPtr parse_dict() {
    ExprPtr e = node(Expr::Kind::kDict);
    next();
    while (!skip_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (skip_op("}")) break;
      e->items.push_back(parse_expression());
      expect_op(":");
      e->items.push_back(parse_expression());
    }
    return e;
  }

  ExprPtr parse_postfix(ExprPtr value) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        value = parse_subscript(std::move(value));
      } else if (is_op("(")) {
        value = parse_call(std::move(value));
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr value) {
    if (skip_op(".")) {
      if (peek().type == TokenType::kInteger) {
        ExprPtr e = node(Expr::Kind::kItem);
        e->items.push_back(std::move(value));
        e->items.push_back(literal(Value(parse_int64(peek().text))));
        return e;
      }
      ExprPtr e = node(Expr::Kind::kAttr);
      e->name = expect_identifier();
      e->items.push_back(std::move(value));
      return e;
    }
    expect_op("[");
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (skip_op(":")) {
        if (++colons > 2) fail("a slice takes at most two ':'");
        continue;
      }
      if (parts[colons]) fail("expected ':' or ']' in a subscript");
      parts[colons] = parse_expression();
    }
    next();
    ExprPtr e = node(colons ? Expr::Kind::kSlice : Expr::Kind::kItem);
    e->items.push_back(std::move(value));
    if (!colons && !parts[0]) fail("an empty subscript");
    for (int i = 0; i < (colons ? 3 : 1); ++i) e->items.push_back(std::move(parts[i]));
    return e;
  }

  void parse_arguments(Expr& e) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!e.args.empty() || !e.keywords.empty()) expect_op(",");
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (peek().type == TokenType::kName && is_op("=", 1)) {
        std::string key = next().text;
        next();
        e.keywords.emplace_back(key, parse_expression());
      } else {
        if (!e.keywords.empty()) fail("a positional argument after a keyword argument");
        e.args.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr e = node(Expr::Kind::kCall);
    e->items.push_back(std::move(callee));
    parse_arguments(*e);
    return e;
  }

  ExprPtr parse_filters(ExprPtr value) {
    for (;;) {
      if (skip_op("|")) {
        ExprPtr e = node(Expr::Kind::kFilter);
        e->name = expect_identifier();
        while (skip_op(".")) e->name += "." + expect_identifier();
        e->items.push_back(std::move(value));
        if (is_op("(")) parse_arguments(*e);
        value = std::move(e);
      } else if (skip_name("is")) {
        value = parse_test(std::move(value));
      } else if (is_op("(")) {
        value = parse_call(std::move(value));
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_test(ExprPtr value) {
    ExprPtr e = node(Expr::Kind::kTest);
    e->negated = skip_name("not");
    e->name = expect_identifier();
    e->items.push_back(std::move(value));
    const Token& tok = peek();
    if (is_op("(")) {
      parse_arguments(*e);
    } else if ((tok.type == TokenType::kName &&
                !std::set<std::string>{"else", "or", "and", "if", "is", "in", "not"}.count(
                    tok.text)) ||
               tok.type == TokenType::kString || tok.type == TokenType::kInteger ||
               tok.type == TokenType::kFloat || is_op("[") || is_op("{")) {
      e->args.push_back(parse_postfix(parse_primary()));  // `is divisibleby 3`
    }
    return e;
  }

  struct Nesting {
    Parser& p;
    explicit Nesting(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.fail("nesting deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Nesting() { --p.depth_; }
  };

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) {
  return Parser(tokenize_template(source)).parse_all();
}

}  // namespace trident::chat_template
