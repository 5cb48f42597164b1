#include "train/trainer.h"

#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "generation/greedy.h"
#include "io/hf_gpt2.h"
#include "model/gather.h"
#include "model/gpt_model.h"
#include "optim/adamw.h"
#include "optim/lr_scheduler.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "train/metrics.h"
#include "train/throughput.h"
#include "train/training_data.h"

namespace trident {

long peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

using GroupCounters = std::vector<std::pair<std::string, comm::CollectiveCounters>>;

GroupCounters snapshot_counters(const distributed::ProcessGroups& g) {
  return {{g.tensor->name(), g.tensor->counters()},
          {g.data->name(), g.data->counters()},
          {g.pipeline->name(), g.pipeline->counters()}};
}

// What the training iterations sent over each group (validation excluded).
void print_collectives(const GroupCounters& groups, long iterations, std::ostream& log,
                       MetricsWriter& metrics) {
  nlohmann::ordered_json summary;
  log << "collectives of rank 0 per training iteration (calls, MiB):\n";
  for (const auto& [name, k] : groups) {
    auto row = [&](const char* op, const comm::CollectiveCounters::Entry& e) {
      if (!e.calls) return;
      log << "  " << std::left << std::setw(9) << name << std::setw(15) << op << std::right
          << std::setw(10) << std::fixed << std::setprecision(1) << (double)e.calls / iterations
          << std::setw(12) << std::setprecision(3) << e.bytes / 1048576.0 / iterations << "\n";
      summary[name][op] = {{"calls", e.calls}, {"bytes", e.bytes}};
    };
    row("all-reduce", k.all_reduce);
    row("all-gather", k.all_gather);
    row("reduce-scatter", k.reduce_scatter);
    row("broadcast", k.broadcast);
    row("send", k.send);
    row("recv", k.recv);
  }
  log.unsetf(std::ios::fixed);
  log << std::setprecision(6);
  metrics.write_json({{"collectives", summary}, {"iterations", iterations}});
}

void print_layout(const TrainingConfig& c, std::ostream& log) {
  log << "trident: world size " << c.world_size << " = tensor " << c.tensor_model_parallel_size
      << " x pipeline " << c.pipeline_model_parallel_size << " x data " << c.data_parallel_size()
      << "; " << omp_get_max_threads() << " threads per rank\n";
  log << "model: " << c.model.num_layers << " layers, hidden " << c.model.hidden_size << ", "
      << c.model.num_attention_heads << " heads, ffn " << c.model.ffn() << ", seq "
      << c.model.seq_length << ", vocab " << c.model.vocab_size << " padded to "
      << c.model.padded_vocab_size(c.tensor_model_parallel_size) << ", "
      << c.model.parameter_count(c.tensor_model_parallel_size) << " parameters\n";
  log << "batch: micro " << c.micro_batch_size << " x " << c.num_micro_batches()
      << " micro-batches x data " << c.data_parallel_size() << " = global "
      << c.effective_global_batch() << "\n";
}

void fill(const data::SampleSource& source, long first, int count, int seq,
          std::vector<int>& tokens) {
  tokens.resize((size_t)count * (seq + 1));
  for (int i = 0; i < count; ++i) source.sample(first + i, tokens.data() + (size_t)i * (seq + 1));
}

// Mean loss over `iters` global batches starting at sample `first`.
double evaluate(GPTModel& model, const data::SampleSource& source, const TrainingConfig& c,
                long first, long* tokens_out) {
  std::vector<int> tokens;
  double total = 0;
  long count = 0;
  const int b = c.micro_batch_size, s = c.model.seq_length;
  const long samples = (long)c.eval_iters * c.effective_global_batch();
  for (long i = 0; i < samples; i += b) {
    fill(source, first + i, b, s, tokens);
    total += model.forward(tokens.data(), b, s);
    count += (long)b * s;
  }
  *tokens_out = count;
  return count ? total / count : 0.0;
}

void print_generation(GPTModel& model, const TrainingConfig& c, std::ostream& log) {
  tokenizer::GPT2Tokenizer tok(c.vocab_file, c.merge_file);
  std::vector<int> ids = tok.encode(c.generate_prompt);
  if (ids.empty()) return;
  size_t prompt = ids.size();
  greedy_generate(model, ids, c.generate_tokens);
  std::vector<int> continuation(ids.begin() + (long)prompt, ids.end());
  log << "greedy continuation of \"" << c.generate_prompt << "\":\n"
      << c.generate_prompt << tok.decode(continuation) << "\n";
}

}  // namespace

