#include "generation/generator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "tokenizer/gpt2_tokenizer.h"  // kEndOfText, sanitize_utf8

namespace trident::generation {

struct Generator::Sequence {
  long id = 0;
  GenerationRequest request;
  Callback on_event;
  int slot = 0;
  std::vector<int> tokens;  // prompt, then every generated token
  int cached = 0;           // positions of tokens already in the KV cache
  GenerationResult result;
  std::string bytes;   // the generated text's raw bytes
  size_t emitted = 0;  // bytes of it already sent in events
  bool cancelled = false, finished = false;
  bool prefilling() const { return cached < (int)request.prompt.size(); }
};

std::string validate(const GenerationRequest& r, const InferenceModel& model) {
  const std::string sampling = validate(r.sampling);
  if (!sampling.empty()) return sampling;
  if (r.prompt.empty()) return "the prompt is empty (it needs at least one token)";
  for (int id : r.prompt)
    if (id < 0 || id >= model.vocab())
      return "prompt token " + std::to_string(id) + " is outside the vocabulary [0, " +
             std::to_string(model.vocab()) + ")";
  if (r.tokens_to_generate < 0) return "tokens_to_generate must be >= 0";
  if (r.top_logprobs < 0 || r.top_logprobs > 20) return "top_logprobs must be in [0, 20]";
  const long total = (long)r.prompt.size() + r.tokens_to_generate;
  if (total > model.max_sequence())
    return "prompt (" + std::to_string(r.prompt.size()) + " tokens) + tokens_to_generate (" +
           std::to_string(r.tokens_to_generate) + ") exceeds the maximum sequence length " +
           std::to_string(model.max_sequence());
  for (const std::string& s : r.stop)
    if (s.empty()) return "stop strings must not be empty";
  return "";
}

Generator::Generator(InferenceModel& model, const tokenizer::Tokenizer* tokenizer)
    : model_(model),
      tokenizer_(tokenizer),
      slot_used_(model.max_batch(), false),
      scratch_(2L * model.vocab()) {}

Generator::~Generator() = default;

int Generator::free_slots() const {
  return (int)std::count(slot_used_.begin(), slot_used_.end(), false);
}

int Generator::running() const {
  return (int)running_.size();
}

long Generator::add(GenerationRequest r, Callback on_event) {
  const std::string why = validate(r, model_);
  if (!why.empty()) throw std::invalid_argument(why);
  auto slot = std::find(slot_used_.begin(), slot_used_.end(), false);
  if (slot == slot_used_.end()) throw std::logic_error("Generator::add with no free slot");
  *slot = true;
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->slot = (int)(slot - slot_used_.begin());
  s->tokens = r.prompt;
  s->result.prompt = r.prompt;
  s->request = std::move(r);
  s->on_event = std::move(on_event);
  running_.push_back(std::move(s));
  return running_.back()->id;
}

void Generator::cancel(long request) {
  for (auto& s : running_)
    if (s->id == request) s->cancelled = true;
}

bool Generator::take_result(long request, GenerationResult* out) {
  for (auto it = done_.begin(); it != done_.end(); ++it)
    if (it->first == request) {
      *out = std::move(it->second);
      done_.erase(it);
      return true;
    }
  return false;
}

// Decode rows first (one per running request), then prompts in the order they joined, as
// much of each as the step's remaining budget allows.
std::vector<Segment> Generator::plan_step() {
  std::vector<Segment> segments;
  int budget = model_.max_step_tokens();
  for (auto& s : running_)
    if (!s->prefilling()) {
      segments.push_back({s->slot, s->cached, {s->tokens.back()}, 1});
      --budget;
    }
  for (auto& s : running_) {
    if (!s->prefilling() || budget <= 0) continue;
    const int prompt = (int)s->request.prompt.size();
    const int n = std::min(prompt - s->cached, budget);
    const bool completes = s->cached + n == prompt;
    Segment seg{s->slot,
                s->cached,
                {s->tokens.begin() + s->cached, s->tokens.begin() + s->cached + n},
                completes ? 1 : 0};
    if (s->request.logprobs) seg.logit_rows = n;
    segments.push_back(std::move(seg));
    budget -= n;
  }
  return segments;
}

void Generator::step() {
  for (auto& s : running_)
    if (s->cancelled && !s->finished) finish(*s, "cancelled");
  retire_finished();
  std::vector<Segment> segments = plan_step();
  if (segments.empty()) return;
  const auto started = std::chrono::steady_clock::now();
  const float* logits = model_.step(segments);
  count_step(segments,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  const int vocab = model_.vocab();
  for (const Segment& seg : segments) {
    for (auto& s : running_)
      if (s->slot == seg.slot && !s->finished) take_logits(*s, seg, logits);
    logits += (long)seg.logit_rows * vocab;
  }
  retire_finished();
}

void Generator::count_step(const std::vector<Segment>& segments, double seconds) {
  long prefill = 0, decode = 0;
  for (const Segment& s : segments) {
    const bool decoding = s.tokens.size() == 1 && s.start > 0 && s.logit_rows == 1 &&
                          std::none_of(running_.begin(), running_.end(), [&](const auto& r) {
                            return r->slot == s.slot && r->prefilling();
                          });
    (decoding ? decode : prefill) += (long)s.tokens.size();
  }
  ++stats_.steps;
  if (decode == 0)
    stats_.prefill_tokens += prefill, stats_.prefill_seconds += seconds;
  else if (prefill == 0)
    stats_.decode_tokens += decode, stats_.decode_seconds += seconds;
  else
    stats_.mixed_tokens += prefill + decode, stats_.mixed_seconds += seconds;
}

void Generator::take_logits(Sequence& s, const Segment& seg, const float* logits) {
  const int vocab = model_.vocab(), prompt = (int)s.request.prompt.size();
  const int n = (int)seg.tokens.size();
  const bool was_prefill = seg.start < prompt;
  s.cached += n;
  // Rows of a prompt chunk score the prompt's next tokens (all rows but the last one of a
  // completed prompt, which predicts the first new token).
  if (was_prefill && s.request.logprobs)
    for (int i = 0; i < seg.logit_rows; ++i) {
      const int target = seg.start + (n - seg.logit_rows) + i + 1;
      if (target < prompt)
        s.result.prompt_logprobs.push_back(
            token_logprob(logits + (long)i * vocab, vocab, s.request.prompt[target]));
    }
  if (s.prefilling()) return;
  const float* last = logits + (long)(seg.logit_rows - 1) * vocab;
  if ((int)s.result.tokens.size() >= s.request.tokens_to_generate) return finish(s, "length");
  const SampledToken t =
      sample_token(last, vocab, s.request.sampling, (std::uint64_t)s.tokens.size(), scratch_.data(),
                   s.request.logprobs);
  TopLogprobs top;
  if (s.request.logprobs && s.request.top_logprobs > 0)
    top = top_logprobs(last, vocab, s.request.top_logprobs);
  append_token(s, t.id, t.logprob, std::move(top));
}

void Generator::append_token(Sequence& s, int id, float logprob, TopLogprobs top) {
  const GenerationRequest& r = s.request;
  if (r.stop_on_eod && tokenizer_ && id == tokenizer_->eod()) return finish(s, "eod");
  if (r.stop_on_eod && !tokenizer_ && id == tokenizer::GPT2Tokenizer::kEndOfText)
    return finish(s, "eod");
  s.tokens.push_back(id);
  s.result.tokens.push_back(id);
  if (r.logprobs) s.result.logprobs.push_back(logprob);
  if (r.logprobs && r.top_logprobs > 0) s.result.top_logprobs.push_back(top);
  std::string piece = tokenizer_ ? tokenizer_->decode_bytes({id}) : std::string();
  s.bytes += piece;
  // A stop string ends the text where it begins; it may span several tokens.
  for (const std::string& stop : r.stop) {
    const size_t from = s.bytes.size() >= piece.size() + stop.size() - 1
                            ? s.bytes.size() - piece.size() - stop.size() + 1
                            : 0;
    const size_t at = s.bytes.find(stop, from);
    if (at != std::string::npos) {
      s.bytes.resize(at);
      emit(s, id, logprob, top);
      return finish(s, "stop");
    }
  }
  emit(s, id, logprob, top);
  if (r.stop_on_eol && piece.find('\n') != std::string::npos) return finish(s, "stop");
  if ((int)s.result.tokens.size() >= r.tokens_to_generate) return finish(s, "length");
  if ((int)s.tokens.size() >= model_.max_sequence()) return finish(s, "length");
}

namespace {

// The end of the longest prefix of b that does not stop inside a multi-byte character.
size_t complete_utf8_end(const std::string& b) {
  const size_t end = b.size();
  for (size_t back = 1; back <= 3 && back <= end; ++back) {
    const unsigned char c = (unsigned char)b[end - back];
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? end - back : end;
  }
  return end;
}

}  // namespace

void Generator::emit(Sequence& s, int token, float logprob, const TopLogprobs& top) {
  if (!s.on_event) return;
  // Bytes that may still turn out to begin a stop string are held back until they cannot.
  size_t hold = 0;
  for (const std::string& stop : s.request.stop) hold = std::max(hold, stop.size() - 1);
  size_t end = complete_utf8_end(s.bytes);
  end = end > s.emitted + hold ? end - hold : s.emitted;
  TokenEvent e;
  e.request = s.id;
  e.token = token;
  e.logprob = s.request.logprobs ? logprob : NAN;
  e.top_logprobs = top;
  if (end > s.emitted) {
    e.text = tokenizer::sanitize_utf8(std::string_view(s.bytes).substr(s.emitted, end - s.emitted));
    s.emitted = end;
  }
  s.on_event(e);
}

void Generator::finish(Sequence& s, const std::string& reason) {
  if (s.finished) return;
  s.finished = true;
  s.result.finish_reason = reason;
  s.result.text = tokenizer::sanitize_utf8(s.bytes);
  if (!s.on_event) return;
  TokenEvent e;
  e.request = s.id;
  e.finished = true;
  e.finish_reason = reason;
  if (s.bytes.size() > s.emitted) e.text = tokenizer::sanitize_utf8(s.bytes.substr(s.emitted));
  s.emitted = s.bytes.size();
  s.on_event(e);
}

void Generator::retire_finished() {
  for (auto it = running_.begin(); it != running_.end();) {
    if (!(*it)->finished) {
      ++it;
      continue;
    }
    slot_used_[(*it)->slot] = false;
    done_.emplace_back((*it)->id, std::move((*it)->result));
    it = running_.erase(it);
  }
}

std::vector<GenerationResult> generate_all(Generator& g, const std::vector<GenerationRequest>& rs) {
  std::vector<long> ids;
  size_t next = 0;
  while (next < rs.size() || !g.idle()) {
    while (next < rs.size() && g.free_slots() > 0) ids.push_back(g.add(rs[next++]));
    g.step();
  }
  std::vector<GenerationResult> out(rs.size());
  for (size_t i = 0; i < rs.size(); ++i)
    if (!g.take_result(ids[i], &out[i]))
      throw std::logic_error("generate_all: a request ended without a result");
  return out;
}

}  // namespace trident::generation
