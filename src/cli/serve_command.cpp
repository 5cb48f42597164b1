#include "cli/serve_command.h"

#include <csignal>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "cli/inference_args.h"
#include "cli/mpi_job.h"
#include "cli/parse_args.h"
#include "core/files.h"
#include "serve/generator_batcher.h"
#include "serve/http_server.h"
#include "serve/shutdown.h"

namespace trident::cli {

namespace {

constexpr const char* kCommand = "trident serve";

struct ServeArgs {
  InferenceArgs inference;
  serve::HttpOptions http;
  int max_queue = 256;
  std::string model_name;
};

void add_serve_args(CLI::App& app, ServeArgs* a) {
  add_inference_args(app, &a->inference);
  const char* S = "Server";
  app.add_option("--host", a->http.host, "address to listen on")->group(S)->capture_default_str();
  app.add_option("--port", a->http.port, "port to listen on (0: any free port, printed)")
      ->group(S)
      ->capture_default_str();
  app.add_option("--max-queue", a->max_queue,
                 "requests waiting for a KV-cache slot; more get HTTP 503")
      ->group(S)
      ->capture_default_str();
  app.add_option("--max-body-bytes", a->http.max_body_bytes,
                 "largest request body; larger get HTTP 413")
      ->group(S)
      ->capture_default_str();
  app.add_option("--model-name", a->model_name,
                 "the model's name in /v1/models and answers (default: the --load/--load-hf "
                 "directory's name)")
      ->group(S);
}

// Every rule broken by the flags, one per line (empty: none).
std::string check_serve_args(const ServeArgs& a, int world_size) {
  std::string errors = check_inference_args(a.inference, world_size);
  if (a.http.port < 0 || a.http.port > 65535) errors += "--port must be in [0, 65535]\n";
  if (a.http.host.empty()) errors += "--host must not be empty\n";
  if (a.max_queue < 1 || a.max_queue > 100000) errors += "--max-queue must be in [1, 100000]\n";
  if (a.http.max_body_bytes < 1024) errors += "--max-body-bytes must be at least 1024\n";
  return errors;
}

std::string default_model_name(const generation::InferenceOptions& o) {
  std::filesystem::path p(o.load_hf.empty() ? o.load : o.load_hf);
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();  // "dir/"
  return name.empty() ? "trident" : name;
}

// Rank 0: the HTTP server on its threads, the engine loop on this one (it owns MPI), until
// SIGINT / SIGTERM. Returns the exit code.
int serve_on_rank0(const ServeArgs& a, generation::InferenceModel& model,
                   const comm::MpiRuntime& mpi) {
  const std::unique_ptr<tokenizer::Tokenizer> built =
      build_inference_tokenizer(a.inference, model.vocab());
  const tokenizer::Tokenizer& tok = *built;
  generation::Generator generator(model, &tok);
  serve::GeneratorBatcher batcher(generator);
  serve::Engine engine(batcher, a.max_queue);
  const std::string name =
      a.model_name.empty() ? default_model_name(a.inference.model) : a.model_name;
  serve::Service service(engine, tok, {model.max_sequence()}, name);
  serve::HttpOptions http_options = a.http;
  http_options.threads = model.max_batch() + a.max_queue + 16;  // every waiting client holds one
  serve::HttpServer http(service, http_options);
  const std::string bind_error = http.bind();
  if (!bind_error.empty()) throw FormatError(bind_error);
  std::thread http_thread([&http] { http.serve(); });
  http.wait_until_running();
  serve::ShutdownSignals signals([&engine](int sig) {
    std::cerr << kCommand << ": signal " << sig << ", shutting down" << std::endl;
    engine.stop();
  });
  std::cout << kCommand << ": serving " << name << " on http://" << a.http.host << ":"
            << http.port() << " (" << model.max_batch() << " slots x " << model.max_sequence()
            << " positions, " << mpi.world_size() << " rank" << (mpi.world_size() > 1 ? "s" : "")
            << ")" << std::endl;
  try {
    engine.run();  // until a signal; its waiting clients are answered 503
  } catch (const std::exception& e) {
    // The model failed (a rank gone, say): answer the clients, then end every rank.
    http.stop();
    http_thread.join();
    return fail_job(mpi, kCommand, 1, std::string("generation failed: ") + e.what());
  }
  http.stop();
  http_thread.join();
  model.stop();  // releases the other ranks
  return 0;
}

}  // namespace

int serve_main(const std::vector<std::string>& args) {
  comm::MpiRuntime mpi(nullptr, nullptr);
  CLI::App app("trident serve: HTTP text generation (Megatron PUT /api, OpenAI /v1/completions)",
               "trident serve");
  ServeArgs a;
  add_serve_args(app, &a);
  int code = 0;
  if (!parse_quietly_off_rank_0(mpi, [&] { return parse_args(app, args, &code); })) return code;
  const std::string errors = check_serve_args(a, mpi.world_size());
  if (!errors.empty()) {
    if (mpi.world_rank() == 0) std::cerr << kCommand << ":\n" << errors;
    return 2;
  }
  return run_job(mpi, kCommand, [&]() -> int {
    const generation::InferenceOptions& o = a.inference.model;
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
    return serve_on_rank0(a, model, mpi);
  });
}

}  // namespace trident::cli
