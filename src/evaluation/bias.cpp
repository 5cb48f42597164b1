#include "evaluation/bias.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace trident::evaluation {

namespace {

std::string fill(const std::string& tmpl, const std::string& occupation) {
  std::string out = tmpl;
  out.replace(out.find("{occupation}"), 12, occupation);
  return out;
}

// log(sum exp(x)) over x[begin, end), shifted by the largest so no term underflows to 0.
double log_sum_exp(const std::vector<double>& x, size_t begin, size_t end) {
  double top = -INFINITY;
  for (size_t i = begin; i < end; ++i) top = std::max(top, x[i]);
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += std::exp(x[i] - top);
  return top + std::log(sum);
}

double average(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return x.empty() ? 0 : s / x.size();
}

// The adjectives of a group, most frequent first (ties: list order), zero counts left out.
std::vector<std::pair<std::string, long>> top_of(const BiasInputs& in, const GroupWords& g,
                                                 int top) {
  std::vector<std::pair<std::string, long>> out;
  for (size_t a = 0; a < in.adjectives.size(); ++a)
    if (g.adjective_counts[a] > 0) out.push_back({in.adjectives[a], g.adjective_counts[a]});
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  if ((int)out.size() > top) out.resize(top);
  return out;
}

// Per group, per adjective: count / mean count over its category's groups (NaN: mean 0).
std::vector<std::vector<double>> over_representation(const BiasInputs& in,
                                                     const std::vector<GroupWords>& groups) {
  std::vector<std::vector<double>> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t a = 0; a < in.adjectives.size(); ++a) {
      double sum = 0, n = 0;
      for (const GroupWords& h : groups)
        if (h.category == groups[g].category) sum += h.adjective_counts[a], n += 1;
      out[g].push_back(sum > 0 ? groups[g].adjective_counts[a] / (sum / n) : NAN);
    }
  return out;
}

nlohmann::ordered_json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json occupation_json(const BiasInputs& in, const OccupationResult& r) {
  nlohmann::ordered_json per_template = nlohmann::ordered_json::array(), per_occupation;
  for (size_t t = 0; t < in.templates.size(); ++t)
    per_template.push_back({{"template", in.templates[t]},
                            {"mean_log_ratio", r.template_mean[t]},
                            {"male_share", r.template_male_share[t]}});
  for (const OccupationBias& o : r.occupations)
    per_occupation[o.occupation] = {{"log_ratio", o.log_ratio}, {"mean_log_ratio", o.mean}};
  return {{"female_identifiers", in.female}, {"male_identifiers", in.male},
          {"average_bias", r.average_bias},  {"male_share", r.male_share},
          {"templates", per_template},       {"occupations", per_occupation}};
}

}  // namespace

std::vector<std::vector<ContextRequest>> occupation_requests(const BiasInputs& in) {
  std::vector<std::vector<ContextRequest>> out;
  for (const std::string& o : in.occupations)
    for (const std::string& t : in.templates) {
      std::vector<ContextRequest> group;
      for (const auto* list : {&in.female, &in.male})
        for (const std::string& w : *list) group.push_back({fill(t, o), " " + w});
      out.push_back(std::move(group));
    }
  return out;
}

OccupationResult occupation_bias(const BiasInputs& in,
                                 const std::vector<std::vector<double>>& logprobs) {
  const size_t nt = in.templates.size(), nf = in.female.size(), nm = in.male.size();
  if (logprobs.size() != in.occupations.size() * nt)
    throw std::logic_error("occupation_bias: one group of scores per occupation and template");
  OccupationResult r;
  r.template_mean.assign(nt, 0);
  r.template_male_share.assign(nt, 0);
  std::vector<double> means;
  for (size_t o = 0; o < in.occupations.size(); ++o) {
    OccupationBias b{in.occupations[o], {}, 0};
    for (size_t t = 0; t < nt; ++t) {
      const std::vector<double>& ll = logprobs[o * nt + t];
      const double ratio = log_sum_exp(ll, 0, nf) - log_sum_exp(ll, nf, nf + nm);
      b.log_ratio.push_back(ratio);
      r.template_mean[t] += ratio / in.occupations.size();
      r.template_male_share[t] += (ratio < 0 ? 1.0 : 0.0) / in.occupations.size();
    }
    b.mean = average(b.log_ratio);
    r.male_share += (b.mean < 0 ? 1.0 : 0.0) / in.occupations.size();
    means.push_back(b.mean);
    r.occupations.push_back(std::move(b));
  }
  r.average_bias = average(means);
  return r;
}

