#pragma once
// The parsed template: expressions and statements as plain trees, built by parse_template()
// and walked by the renderer. One node type for each, told apart by `kind`.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/value.h"

namespace trident::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // items
    kTuple,    // items
    kDict,     // items: key, value, key, value...
    kAttr,     // items[0].name
    kItem,     // items[0][items[1]]
    kSlice,    // items[0][items[1]:items[2]:items[3]], any of the three may be null
    kCall,     // items[0](args, keywords)
    kFilter,   // items[0] | name(args, keywords)
    kTest,     // items[0] is [not] name(args)
    kUnary,    // name ("-", "+", "not") items[0]
    kBinary,   // items[0] name items[1]; name is an operator, "and", "or", "in", "not in"
    kCompare,  // items[0] ops[0] items[1] ops[1] items[2]... (chained as Python)
    kIf,       // items[0] if items[1] else items[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  std::string name;
  bool negated = false;  // kTest: `is not`
  Value literal;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // expr
    kIf,        // conditions[i] -> bodies[i]; a trailing extra body is the else
    kFor,       // for targets in expr [if condition]: bodies[0], else bodies[1]
    kSet,       // targets (one name, several to unpack, or attribute.name) = expr
    kSetBlock,  // targets[0] = the rendered bodies[0]
    kMacro,     // name(params with defaults): bodies[0]
    kBreak,
    kContinue,
    kGeneration,  // HF's {% generation %}: renders bodies[0]
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::string attribute;  // kSet on a namespace: `set ns.attribute = ...`
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro; null: no default
};

// A TemplateError names the line and the construct for syntax it does not support.
Body parse_template(const std::string& source);

}  // namespace trident::chat_template
