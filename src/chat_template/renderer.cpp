#include "chat_template/renderer.h"

#include "chat_template/builtins.h"
#include "chat_template/operators.h"

namespace trident::chat_template {

Renderer::Renderer(Dict variables) {
  scopes_.emplace_back();
  for (auto& [k, v] : builtin_globals().items) scopes_[0][k] = v;
  scopes_.emplace_back();
  for (auto& [k, v] : variables.items) scopes_[1][k] = v;
}

std::string Renderer::render(const Body& body) {
  std::string out;
  render_body(body, out);
  return out;
}

namespace {
constexpr size_t kMaxOutputBytes = size_t{256} << 20;
constexpr int kMaxMacroDepth = 64;
}  // namespace

Renderer::Flow Renderer::render_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    if (out.size() > kMaxOutputBytes) throw TemplateError("the render passed 256 MiB");
    const Flow flow = render_statement(*s, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::render_statement(const Stmt& s, std::string& out) {
  try {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out += s.text;
        break;
      case Stmt::Kind::kOutput:
        out += eval(*s.expr).str();
        break;
      case Stmt::Kind::kIf:
        return render_if(s, out);
      case Stmt::Kind::kFor:
        render_for(s, out);
        break;
      case Stmt::Kind::kSet:
        assign(s, eval(*s.expr));
        break;
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        render_body(s.bodies[0], captured);
        assign(s, Value(captured));
        break;
      }
      case Stmt::Kind::kMacro:
        define_macro(s);
        break;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kGeneration:
        return render_body(s.bodies[0], out);
    }
  } catch (const TemplateError& e) {
    if (std::string(e.what()).rfind("line ", 0) == 0) throw;
    throw TemplateError("line " + std::to_string(s.line) + ": " + e.what());
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::render_if(const Stmt& s, std::string& out) {
  for (size_t i = 0; i < s.conditions.size(); ++i)
    if (eval(*s.conditions[i]).truthy()) return render_body(s.bodies[i], out);
  if (s.bodies.size() > s.conditions.size()) return render_body(s.bodies.back(), out);
  return Flow::kNormal;
}

namespace {

Value loop_object(const List& items, size_t i) {
  const int64_t n = (int64_t)items.size(), k = (int64_t)i;
  Dict loop;
  loop.set("index", Value(k + 1));
  loop.set("index0", Value(k));
  loop.set("revindex", Value(n - k));
  loop.set("revindex0", Value(n - k - 1));
  loop.set("first", Value(k == 0));
  loop.set("last", Value(k == n - 1));
  loop.set("length", Value(n));
  loop.set("depth", Value(int64_t{1}));
  loop.set("depth0", Value(int64_t{0}));
  loop.set("previtem", k > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  loop.set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  loop.set("cycle", Value::function("loop.cycle", [k](CallArgs& args) {
             if (args.positional.empty())
               throw TemplateError("loop.cycle() needs at least one item");
             return args.positional[k % args.positional.size()];
           }));
  return Value(loop);
}

}  // namespace

void Renderer::render_for(const Stmt& s, std::string& out) {
  List items;
  const List all = iterate(eval(*s.expr));
  for (const Value& item : all) {
    if (!s.condition) {
      items.push_back(item);
      continue;
    }
    scopes_.emplace_back();
    assign(s, item);
    if (eval(*s.condition).truthy()) items.push_back(item);
    scopes_.pop_back();
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (--iterations_left_ < 0)
      throw TemplateError("the template ran more than 10,000,000 loop iterations");
    scopes_.emplace_back();
    scopes_.back()["loop"] = loop_object(items, i);
    assign(s, items[i]);
    const Flow flow = render_body(s.bodies[0], out);
    scopes_.pop_back();
    if (flow == Flow::kBreak) break;
  }
  if (items.empty() && s.bodies.size() > 1) render_body(s.bodies[1], out);
}

void Renderer::assign(const Stmt& s, Value value) {
  if (!s.attribute.empty()) {
    Value target = lookup(s.targets[0]);
    if (target.kind() != Value::Kind::kNamespace)
      throw TemplateError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    target.namespace_attributes().set(s.attribute, std::move(value));
    return;
  }
  if (s.targets.size() == 1) {
    scopes_.back()[s.targets[0]] = std::move(value);
    return;
  }
  const List items = iterate(value);
  if (items.size() != s.targets.size())
    throw TemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                        std::to_string(s.targets.size()) + " names");
  for (size_t i = 0; i < items.size(); ++i) scopes_.back()[s.targets[i]] = items[i];
}

void Renderer::define_macro(const Stmt& s) {
  const size_t depth = scopes_.size();
  scopes_.back()[s.name] = Value::function(
      s.name, [this, &s, depth](CallArgs& args) { return call_macro(s, depth, args); });
}

// The macro's body sees the scopes it was defined in (not the caller's) and its parameters.
Value Renderer::call_macro(const Stmt& s, size_t defined_depth, CallArgs& args) {
  if (macro_depth_ >= kMaxMacroDepth)
    throw TemplateError("macro calls nested deeper than " + std::to_string(kMaxMacroDepth));
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{++macro_depth_};
  std::vector<Scope> caller(scopes_.begin() + std::min(defined_depth, scopes_.size()),
                            scopes_.end());
  scopes_.resize(std::min(defined_depth, scopes_.size()));
  scopes_.emplace_back();
  args.callee = s.name;
  std::string out;
  try {
    for (size_t i = 0; i < s.params.size(); ++i) {
      Value v = args.get(i, s.params[i].first);
      if (v.is_undefined() && s.params[i].second) v = eval(*s.params[i].second);
      scopes_.back()[s.params[i].first] = v;
    }
    args.expect_no_more();
    render_body(s.bodies[0], out);
  } catch (...) {
    scopes_.pop_back();
    scopes_.insert(scopes_.end(), caller.begin(), caller.end());
    throw;
  }
  scopes_.pop_back();
  scopes_.insert(scopes_.end(), caller.begin(), caller.end());
  return Value(out);
}

Value Renderer::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return found->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace trident::chat_template
