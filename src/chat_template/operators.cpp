#include "chat_template/operators.h"

#include <cmath>

#include "chat_template/builtins.h"

namespace trident::chat_template {
namespace {

using K = Value::Kind;

bool numeric(const Value& v) {
  return v.is_number() || v.kind() == K::kBool;
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() && !a.name().empty()) throw TemplateError(a.name());
  if (b.is_undefined() && !b.name().empty()) throw TemplateError(b.name());
  throw TemplateError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

Value repeat(const Value& sequence, int64_t times) {
  const size_t unit =
      sequence.is_string() ? sequence.as_string().size() : sequence.as_list().size();
  if (times > 0 && (times > (1 << 24) || unit * (size_t)times > (size_t{1} << 24)))
    throw TemplateError("a repetition of more than 16 Mi characters or items in a chat template");
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value(out);
  }
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return Value(out);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool floating = a.kind() == K::kFloat || b.kind() == K::kFloat;
  const double x = a.as_double(), y = b.as_double();
  const int64_t i = a.as_int(), j = b.as_int();
  int64_t r = 0;
  // Python's ints never overflow; a template's never need past 64 bits, so that is an error.
  auto exact = [&](bool overflowed) {
    if (overflowed) throw TemplateError("an integer " + op + " past 64 bits");
    return Value(r);
  };
  if (op == "+") return floating ? Value(x + y) : exact(__builtin_add_overflow(i, j, &r));
  if (op == "-") return floating ? Value(x - y) : exact(__builtin_sub_overflow(i, j, &r));
  if (op == "*") return floating ? Value(x * y) : exact(__builtin_mul_overflow(i, j, &r));
  if ((op == "/" || op == "//" || op == "%") && y == 0) throw TemplateError("division by zero");
  if (op == "/") return Value(x / y);
  if (!floating && i == INT64_MIN && j == -1) return exact(true);
  if (op == "//") {
    if (floating) return Value(std::floor(x / y));
    return Value(i / j - ((i % j != 0) && ((i < 0) != (j < 0))));
  }
  if (op == "%") {
    if (floating) return Value(x - std::floor(x / y) * y);
    const int64_t r = i % j;
    return Value(r != 0 && ((r < 0) != (j < 0)) ? r + j : r);
  }
  if (op == "**") {
    if (floating || j < 0) return Value(std::pow(x, y));
    r = 1;  // by squaring, each step checked
    for (int64_t base = i, e = j; e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return exact(true);
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) return exact(true);
    }
    return Value(r);
  }
  unsupported(op, a, b);
}

}  // namespace

Value binary_operator(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (numeric(a) && numeric(b)) return arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return a.is_tuple() ? Value::tuple(out) : Value(out);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.kind() == K::kInt)
    return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && a.kind() == K::kInt)
    return repeat(b, a.as_int());
  if (op == "%" && a.is_string())
    throw TemplateError("printf-style '%' string formatting is not supported in chat templates");
  unsupported(op, a, b);
}

namespace {

// Python's slice.indices(): bounds clamped to the sequence, negatives from the end.
void slice_indices(int64_t size, const Value* start, const Value* stop, int64_t step,
                   int64_t& first, int64_t& last) {
  auto bound = [&](const Value* v, int64_t fallback) {
    if (!v || v->is_none()) return fallback;
    int64_t i = v->as_int();
    if (i < 0) i += size;
    if (step > 0) return std::clamp<int64_t>(i, 0, size);
    return std::clamp<int64_t>(i, -1, size - 1);
  };
  first = bound(start, step > 0 ? 0 : size - 1);
  last = bound(stop, step > 0 ? size : -1);
}

}  // namespace

Value slice_of(const Value& value, const Value* start, const Value* stop, const Value* step_value) {
  const int64_t step = step_value && !step_value->is_none() ? step_value->as_int() : 1;
  if (step == 0) throw TemplateError("slice step cannot be zero");
  List items = value.is_string() ? iterate(value) : value.is_list() ? value.as_list() : List{};
  if (!value.is_string() && !value.is_list())
    throw TemplateError("'" + value.type_name() + "' object is not subscriptable");
  int64_t first, last;
  slice_indices((int64_t)items.size(), start, stop, step, first, last);
  List out;
  // Counted, not stepped past the end: a huge step must not overflow.
  const __int128 span = (__int128)last - first;
  const __int128 count = span / step + (span % step != 0 && (span > 0) == (step > 0));
  for (int64_t k = 0; k < (int64_t)count; ++k) out.push_back(items[first + k * step]);
  if (!value.is_string()) return value.is_tuple() ? Value::tuple(out) : Value(out);
  std::string s;
  for (const Value& c : out) s += c.as_string();
  return Value(s);
}

}  // namespace trident::chat_template
