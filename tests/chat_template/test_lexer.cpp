#include <gtest/gtest.h>

#include "chat_template/lexer.h"
#include "chat_template/value.h"

namespace trident::chat_template {
namespace {

std::string data_of(const std::string& source) {
  std::string out;
  for (const Token& t : tokenize_template(source))
    if (t.type == TokenType::kData) out += t.text;
  return out;
}

// Jinja's whitespace rules under trim_blocks and lstrip_blocks (its documentation's
// examples, worked by hand).
TEST(ChatTemplateLexer, TrimAndLstripBlocks) {
  EXPECT_EQ(data_of("a\n  {% if x %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(data_of("a  {% if x %}b"), "a  b");       // not alone on its line: kept
  EXPECT_EQ(data_of("  {{ x }}\n"), "  ");            // variables are not stripped
  EXPECT_EQ(data_of("a  {%- if x -%}  \n b"), "ab");  // - strips every side's whitespace
  EXPECT_EQ(data_of("  {%+ if x %}\nb"), "  b");      // + keeps the indentation
  EXPECT_EQ(data_of("{% if x +%}\nb"), "\nb");        // +%} keeps the newline
  EXPECT_EQ(data_of("a\n{# note #}\nb\n"), "a\nb");   // comments trim; one trailing \n dropped
  EXPECT_EQ(data_of("a\r\nb"), "a\nb");
}

TEST(ChatTemplateLexer, StringEscapesAndNumbers) {
  const std::vector<Token> t = tokenize_template("{{ 'a\\n\\u00e9\\'' ~ 1_000 ~ 2.5e-3 }}");
  ASSERT_EQ(t[1].type, TokenType::kString);
  EXPECT_EQ(t[1].text, "a\n\xc3\xa9'");
  EXPECT_EQ(t[3].type, TokenType::kInteger);
  EXPECT_EQ(t[3].text, "1000");
  EXPECT_EQ(t[5].type, TokenType::kFloat);
}

TEST(ChatTemplateLexer, BracesInsideATagDoNotCloseIt) {
  const std::vector<Token> t = tokenize_template("{{ {'a': {'b': 1}} }}x");
  EXPECT_EQ(t.back().type, TokenType::kEnd);
  EXPECT_EQ(t[t.size() - 2].text, "x");
}

TEST(ChatTemplateLexer, BadTagsNameTheirLine) {
  EXPECT_THROW(tokenize_template("a\n{{ 'open"), TemplateError);
  try {
    tokenize_template("a\nb\n{{ x ");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::chat_template
