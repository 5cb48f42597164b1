// Expression evaluation for the renderer.
#include "chat_template/builtins.h"
#include "chat_template/operators.h"
#include "chat_template/renderer.h"

namespace trident::chat_template {

Value Renderer::eval(const Expr& e) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::kLiteral:
      return e.literal;
    case K::kName:
      return lookup(e.name);
    case K::kList:
    case K::kTuple: {
      List items;
      for (const auto& item : e.items) items.push_back(eval(*item));
      return e.kind == K::kTuple ? Value::tuple(items) : Value(items);
    }
    case K::kDict: {
      Dict d;
      for (size_t i = 0; i < e.items.size(); i += 2) {
        Value key = eval(*e.items[i]);
        if (!key.is_string()) throw TemplateError("dict keys in chat templates must be strings");
        d.set(key.as_string(), eval(*e.items[i + 1]));
      }
      return Value(d);
    }
    case K::kAttr:
      return get_attribute(eval(*e.items[0]), e.name);
    case K::kItem:
      return get_item(eval(*e.items[0]), eval(*e.items[1]));
    case K::kSlice:
      return eval_slice(e);
    case K::kCall:
      return eval_call(e);
    case K::kFilter: {
      Value v = eval(*e.items[0]);
      CallArgs args = eval_arguments(e);
      return apply_filter(e.name, v, args);
    }
    case K::kTest: {
      Value v = eval(*e.items[0]);
      CallArgs args = eval_arguments(e);
      return Value(apply_test(e.name, v, args) != e.negated);
    }
    case K::kUnary:
      return eval_unary(e);
    case K::kBinary:
      return eval_binary(e);
    case K::kCompare:
      return eval_compare(e);
    case K::kIf:
      if (eval(*e.items[1]).truthy()) return eval(*e.items[0]);
      return e.items[2] ? eval(*e.items[2])
                        : Value::undefined("the conditional expression had no else");
  }
  return Value();
}

CallArgs Renderer::eval_arguments(const Expr& e) {
  CallArgs args;
  for (const auto& a : e.args) args.positional.push_back(eval(*a));
  for (const auto& [k, v] : e.keywords) args.keyword.emplace_back(k, eval(*v));
  return args;
}

Value Renderer::eval_call(const Expr& e) {
  Value callee = eval(*e.items[0]);
  if (callee.kind() != Value::Kind::kFunction) {
    if (callee.is_undefined() && !callee.name().empty()) throw TemplateError(callee.name());
    throw TemplateError("'" + callee.type_name() + "' object is not callable");
  }
  CallArgs args = eval_arguments(e);
  args.callee = callee.name();
  return callee.as_function()(args);
}

Value Renderer::eval_slice(const Expr& e) {
  Value v = eval(*e.items[0]);
  Value bounds[3];
  for (int i = 0; i < 3; ++i)
    if (e.items[i + 1]) bounds[i] = eval(*e.items[i + 1]);
  return slice_of(v, e.items[1] ? &bounds[0] : nullptr, e.items[2] ? &bounds[1] : nullptr,
                  e.items[3] ? &bounds[2] : nullptr);
}

Value Renderer::eval_unary(const Expr& e) {
  Value v = eval(*e.items[0]);
  if (e.name == "not") return Value(!v.truthy());
  if (!v.is_number() && v.kind() != Value::Kind::kBool)
    throw TemplateError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
  if (e.name == "+") return v.kind() == Value::Kind::kBool ? Value(v.as_int()) : v;
  if (v.kind() != Value::Kind::kFloat && v.as_int() == INT64_MIN)
    throw TemplateError("an integer negation past 64 bits");
  return v.kind() == Value::Kind::kFloat ? Value(-v.as_double()) : Value(-v.as_int());
}

// `and` and `or` return an operand, as Python's do.
Value Renderer::eval_binary(const Expr& e) {
  Value a = eval(*e.items[0]);
  if (e.name == "and") return a.truthy() ? eval(*e.items[1]) : a;
  if (e.name == "or") return a.truthy() ? a : eval(*e.items[1]);
  return binary_operator(e.name, a, eval(*e.items[1]));
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.items[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1]);
    const std::string& op = e.ops[i];
    bool holds;
    if (op == "==")
      holds = left == right;
    else if (op == "!=")
      holds = !(left == right);
    else if (op == "<")
      holds = less_than(left, right);
    else if (op == ">")
      holds = less_than(right, left);
    else if (op == "<=")
      holds = !less_than(right, left);
    else if (op == ">=")
      holds = !less_than(left, right);
    else if (op == "in")
      holds = contains(right, left);
    else
      holds = !contains(right, left);
    if (!holds) return Value(false);
    left = right;
  }
  return Value(true);
}

}  // namespace trident::chat_template
