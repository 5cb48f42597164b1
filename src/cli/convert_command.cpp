#include "cli/convert_command.h"

#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/parse_args.h"
#include "core/files.h"
#include "io/hf_gpt2.h"

namespace trident::cli {

namespace {

// The model shape recorded in a checkpoint's manifest.
ModelConfig checkpoint_model(const std::string& dir) {
  return checkpoint::manifest_model(checkpoint::read_manifest(checkpoint::latest_checkpoint(dir)));
}

}  // namespace

int convert_main(const std::vector<std::string>& args) {
  CLI::App app("trident convert: checkpoint <-> HuggingFace GPT-2 directory", "trident convert");
  std::string load, save_hf, load_hf, save;
  auto* from_ckpt = app.add_option("--load", load, "checkpoint directory (its latest)");
  auto* from_hf = app.add_option("--load-hf", load_hf, "HuggingFace GPT-2 directory");
  app.add_option("--save-hf", save_hf, "write a HuggingFace GPT-2 directory")->needs(from_ckpt);
  app.add_option("--save", save, "write a checkpoint directory")->needs(from_hf);
  from_ckpt->excludes(from_hf);
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  if (save_hf.empty() == save.empty()) {
    std::cerr << "trident convert: give --load CKPT --save-hf DIR, or --load-hf DIR --save CKPT\n";
    return 2;
  }
  try {
    // One rank, the whole model: only the parameters matter (a short sequence, one sample).
    engine::RankModelOptions o;
    o.layout.model = !load.empty() ? checkpoint_model(load) : io::read_hf_config(load_hf);
    o.layout.model.seq_length = std::min(o.layout.model.max_positions(), 64);
    o.layout.split = {o.layout.model.num_layers};
    o.schedules = {o.schedule};
    o.load_hf = load_hf;
    distributed::ProcessGrid grid(1, 1, 1);
    distributed::ProcessGroups groups = distributed::make_single_rank_groups();
    engine::RankContext rank{0, &grid, &groups, {"local"}};
    engine::RankModel model = engine::build_rank_model(o, *groups.tensor, *groups.pipeline, *groups.data);
    const checkpoint::RunRecord run{o.layout, o.seed, {}, 1};
    if (!load.empty()) {
      checkpoint::load(load, run, model, rank, std::cout, checkpoint::LoadMode::kWeightsOnly);
      Parameters whole = engine::gather_rank_model(model, o.layout, *groups.tensor, *groups.pipeline);
      io::save_hf_model(save_hf, o.layout.model, whole);
      std::cout << "wrote HuggingFace GPT-2 model " << save_hf << "\n";
    } else {
      checkpoint::save(save, run, model, {0, 0, 0}, rank, std::cout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident convert: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace trident::cli
