#include <gtest/gtest.h>

#include "chat_template/value.h"

namespace trident::chat_template {
namespace {

// Python's repr(float), typed in from CPython 3.11.
TEST(ChatTemplateValue, FloatsPrintAsPythonReprs) {
  EXPECT_EQ(python_float(0.1), "0.1");
  EXPECT_EQ(python_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float(1.0), "1.0");
  EXPECT_EQ(python_float(-2.5), "-2.5");
  EXPECT_EQ(python_float(1e16), "1e+16");
  EXPECT_EQ(python_float(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float(123456789.0), "123456789.0");
  EXPECT_EQ(python_float(1e-4), "0.0001");
  EXPECT_EQ(python_float(1e-5), "1e-05");
  EXPECT_EQ(python_float(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(python_float(5e-324), "5e-324");
  EXPECT_EQ(python_float(0.0), "0.0");
}

TEST(ChatTemplateValue, ReprsFollowPython) {
  EXPECT_EQ(Value("it's").repr(), "\"it's\"");
  EXPECT_EQ(Value("a\nb'\"").repr(), "'a\\nb\\'\"'");
  EXPECT_EQ(Value(List{Value(1), Value("x"), Value::none(), Value(true)}).repr(),
            "[1, 'x', None, True]");
  EXPECT_EQ(Value::tuple({Value(1)}).repr(), "(1,)");
  Dict d;
  d.set("b", Value(2.0));
  d.set("a", Value(List{}));
  EXPECT_EQ(Value(d).repr(), "{'b': 2.0, 'a': []}");  // insertion order
  EXPECT_EQ(Value().str(), "");                       // Undefined prints nothing
}

TEST(ChatTemplateValue, EqualityAndOrderAsPython) {
  EXPECT_TRUE(Value(1) == Value(1.0));
  EXPECT_TRUE(Value(true) == Value(1));
  EXPECT_FALSE(Value("1") == Value(1));
  EXPECT_TRUE(less_than(Value("B"), Value("a")));  // code point order
  EXPECT_TRUE(less_than(Value(List{Value(1), Value(2)}), Value(List{Value(1), Value(3)})));
  EXPECT_THROW(less_than(Value("a"), Value(1)), TemplateError);
}

TEST(ChatTemplateValue, CodePointsSplitUtf8) {
  const std::vector<std::string> cps = code_points("aé日🎉");
  ASSERT_EQ(cps.size(), 4u);
  EXPECT_EQ(cps[1], "é");
  EXPECT_EQ(cps[3], "🎉");
}

}  // namespace
}  // namespace trident::chat_template
