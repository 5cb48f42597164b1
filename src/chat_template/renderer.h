#pragma once
// Renders a parsed template against its variables, with Jinja's scoping: a for loop's body
// gets a fresh scope each iteration, `if` none, a macro its own above the scope it was
// defined in; `set` writes the innermost scope, `set ns.x` the namespace.
#include <string>
#include <unordered_map>
#include <vector>

#include "chat_template/syntax.h"

namespace trident::chat_template {

class Renderer {
 public:
  explicit Renderer(Dict variables);  // the globals are added beneath them
  std::string render(const Body& body);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  Flow render_body(const Body& body, std::string& out);
  Flow render_statement(const Stmt& s, std::string& out);
  Flow render_if(const Stmt& s, std::string& out);
  void render_for(const Stmt& s, std::string& out);
  void assign(const Stmt& s, Value value);
  void define_macro(const Stmt& s);
  Value call_macro(const Stmt& s, size_t defined_depth, CallArgs& args);

  Value lookup(const std::string& name) const;
  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_unary(const Expr& e);
  Value eval_slice(const Expr& e);
  CallArgs eval_arguments(const Expr& e);

  std::vector<Scope> scopes_;
  // Budgets against hostile templates (chat templates come with downloaded models): loop
  // iterations in all, macro calls in flight, and the output's size.
  long iterations_left_ = 10'000'000;
  int macro_depth_ = 0;
};

}  // namespace trident::chat_template