int run_training(const TrainingConfig& c, const RankContext& rank, std::ostream& log) {
  if (c.threads > 0) omp_set_num_threads(c.threads);
  print_layout(c, log);
  rank.grid->print(log, rank.nodes);
  comm::Communicator& tp = *rank.groups->tensor;
  GPTModel model(c.model, tp, c.micro_batch_size, c.model.seq_length);
  if (!c.load_hf.empty()) {
    io::load_hf_weights(c.load_hf, c.model, model.parameters());
    log << "loaded weights from " << c.load_hf << "\n";
  } else {
    model.parameters().initialize(c.seed, c.model.init_method_std, c.model.num_layers);
  }
  AdamW optimizer(c.adam, model.parameters().size());
  model.memory_plan().print(log);

  const int padded_vocab = model.padded_vocab(), seq = c.model.seq_length;
  const int global_batch = c.effective_global_batch(), micro = c.micro_batch_size;
  const double flops = training_flops_per_iteration(c.model, global_batch, seq, padded_vocab);
  double peak = c.peak_tflops;
  if (peak <= 0) {
    peak = measure_gemm_peak_tflops(micro * seq, 4 * c.model.hidden_size, c.model.hidden_size, 0.5);
    log << "measured fp32 GEMM peak: " << std::fixed << std::setprecision(3) << peak << " TFLOP/s ("
        << micro * seq << "x" << c.model.hidden_size << " * " << c.model.hidden_size << "x"
        << 4 * c.model.hidden_size << ")\n";
    log.unsetf(std::ios::fixed);
  }

  LrSchedule schedule{c.lr, c.min_lr, c.lr_warmup_iters, c.effective_decay_iters(),
                      parse_decay_style(c.lr_decay_style)};
  TrainingData data = make_training_data(c, log);
  MetricsWriter metrics(rank.world_rank == 0 ? c.metrics_file : "");
  std::vector<int> tokens;
  const float grad_scale = 1.f / ((float)global_batch * seq);  // mean over the global batch
  long consumed = 0;
  double interval_loss = 0, interval_time = 0, interval_norm = 0;
  int interval_count = 0;
  long evaluations = 0;
  // What evaluations send is not training traffic: it is subtracted from the totals.
  GroupCounters eval_counters = snapshot_counters(*rank.groups);
  for (auto& entry : eval_counters) entry.second = {};
  auto run_validation = [&](long iteration) {
    if (c.eval_iters == 0 || !data.valid) return;
    GroupCounters before = snapshot_counters(*rank.groups);
    long n = 0, first = evaluations++ * (long)c.eval_iters * global_batch;
    double loss = evaluate(model, *data.valid, c, first, &n);
    ValidationStats v{iteration, consumed, loss, n};
    log << format_validation_line(v) << "\n";
    metrics.write(v);
    GroupCounters after = snapshot_counters(*rank.groups);
    for (size_t i = 0; i < after.size(); ++i)
      eval_counters[i].second += (after[i].second -= before[i].second);
  };

  for (long it = 1; it <= c.train_iters; ++it) {
    if (it == c.inject_fault_iteration && rank.world_rank == c.inject_fault_rank)
      throw std::runtime_error("injected fault at iteration " + std::to_string(it));
    auto start = std::chrono::steady_clock::now();
    model.parameters().zero_grads();
    double loss_sum = 0;
    for (int m = 0; m < c.num_micro_batches(); ++m) {
      fill(*data.train, consumed + (long)m * micro, micro, seq, tokens);
      loss_sum += model.forward_backward(tokens.data(), micro, seq, grad_scale);
    }
    float lr = schedule.at(it - 1);
    double norm = optimizer.step(model.parameters(), lr, tp);
    consumed += global_batch;
    double elapsed = seconds_since(start);
    interval_loss += loss_sum / ((double)global_batch * seq);
    interval_time += elapsed;
    interval_norm += norm;
    ++interval_count;
    if (!std::isfinite(loss_sum)) {
      log << "error: loss is not finite at iteration " << it << "\n";
      return 3;
    }
    if (it % c.log_interval == 0 || it == c.train_iters) {
      double per_iter = interval_time / interval_count;
      IterationStats s;
      s.iteration = it, s.train_iters = c.train_iters, s.consumed_samples = consumed;
      s.ms_per_iter = per_iter * 1e3, s.lr = lr, s.global_batch = global_batch;
      s.loss = interval_loss / interval_count, s.grad_norm = interval_norm / interval_count;
      s.tokens_per_s = (double)global_batch * seq / per_iter;
      s.tflops = flops / per_iter / 1e12, s.mfu = s.tflops / peak;
      log << format_log_line(s) << "\n" << std::flush;
      metrics.write(s);
      interval_loss = interval_time = interval_norm = 0;
      interval_count = 0;
    }
    if (c.eval_interval > 0 && it % c.eval_interval == 0 && it != c.train_iters) run_validation(it);
  }
  GroupCounters training_counters = snapshot_counters(*rank.groups);
  for (size_t i = 0; i < training_counters.size(); ++i)
    training_counters[i].second -= eval_counters[i].second;
  run_validation(c.train_iters);
  if (c.eval_iters > 0 && data.test) {
    long n = 0;
    double loss = evaluate(model, *data.test, c, 0, &n);
    log << " test loss at the end | lm loss value: " << std::scientific << loss
        << " | lm loss PPL: " << std::exp(loss) << " |\n";
    log.unsetf(std::ios::scientific);
  }
  if (!c.generate_prompt.empty()) print_generation(model, c, log);
  if (!c.save_hf.empty()) {
    Parameters whole = gather_to_single_rank(model.parameters(), c.model, tp);
    if (rank.world_rank == 0) io::save_hf_model(c.save_hf, c.model, whole);
    log << "saved HuggingFace GPT-2 model to " << c.save_hf << "\n";
  }
  print_collectives(training_counters, c.train_iters, log, metrics);
  if (tp.size() > 1)
    log << "replicated parameters across tensor-parallel ranks: max |difference| "
        << replicated_parameter_drift(model.parameters(), tp) << "\n";
  log << "peak RSS " << format_bytes(peak_rss_bytes())
      << " (plan: " << format_bytes(model.memory_plan().total_bytes()) << ")\n";
  return 0;
}

}  // namespace trident
