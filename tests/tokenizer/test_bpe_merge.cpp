// The heap-based merge against the two published merge loops, written here as they are
// published (quadratic, on strings): GPT-2's encoder.py (the lowest-ranked pair, then all its
// occurrences left to right) and HF `tokenizers`' Word::merge_all read as "the current pair of
// lowest (rank, position), one at a time". Random merge tables over a small alphabet, with
// ranks in learned order (where the two loops agree) and shuffled (where they may not).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/bpe_merge.h"

namespace trident::tokenizer {
namespace {

// A vocabulary of strings and merges (left, right) -> rank whose result is left + right.
struct Table {
  std::vector<std::string> tokens;  // id -> text
  std::map<std::string, int> ids;
  std::map<std::pair<std::string, std::string>, int> ranks;

  int id(const std::string& t) {
    auto [it, added] = ids.emplace(t, (int)tokens.size());
    if (added) tokens.push_back(t);
    return it->second;
  }
  BpeMerges merges() const {
    BpeMerges m;
    for (const auto& [pair, rank] : ranks)
      m[bpe_pair_key(ids.at(pair.first), ids.at(pair.second))] = {rank,
                                                                  ids.at(pair.first + pair.second)};
    return m;
  }
};

// `count` merges of random pairs of tokens made so far, over "abc"; shuffled: ranks permuted.
Table random_table(std::mt19937& rng, int count, bool shuffled) {
  Table t;
  for (char c : std::string("abc")) t.id(std::string(1, c));
  std::vector<std::pair<std::string, std::string>> order;
  while ((int)order.size() < count) {
    const std::string a = t.tokens[rng() % t.tokens.size()], b = t.tokens[rng() % t.tokens.size()];
    if (a.size() + b.size() > 8 || t.ranks.count({a, b})) continue;
    t.ranks[{a, b}] = 0;
    t.id(a + b);
    order.push_back({a, b});
  }
  std::vector<int> rank(count);
  for (int i = 0; i < count; ++i) rank[i] = i;
  if (shuffled) std::shuffle(rank.begin(), rank.end(), rng);
  for (int i = 0; i < count; ++i) t.ranks[order[i]] = rank[i];
  return t;
}

int rank_of(const Table& t, const std::string& a, const std::string& b) {
  auto it = t.ranks.find({a, b});
  return it == t.ranks.end() ? -1 : it->second;
}

// GPT-2's encoder.py bpe(): the lowest-ranked pair, then every occurrence of it, left to right.
std::vector<std::string> gpt2_loop(const Table& t, std::vector<std::string> word) {
  while (word.size() > 1) {
    int best = -1;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const int r = rank_of(t, word[i], word[i + 1]);
      if (r >= 0 && (best < 0 || r < best)) best = r;
    }
    if (best < 0) break;
    std::vector<std::string> next;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && rank_of(t, word[i], word[i + 1]) == best) {
        next.push_back(word[i] + word[i + 1]);
        i += 2;
      } else {
        next.push_back(word[i++]);
      }
    }
    word = next;
  }
  return word;
}

// HF's merge_all: one merge at a time, the pair of lowest rank, the leftmost of equal ranks.
std::vector<std::string> hf_loop(const Table& t, std::vector<std::string> word) {
  while (true) {
    int best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const int r = rank_of(t, word[i], word[i + 1]);
      if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
    }
    if (best < 0) return word;
    word[at] += word[at + 1];
    word.erase(word.begin() + at + 1);
  }
}

std::vector<std::string> merged(Table& t, const std::vector<std::string>& word, MergeOrder order) {
  std::vector<int> symbols;
  for (const std::string& s : word) symbols.push_back(t.id(s));
  merge_symbols(t.merges(), order, &symbols);
  std::vector<std::string> out;
  for (int id : symbols) out.push_back(t.tokens[id]);
  return out;
}

std::vector<std::string> random_word(std::mt19937& rng, size_t length) {
  std::vector<std::string> word(length);
  for (std::string& s : word) s = std::string(1, "abc"[rng() % 3]);
  return word;
}

TEST(BpeMerge, EqualsThePublishedLoopsOnRandomTablesAndWords) {
  std::mt19937 rng(40);
  int differ = 0;  // words on which the two loops disagree (shuffled ranks only)
  for (int table = 0; table < 60; ++table) {
    const bool shuffled = table % 2 == 1;
    Table t = random_table(rng, 4 + table % 20, shuffled);
    for (int w = 0; w < 40; ++w) {
      const std::vector<std::string> word = random_word(rng, rng() % 300);
      const auto gpt2 = gpt2_loop(t, word), hf = hf_loop(t, word);
      EXPECT_EQ(merged(t, word, MergeOrder::kEveryOccurrence), gpt2) << "table " << table;
      EXPECT_EQ(merged(t, word, MergeOrder::kLowestRankFirst), hf) << "table " << table;
      if (!shuffled) {
        EXPECT_EQ(gpt2, hf) << "ranks in learned order: the loops agree";
      }
      differ += gpt2 != hf;
    }
  }
  EXPECT_GT(differ, 0) << "the shuffled tables should tell the two orders apart";
}

TEST(BpeMerge, TheOrdersDifferWhenAMergeRanksBeforeTheOneMakingItsToken) {
  // "ab a" (rank 0) ranks before "a b" (rank 1), which makes ab. On a b a b GPT-2 merges both
  // a b first (ab ab); HF merges the left one, then at once ab a (aba b).
  Table t;
  for (const char* s : {"a", "b", "ab", "aba"}) t.id(s);
  t.ranks[{"ab", "a"}] = 0;
  t.ranks[{"a", "b"}] = 1;
  const std::vector<std::string> word = {"a", "b", "a", "b"};
  EXPECT_EQ(merged(t, word, MergeOrder::kEveryOccurrence), (std::vector<std::string>{"ab", "ab"}));
  EXPECT_EQ(merged(t, word, MergeOrder::kLowestRankFirst), (std::vector<std::string>{"aba", "b"}));
}

TEST(BpeMerge, EqualRanksMergeLeftmostFirstWithoutOverlap) {
  Table t;
  for (const char* s : {"a", "aa", "aaaa"}) t.id(s);
  t.ranks[{"a", "a"}] = 0;
  t.ranks[{"aa", "aa"}] = 1;
  for (MergeOrder order : {MergeOrder::kEveryOccurrence, MergeOrder::kLowestRankFirst}) {
    EXPECT_EQ(merged(t, {"a", "a", "a"}, order), (std::vector<std::string>{"aa", "a"}));
    // A long run: the same as the published loop (aaaa x 2500 then a).
    const std::vector<std::string> word(10001, "a");
    EXPECT_EQ(merged(t, word, order), gpt2_loop(t, word));
  }
}

TEST(BpeMerge, ShortAndUnmergeableWordsAreLeftAlone) {
  Table t;
  for (const char* s : {"a", "b", "ab"}) t.id(s);
  t.ranks[{"a", "b"}] = 0;
  for (MergeOrder order : {MergeOrder::kEveryOccurrence, MergeOrder::kLowestRankFirst}) {
    EXPECT_EQ(merged(t, {}, order), (std::vector<std::string>{}));
    EXPECT_EQ(merged(t, {"a"}, order), (std::vector<std::string>{"a"}));
    EXPECT_EQ(merged(t, {"b", "a"}, order), (std::vector<std::string>{"b", "a"}));
  }
}

}  // namespace
}  // namespace trident::tokenizer
