#pragma once
// Jinja's lexer under HuggingFace's chat-template settings: trim_blocks (the newline after a
// block or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or comment
// tag on its own line are dropped), `-` and `+` whitespace control on every tag, one trailing
// newline of the template dropped, and line breaks normalised to "\n".
#include <string>
#include <vector>

namespace trident::chat_template {

enum class TokenType {
  kData,        // literal text
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded string
  kInteger,
  kFloat,
  kOperator,
  kEnd,
};

struct Token {
  TokenType type;
  std::string text;
  int line;
};

// The template's tokens, ending with kEnd; a TemplateError names the line of a bad tag.
std::vector<Token> tokenize_template(const std::string& source);

}  // namespace trident::chat_template
