#include "cli/plan_command.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cli/lora_args.h"
#include "cli/moe_args.h"
#include "cli/mpi_job.h"
#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "cli/train_args.h"
#include "context_parallel/rules.h"
#include "core/files.h"
#include "data_parallel/sharding_strategy.h"
#include "planner/calibrate.h"
#include "planner/launch.h"
#include "planner/report.h"
#include "planner/search.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

namespace {

struct PlanArgs {
  std::string cluster;
  planner::Workload workload;
  planner::SearchOptions search;
  std::string recompute;  // --recompute-granularity: fixes it when given
  bool use_distributed_optimizer = false, no_distributed_optimizer = false;  // else searched
  std::string sharding_strategy;  // --data-parallel-sharding-strategy: fixes it when given
  bool sequence_parallel = false, no_sequence_parallel = false;  // else searched
  std::string pipeline_schedule;  // zb-h1 fixes the zero-bubble schedule; 1f1b excludes it
  std::string cp_comm_type = "p2p";
  bool bf16 = false, fp16 = false;
  double train_tokens = 0;
  bool json = false, launch = false;
  bool calibrate = false;
  bool calibration_quick = false;  // short, noisy timings (smoke tests)
  std::string output;
  size_t top = 10;
  std::vector<std::string> train_args;  // after `--`, for --launch
};

void add_plan_flags(CLI::App& app, PlanArgs& a) {
  app.add_option("--cluster", a.cluster, "cluster description (TOML; see clusters/)")
      ->group("Cluster");
  app.add_option("--num-devices", a.search.num_devices, "devices to plan for (default: all)")
      ->group("Cluster");
  app.add_option("--global-batch-size", a.workload.global_batch, "B")->group("Batch");
  app.add_option("--tensor-model-parallel-size", a.search.tensor, "fix t")->group("Layout");
  app.add_option("--pipeline-model-parallel-size", a.search.pipeline, "fix p")->group("Layout");
  app.add_option("--micro-batch-size", a.search.micro_batch, "fix b")->group("Layout");
  app.add_option("--expert-model-parallel-size", a.search.expert,
                 "fix EP (MoE; default: searched over the divisors of d that divide the experts)")
      ->group("Layout");
  app.add_option("--context-parallel-size", a.search.context,
                 "fix c, the ranks each sequence is split over (default: searched from seq " +
                     std::to_string(planner::kContextSearchSeq) +
                     ", or when nothing fits without it)")
      ->group("Layout");
  app.add_option("--cp-comm-type", a.cp_comm_type,
                 "how attention reaches the other cp ranks' keys and values: p2p (ring), a2a "
                 "(heads / c), allgather")
      ->check(CLI::IsMember({"p2p", "a2a", "allgather"}))
      ->capture_default_str()
      ->group("Layout");
  app.add_option("--num-layers-per-virtual-pipeline-stage", a.search.layers_per_virtual_stage,
                 "fix the layers per model chunk (v = layers / (p x this))")
      ->group("Layout");
  app.add_option("--recompute-granularity", a.recompute,
                 "fix recomputation: full, selective, or none (planner only: no recomputation)")
      ->check(CLI::IsMember({"full", "selective", "none"}))
      ->group("Layout");
  app.add_flag("--use-distributed-optimizer", a.use_distributed_optimizer,
               "fix the distributed optimizer on")
      ->group("Layout");
  app.add_flag("--no-distributed-optimizer", a.no_distributed_optimizer,
               "fix it off (planner only)")
      ->group("Layout");
  app.add_option("--data-parallel-sharding-strategy", a.sharding_strategy,
                 "fix what the data-parallel ranks shard: no_shard, optim (ZeRO-1), optim_grads "
                 "(ZeRO-2), or optim_grads_params (ZeRO-3); default: all four searched where "
                 "d > 1")
      ->check(CLI::IsMember({"no_shard", "optim", "optim_grads", "optim_grads_params"}))
      ->group("Layout");
  app.add_flag("--sequence-parallel", a.sequence_parallel, "fix sequence parallelism on (t > 1)")
      ->group("Layout");
  app.add_flag("--no-sequence-parallel", a.no_sequence_parallel, "fix it off (planner only)")
      ->group("Layout");
  app.add_option("--pipeline-schedule", a.pipeline_schedule,
                 "zb-h1: fix the zero-bubble schedule (p > 1, v = 1); 1f1b or interleaved: leave "
                 "it out (default: searched)")
      ->check(CLI::IsMember({"1f1b", "interleaved", "zb-h1"}))
      ->group("Layout");
  app.add_option("--max-micro-batch-size", a.search.max_micro_batch, "largest b searched")
      ->capture_default_str()
      ->group("Layout");
  app.add_flag("--bf16", a.bf16, "bf16 training (the cluster's peak is of this precision)")
      ->group("Precision");
  app.add_flag("--fp16", a.fp16, "fp16 training")->group("Precision");
  app.add_option("--train-tokens", a.train_tokens, "estimate the time to train this many tokens")
      ->group("Output");
  app.add_flag("--json", a.json, "print the ranked plans as JSON")->group("Output");
  app.add_option("--top", a.top, "plans shown")->capture_default_str()->group("Output");
  app.add_flag("--launch", a.launch,
               "run the best plan here: mpirun (srun under Slurm) trident train with its flags; "
               "flags after -- go to trident train")
      ->group("Output");
  app.add_flag("--calibrate", a.calibrate,
               "measure this machine (run under mpirun, one rank per device) and write the "
               "cluster description to --output")
      ->group("Calibration");
  app.add_option("--output", a.output, "where --calibrate writes (TOML)")->group("Calibration");
  app.add_flag("--calibration-quick", a.calibration_quick,
               "time each point briefly on small shapes (a smoke test; the figures are noisy)")
      ->group("Calibration");
}

kernels::Precision precision_of(const PlanArgs& a) {
  return a.bf16   ? kernels::Precision::kBf16
         : a.fp16 ? kernels::Precision::kFp16
                  : kernels::Precision::kFp32;
}

// The node of each rank as an index (the order nodes first appear in), and the ranks per node.
std::vector<int> node_indices(const std::vector<std::string>& nodes, int* per_node) {
  std::vector<std::string> seen;
  std::vector<int> index;
  for (const std::string& n : nodes) {
    auto it = std::find(seen.begin(), seen.end(), n);
    index.push_back((int)(it - seen.begin()));
    if (it == seen.end()) seen.push_back(n);
  }
  *per_node = (int)std::count(index.begin(), index.end(), 0);
  for (size_t k = 0; k < seen.size(); ++k)
    if (std::count(index.begin(), index.end(), (int)k) != *per_node)
      throw std::invalid_argument(
          "--calibrate needs the same number of ranks on every node (" + seen[0] + " has " +
          std::to_string(*per_node) + ", " + seen[k] + " has " +
          std::to_string(std::count(index.begin(), index.end(), (int)k)) + ")");
  return index;
}

int run_calibration(const PlanArgs& a) {
  comm::MpiRuntime mpi(nullptr, nullptr);
  return run_job(mpi, "trident plan --calibrate", [&] {
    const std::vector<std::string> nodes = mpi.node_names();
    omp_set_num_threads(default_threads(nodes, mpi.world_rank()));
    int per_node = 0;
    const std::vector<int> node = node_indices(nodes, &per_node);
    const int me = mpi.world_rank();
    // This rank's node, and the first rank of every node (MPI_COMM_NULL elsewhere).
    MPI_Comm node_comm, leader_comm;
    MPI_Comm_split(MPI_COMM_WORLD, node[me], me, &node_comm);
    const bool leader = std::find(node.begin(), node.end(), node[me]) - node.begin() == me;
    MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, me, &leader_comm);
    comm::MpiCommunicator world(MPI_COMM_WORLD, "world"), on_node(node_comm, "node");
    std::unique_ptr<comm::MpiCommunicator> leaders;
    if (leader) leaders = std::make_unique<comm::MpiCommunicator>(leader_comm, "leaders");
    const int node_count = *std::max_element(node.begin(), node.end()) + 1;
    planner::NodeGroups groups;
    if (node_count > 1) groups = {&on_node, leaders.get(), node_count};
    planner::CalibrationOptions o;
    o.precision = precision_of(a);
    o.ranks_on_node = per_node;
    if (a.calibration_quick) {
      o.seconds_per_point = 0.005, o.bandwidth_seconds = 0.05, o.repeats = 1;
      o.long_sequence = 512, o.vocabulary = 4096;
    }
    std::ostringstream discard;
    std::ostream& log = me == 0 ? std::cout : discard;
    planner::Cluster c = planner::calibrate_this_machine(world, o, log, groups);
    if (me == 0) {
      write_file_atomically(
          a.output, "# This machine, measured by `trident plan --calibrate` (" +
                        std::to_string(mpi.world_size()) + " ranks, one per device" +
                        (node_count > 1 ? ", on " + std::to_string(node_count) + " nodes" : "") +
                        ").\n" + planner::cluster_to_toml(c));
      log << "wrote " << a.output << "\n";
    }
    return 0;
  });
}

// --data-parallel-sharding-strategy against the distributed-optimizer switches.
std::vector<std::string> sharding_flag_errors(const PlanArgs& a) {
  std::vector<std::string> errors;
  if (a.use_distributed_optimizer && a.no_distributed_optimizer)
    errors.push_back(
        "--use-distributed-optimizer and --no-distributed-optimizer exclude each other");
  const std::string& s = a.sharding_strategy;
  if (s.empty()) return errors;
  if (a.use_distributed_optimizer && s == "no_shard")
    errors.push_back(
        "--use-distributed-optimizer shards the optimizer (optim); it cannot be combined with "
        "--data-parallel-sharding-strategy no_shard");
  if (a.no_distributed_optimizer && s != "no_shard")
    errors.push_back(
        "--no-distributed-optimizer leaves the optimizer whole; it cannot be "
        "combined with --data-parallel-sharding-strategy " +
        s + ", which shards it");
  return errors;
}

// Splits `trident plan ... -- <trident train flags>`.
std::vector<std::string> split_train_args(std::vector<std::string> args, PlanArgs& a) {
  auto dash = std::find(args.begin(), args.end(), "--");
  if (dash != args.end()) {
    a.train_args.assign(dash + 1, args.end());
    args.erase(dash, args.end());
  }
  return args;
}

int run_plan(PlanArgs& a) {
  planner::Cluster cluster = planner::load_cluster(a.cluster);
  // Inside a Slurm allocation, --launch runs on its tasks.
  const char* tasks = std::getenv("SLURM_NTASKS");
  if (a.search.num_devices == 0 && a.launch && tasks) a.search.num_devices = std::atol(tasks);
  if (a.search.num_devices == 0) a.search.num_devices = cluster.num_devices();
  if (!a.recompute.empty())
    a.search.recompute = a.recompute == "full"        ? planner::Recompute::kFull
                         : a.recompute == "selective" ? planner::Recompute::kSelective
                                                      : planner::Recompute::kNone;
  if (a.use_distributed_optimizer) a.search.sharding = data_parallel::ShardingStrategy::kOptim;
  if (a.no_distributed_optimizer) a.search.sharding = data_parallel::ShardingStrategy::kNoShard;
  if (!a.sharding_strategy.empty())
    a.search.sharding = data_parallel::parse_sharding_strategy(a.sharding_strategy);
  if (a.sequence_parallel) a.search.sequence_parallel = true;
  if (a.no_sequence_parallel) a.search.sequence_parallel = false;
  if (!a.pipeline_schedule.empty()) a.search.zero_bubble = a.pipeline_schedule == "zb-h1";
  a.search.cp_comm_type = *context_parallel::parse_cp_comm_type(a.cp_comm_type);
  a.workload.precision = precision_of(a);
  planner::IterationModel model(cluster, a.workload);
  std::vector<std::string> errors = planner::request_violations(model, a.search);
  if (!errors.empty()) {
    std::cerr << "trident plan: " << errors.size() << " invalid argument"
              << (errors.size() > 1 ? "s" : "") << ":\n";
    for (const std::string& e : errors) std::cerr << "  - " << e << "\n";
    return 2;
  }
  planner::SearchResult result = planner::search_layouts(model, a.search);
  if (result.fitting.empty()) {
    std::cerr << "trident plan: " << planner::explain_no_fit(model, a.search, result) << "\n";
    return 1;
  }
  if (a.json) {
    std::cout << planner::plans_json(result.fitting, a.top) << "\n";
  } else {
    std::cout << "trident plan: " << a.workload.model.num_layers << " layers, hidden "
              << a.workload.model.hidden_size << ", " << a.workload.model.num_attention_heads
              << " heads, seq " << a.workload.model.seq_length << ", global batch "
              << a.workload.global_batch << " on " << a.search.num_devices << " x "
              << cluster.device.name << " (" << cluster.source << "): " << result.evaluated
              << " valid layouts, " << result.fitting.size() << " fit in memory\n";
    planner::print_plan_table(std::cout, result.fitting, a.top);
    planner::print_breakdown(std::cout, result.fitting.front());
    planner::print_rank_mapping(std::cout, result.fitting.front().layout, cluster);
    if (a.train_tokens > 0)
      planner::print_training_time(std::cout, result.fitting.front(), a.workload, a.train_tokens);
  }
  if (!a.launch) return 0;
  planner::LaunchContext context;
  context.binary = std::filesystem::read_symlink("/proc/self/exe").string();
  context.train_args = a.train_args;
  context.slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  context.root = geteuid() == 0;
  std::vector<std::string> argv =
      planner::launch_command(result.fitting.front().layout, a.workload, context);
  std::cout << "launch: " << planner::shell_line(argv) << std::endl;
  std::vector<char*> c_argv;
  for (std::string& s : argv) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  execvp(c_argv[0], c_argv.data());
  std::cerr << "trident plan: cannot run " << argv[0] << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int plan_main(const std::vector<std::string>& all_args) {
  CLI::App app("trident plan: pick (t, p, d, b, v) for a GPT on a cluster (PTD-P model)",
               "trident plan");
  PlanArgs a;
  std::vector<std::string> args = split_train_args(all_args, a);
  std::string preset;
  tokenizer::TokenizerOptions tokenizer_options;
  ModelFlags flags = add_model_flags(app, a.workload.model, preset);
  std::string moe_layer_freq = "1";
  const MoeFlags moe = add_moe_shape_flags(app, a.workload.model.moe, moe_layer_freq);
  add_tokenizer_args(app, &tokenizer_options, "Model (the tokenizer sets --vocab-size)");
  // LoRA: the frozen base has no gradients or Adam state; the plan holds the adapters'.
  const LoraFlags lora = add_lora_flags(app, a.workload.model.lora);
  add_plan_flags(app, a);
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  try {
    if (a.calibrate) {
      if (a.output.empty()) {
        std::cerr << "trident plan: --calibrate needs --output FILE\n";
        return 2;
      }
      return run_calibration(a);
    }
    apply_model_preset(preset, flags, a.workload.model);
    std::vector<std::string> errors = tokenizer::check_tokenizer_options(tokenizer_options);
    if (errors.empty() && tokenizer_options.given() && !flags.was_given("--vocab-size"))
      a.workload.model.vocab_size = tokenizer::build_tokenizer(tokenizer_options)->vocab_size();
    apply_moe_shape_flags(moe, a.workload.model, moe_layer_freq, false, errors);
    check_lora_flags(lora, a.workload.model.lora, errors);
    for (const std::string& e : validate_model_config(a.workload.model, 1)) errors.push_back(e);
    if (a.cluster.empty()) errors.push_back("--cluster FILE is required (see clusters/)");
    if (a.workload.global_batch < 1) errors.push_back("--global-batch-size must be >= 1");
    if (a.bf16 && a.fp16) errors.push_back("--bf16 and --fp16 exclude each other");
    for (const std::string& e : sharding_flag_errors(a)) errors.push_back(e);
    if (a.sequence_parallel && a.no_sequence_parallel)
      errors.push_back("--sequence-parallel and --no-sequence-parallel exclude each other");
    if (!errors.empty()) {
      std::cerr << "trident plan: " << errors.size() << " invalid argument"
                << (errors.size() > 1 ? "s" : "") << ":\n";
      for (const std::string& e : errors) std::cerr << "  - " << e << "\n";
      return 2;
    }
    return run_plan(a);
  } catch (const std::exception& e) {
    std::cerr << "trident plan: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace trident::cli
