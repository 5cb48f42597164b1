// parse_curate_line: a document's text and id from a JSON line, and the reason for a bad one.
#include <gtest/gtest.h>

#include "curation/document.h"

using namespace trident::curation;

TEST(CurationDocument, ParsesAndRejects) {
  ParsedLine p;
  EXPECT_EQ(parse_curate_line(R"({"text":"hi","id":7,"x":[1]})", "text", "id", &p), "");
  EXPECT_EQ(p.text, "hi");
  EXPECT_EQ(p.id, "7");
  EXPECT_EQ(p.object["x"][0], 1);
  EXPECT_EQ(parse_curate_line("{", "text", "id", &p), "invalid JSON");
  EXPECT_EQ(parse_curate_line("[1]", "text", "id", &p), "not a JSON object");
  EXPECT_EQ(parse_curate_line(R"({"id":1})", "text", "id", &p), "missing key \"text\"");
  EXPECT_EQ(parse_curate_line(R"({"text":1})", "text", "id", &p), "key \"text\" is not a string");
  EXPECT_EQ(parse_curate_line("{\"text\":\"\xff\"}", "text", "id", &p).rfind("invalid UTF-8", 0),
            0u);
}
