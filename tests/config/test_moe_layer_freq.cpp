// --moe-layer-freq: the list expressions Megatron evaluates with Python's eval, against the
// lists Python gives for them (worked out by hand from Python's rules: + concatenates lists,
// list * n and n * list repeat, * binds tighter than +, a trailing comma is allowed), the
// integer form against Megatron's rule (layer i is MoE iff i % N == 0), and every malformed
// text refused with a message naming the flag.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "config/moe_layer_freq.h"

namespace trident {
namespace {

TEST(MoeLayerFreq, ListExpressionsEvaluateAsPython) {
  // Megatron's help examples.
  EXPECT_EQ(evaluate_moe_layer_pattern("([1]*3+[0]*1)*3"),
            (std::vector<long>{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}));
  std::vector<long> first_dense(24, 1);
  first_dense[0] = 0;
  EXPECT_EQ(evaluate_moe_layer_pattern("([0]+[1]*23)"), first_dense);
  EXPECT_EQ(evaluate_moe_layer_pattern("([1]*3+[0]*2)*2"),
            (std::vector<long>{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  // Literals, spaces, a trailing comma, the empty list.
  EXPECT_EQ(evaluate_moe_layer_pattern("[1,0,1,0]"), (std::vector<long>{1, 0, 1, 0}));
  EXPECT_EQ(evaluate_moe_layer_pattern(" [ 1 , 0 , ] "), (std::vector<long>{1, 0}));
  EXPECT_EQ(evaluate_moe_layer_pattern("[]"), std::vector<long>{});
  // n * list, arithmetic on the counts, precedence, a zero repeat.
  EXPECT_EQ(evaluate_moe_layer_pattern("2*[1,0]"), (std::vector<long>{1, 0, 1, 0}));
  EXPECT_EQ(evaluate_moe_layer_pattern("[1]*(1+2)"), (std::vector<long>{1, 1, 1}));
  EXPECT_EQ(evaluate_moe_layer_pattern("[0]+[1]*2"), (std::vector<long>{0, 1, 1}));
  EXPECT_EQ(evaluate_moe_layer_pattern("[1]*0+[0,1]"), (std::vector<long>{0, 1}));
  EXPECT_EQ(evaluate_moe_layer_pattern("[(1)]"), std::vector<long>{1});
  // Entries are expressions too (checked against 0/1 only when resolved).
  EXPECT_EQ(evaluate_moe_layer_pattern("[1+1,3*0]"), (std::vector<long>{2, 0}));
}

TEST(MoeLayerFreq, MalformedExpressionsAreRefused) {
  // Bounded: no deep recursion, no huge list, no huge text.
  auto message_of = [](const std::string& text) {
    try {
      evaluate_moe_layer_pattern(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message_of(std::string(1000, '(') + "[1]" + std::string(1000, ')'))
                .find("brackets nested deeper than 64"),
            std::string::npos);
  EXPECT_EQ(evaluate_moe_layer_pattern(std::string(63, '(') + "[1]" + std::string(63, ')')),
            std::vector<long>{1});
  EXPECT_NE(message_of("[1]*16385").find("a list too long"), std::string::npos);
  EXPECT_EQ(evaluate_moe_layer_pattern("[1]*16384").size(), 16384u);
  EXPECT_NE(message_of("[1]" + std::string(20000, ' ')).find("longer than 16384 characters"),
            std::string::npos);
  for (const char* text :
       {"[1,[0]]", "[1]+1", "1+[1]", "[1]*[1]", "[1,0", "(1,0)", "[1] [0]", "[1,0][1]", "[a]",
        "[1.5]", "[-1]", "[1,,0]", "[,1]", "([1]", "[1]*99999999999", "(1+1)*[1]+"}) {
    try {
      evaluate_moe_layer_pattern(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--moe-layer-freq '" + std::string(text) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(MoeLayerFreq, IntegerFormIsEveryNthLayerFromTheFirst) {
  EXPECT_EQ(resolve_moe_layer_freq("1", 3), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(resolve_moe_layer_freq("2", 4), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(resolve_moe_layer_freq(" 3 ", 5), (std::vector<bool>{true, false, false, true, false}));
  EXPECT_EQ(resolve_moe_layer_freq("7", 2), (std::vector<bool>{true, false}));
  for (const char* text : {"0", "-1", "1+1", "two", "", "2.0"})
    EXPECT_THROW(resolve_moe_layer_freq(text, 4), std::invalid_argument) << text;
}

TEST(MoeLayerFreq, ListFormNeedsOneZeroOrOnePerLayer) {
  EXPECT_EQ(resolve_moe_layer_freq("([1]*1+[0]*1)*2", 4),
            (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(resolve_moe_layer_freq("[0,1,1]", 3), (std::vector<bool>{false, true, true}));
  try {
    resolve_moe_layer_freq("[1]*3", 4);
    ADD_FAILURE() << "a pattern of 3 layers accepted for 4";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gives 3 layers; --num-layers is 4"), std::string::npos)
        << e.what();
  }
  try {
    resolve_moe_layer_freq("[1,2,0]", 3);
    ADD_FAILURE() << "an entry 2 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("entry 1 is 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident
