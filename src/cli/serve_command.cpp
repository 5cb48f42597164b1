#include "cli/serve_command.h"

#include <csignal>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "cli/mpi_job.h"
#include "cli/parse_args.h"
#include "cli/serve_args.h"
#include "core/files.h"
#include "serve/generator_batcher.h"
#include "serve/http_server.h"
#include "serve/shutdown.h"

namespace trident::cli {

namespace {

constexpr const char* kCommand = "trident serve";

std::string default_model_name(const generation::InferenceOptions& o) {
  std::filesystem::path p(o.load_hf.empty() ? o.load : o.load_hf);
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();  // "dir/"
  return name.empty() ? "trident" : name;
}

// The prompt limits: the flags', or the context and 32 bytes a token.
serve::ModelLimits model_limits(const ServeArgs& a, int max_sequence) {
  serve::ModelLimits limits;
  limits.max_sequence = max_sequence;
  limits.max_prompt_tokens = a.max_prompt_tokens > 0 ? a.max_prompt_tokens : max_sequence;
  limits.max_prompt_chars =
      a.max_prompt_chars > 0 ? a.max_prompt_chars : 32 * limits.max_prompt_tokens;
  return limits;
}

// SIGINT / SIGTERM: the first stops accepting and lets running requests finish within
// --shutdown-timeout; a second cancels them at once.
std::function<void(int)> on_shutdown_signal(const ServeArgs& a, serve::Engine& engine,
                                            serve::HttpServer& http) {
  auto signals = std::make_shared<int>(0);  // the watcher thread alone calls this
  return [&a, &engine, &http, signals](int sig) {
    if (++*signals > 1) {
      std::cerr << kCommand << ": signal " << sig << " again, cancelling" << std::endl;
      return engine.stop();
    }
    std::cerr << kCommand << ": signal " << sig << ", finishing the requests in progress (up to "
              << a.shutdown_timeout_s << " s, --shutdown-timeout)" << std::endl;
    http.begin_shutdown();
    engine.drain(std::chrono::steady_clock::now() +
                 std::chrono::milliseconds((long long)(a.shutdown_timeout_s * 1000)));
  };
}

// Rank 0: the HTTP server on its threads, the engine loop on this one (it owns MPI), until
// SIGINT / SIGTERM. Returns the exit code.
int serve_on_rank0(const ServeArgs& a, serve::ChatSetup chat, generation::InferenceModel& model,
                   const comm::MpiRuntime& mpi) {
  const std::unique_ptr<tokenizer::Tokenizer> built =
      build_inference_tokenizer(a.inference, model.vocab());
  generation::Generator generator(model, built.get());
  serve::GeneratorBatcher batcher(generator);
  serve::Engine engine(batcher, a.max_queue);
  const std::string name =
      a.model_name.empty() ? default_model_name(a.inference.model) : a.model_name;
  serve::Service service(engine, *built, model_limits(a, model.max_sequence()), name,
                         std::move(chat));
  serve::HttpOptions http_options = a.http;
  // Every client waiting on a generation holds a worker: running + queued + some for the rest.
  http_options.connections.workers = model.max_batch() + a.max_queue + 16;
  serve::HttpServer http(service, http_options);
  const std::string bind_error = http.bind();
  if (!bind_error.empty()) throw FormatError(bind_error);
  std::thread http_thread([&http] { http.serve(); });
  serve::ShutdownSignals signals(on_shutdown_signal(a, engine, http));
  std::cout << kCommand << ": serving " << name << " on http://" << a.http.host << ":"
            << http.port() << " (" << model.max_batch() << " slots x " << model.max_sequence()
            << " positions, " << mpi.world_size() << " rank" << (mpi.world_size() > 1 ? "s" : "")
            << ", up to " << http.max_connections() << " connections"
            << (a.http.api_key.empty() ? "" : ", API key required") << ")" << std::endl;
  std::string failure;
  try {
    engine.run();  // until a signal; clients still waiting then are answered 503
  } catch (const std::exception& e) {
    failure = std::string("generation failed: ") + e.what();  // a rank gone, say
  }
  http.stop();
  http_thread.join();
  if (!failure.empty()) return fail_job(mpi, kCommand, 1, failure);  // ends every rank
  model.stop();                                                      // releases the other ranks
  return 0;
}

}  // namespace

int serve_main(const std::vector<std::string>& args) {
  comm::MpiRuntime mpi(nullptr, nullptr);
  CLI::App app(
      "trident serve: HTTP text generation (Megatron PUT /api, OpenAI /v1/completions "
      "and /v1/chat/completions)",
      "trident serve");
  ServeArgs a;
  add_serve_args(app, &a);
  int code = 0;
  if (!parse_quietly_off_rank_0(mpi, [&] { return parse_args(app, args, &code); })) return code;
  std::string errors = check_serve_args(a, mpi.world_size());
  if (errors.empty()) errors = resolve_serve_args(&a);
  if (!errors.empty()) {
    if (mpi.world_rank() == 0) std::cerr << kCommand << ":\n" << errors;
    return 2;
  }
  return run_job(mpi, kCommand, [&]() -> int {
    const generation::InferenceOptions& o = a.inference.model;
    // Before the model loads, so a bad --chat-template fails at once (exit 2).
    serve::ChatSetup chat;
    if (mpi.world_rank() == 0) chat = serve_chat_setup(a.chat, a.inference, std::cerr);
    RankSetup setup(mpi, o.tensor_model_parallel_size, o.pipeline_model_parallel_size,
                    launch_options(a.inference, kCommand));
    apply_inference_runtime(a.inference, setup.context.nodes, mpi.world_rank());
    std::ostringstream discard;
    generation::InferenceModel model(o, setup.context, mpi.world_rank() == 0 ? std::cerr : discard);
    if (!model.coordinator()) {
      // mpirun passes SIGINT / SIGTERM to every rank; rank 0 answers them by finishing its
      // clients and releasing the followers, so a follower must outlive them. A rank 0 that
      // dies instead ends the job through mpirun.
      std::signal(SIGINT, SIG_IGN);
      std::signal(SIGTERM, SIG_IGN);
      model.follow();  // until rank 0 stops
      return 0;
    }
    return serve_on_rank0(a, std::move(chat), model, mpi);
  });
}

}  // namespace trident::cli
