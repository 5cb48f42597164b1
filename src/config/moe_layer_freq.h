#pragma once
// --moe-layer-freq as Megatron reads it (training/arguments.py, moe_freq_type): an integer N
// makes layer i (0-based) MoE iff i % N == 0; a Python list expression such as
// "([1]*3+[0]*1)*3" or "[1,0,1,0]" gives each layer's kind (1: MoE, 0: dense), one entry per
// layer. Megatron hands the expression to Python's eval after checking its characters; here
// the same little language (integers, list literals, + and *, parentheses) is evaluated by
// a parser of its own, so nothing else can be expressed.
#include <string>
#include <vector>

namespace trident {

// The list the expression evaluates to, as Python would give it (entries unchecked).
// Throws std::invalid_argument naming the flag, the text and what is wrong.
std::vector<long> evaluate_moe_layer_pattern(const std::string& text);

// The MoE layers of a model of `num_layers` layers under --moe-layer-freq `text`: an integer
// N >= 1, or a list expression of num_layers entries, each 0 or 1. Throws
// std::invalid_argument naming the flag and the rule broken.
std::vector<bool> resolve_moe_layer_freq(const std::string& text, int num_layers);

}  // namespace trident