std::vector<GroupWords> group_words(const BiasInputs& in, const std::vector<PromptSamples>& s) {
  std::map<std::string, size_t> adjective, at;
  std::map<std::string, double> lexicon;
  for (size_t a = 0; a < in.adjectives.size(); ++a) adjective[in.adjectives[a]] = a;
  for (const LexiconEntry& e : in.lexicon) lexicon[e.word] = e.score;
  std::vector<GroupWords> out;
  std::vector<double> score_sum;
  for (const PromptSamples& p : s) {
    const std::string key = p.prompt.category + "\t" + p.prompt.group;
    if (!at.count(key)) {
      at[key] = out.size();
      out.push_back({p.prompt.category, p.prompt.group, 0, 0, 0,
                     std::vector<long>(in.adjectives.size(), 0), 0});
      score_sum.push_back(0);
    }
    GroupWords& g = out[at[key]];
    for (const std::string& text : p.continuations) {
      g.samples += 1;
      for (const std::string& w : bias_words(text)) {
        g.words += 1;
        if (auto a = adjective.find(w); a != adjective.end()) g.adjective_counts[a->second] += 1;
        if (auto l = lexicon.find(w); l != lexicon.end())
          g.scored_words += 1, score_sum[at[key]] += l->second;
      }
    }
  }
  for (size_t g = 0; g < out.size(); ++g)
    out[g].sentiment = out[g].words ? score_sum[g] / out[g].words : 0;
  return out;
}

nlohmann::ordered_json bias_json(const BiasInputs& in, const OccupationResult& occupation,
                                 const std::vector<GroupWords>& groups, int top_adjectives) {
  const std::vector<std::vector<double>> over = over_representation(in, groups);
  nlohmann::ordered_json co = nlohmann::ordered_json::object(),
                         sentiment = nlohmann::ordered_json::object();
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupWords& w = groups[g];
    nlohmann::ordered_json counts = nlohmann::ordered_json::object(),
                           ratio = nlohmann::ordered_json::object(),
                           top = nlohmann::ordered_json::array();
    for (size_t a = 0; a < in.adjectives.size(); ++a) {
      counts[in.adjectives[a]] = w.adjective_counts[a];
      ratio[in.adjectives[a]] = number_or_null(over[g][a]);
    }
    for (const auto& [adj, n] : top_of(in, w, top_adjectives)) top.push_back({adj, n});
    co[w.category][w.group] = {{"samples", w.samples},
                               {"words", w.words},
                               {"top_adjectives", top},
                               {"counts", counts},
                               {"over_representation", ratio}};
    sentiment[w.category][w.group] = {
        {"mean", w.sentiment}, {"words", w.words}, {"scored_words", w.scored_words}};
  }
  return {{"occupation", occupation_json(in, occupation)},
          {"cooccurrence", co},
          {"sentiment", sentiment}};
}

std::string bias_table(const BiasInputs& in, const OccupationResult& occupation,
                       const std::vector<GroupWords>& groups, int top_adjectives) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line,
                "Gender and occupation: average bias %.4f (mean log P_f/P_m), %.1f%% of %zu "
                "occupations lean male\n",
                occupation.average_bias, 100 * occupation.male_share, in.occupations.size());
  out << line << "| Template | mean log(P_f/P_m) | leaning male |\n|---|---:|---:|\n";
  for (size_t t = 0; t < in.templates.size(); ++t) {
    std::snprintf(line, sizeof line, "| %s | %.4f | %.1f%% |\n", in.templates[t].c_str(),
                  occupation.template_mean[t], 100 * occupation.template_male_share[t]);
    out << line;
  }
  out << "\nCo-occurrence and sentiment\n"
      << "| Category | Group | Samples | Sentiment | Top adjectives (count) |\n"
      << "|---|---|---:|---:|---|\n";
  for (const GroupWords& g : groups) {
    std::string top;
    for (const auto& [adj, n] : top_of(in, g, top_adjectives))
      top += (top.empty() ? "" : ", ") + adj + " (" + std::to_string(n) + ")";
    std::snprintf(line, sizeof line, "| %s | %s | %ld | %.4f | %s |\n", g.category.c_str(),
                  g.group.c_str(), g.samples, g.sentiment, top.c_str());
    out << line;
  }
  return out.str();
}

}  // namespace trident::evaluation
