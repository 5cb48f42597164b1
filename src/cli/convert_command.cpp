#include "cli/convert_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "cli/checkpoint_weights.h"
#include "cli/gguf_export.h"
#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "core/files.h"
#include "io/hf_gpt2.h"
#include "io/hf_llama.h"
#include "io/hf_tokenizer.h"

namespace trident::cli {

namespace {

// The class HF's config.json names (LlamaForCausalLM, Qwen3ForCausalLM...), for the message.
std::string written_architecture(const std::string& save_hf) {
  std::ifstream in(save_hf + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(in, nullptr, false);
  if (cfg.is_object() && cfg.contains("architectures") && cfg["architectures"].is_array() &&
      !cfg["architectures"].empty() && cfg["architectures"][0].is_string())
    return cfg["architectures"][0].get<std::string>();
  return "model";
}

// --save-hf-dtype, or by default the checkpoint's precision: bf16 for a bf16 run, or for a
// checkpoint converted from a BF16 HF directory (hf_to_checkpoint records it so), so that
// such a file comes back byte for byte.
io::StoredDtype export_dtype(const std::string& load, const std::string& flag) {
  if (!flag.empty()) return flag == "bf16" ? io::StoredDtype::kBF16 : io::StoredDtype::kF32;
  const nlohmann::json manifest = checkpoint::read_manifest(checkpoint::latest_checkpoint(load));
  const bool bf16 = manifest.contains("precision") && manifest["precision"] == "bf16";
  return bf16 ? io::StoredDtype::kBF16 : io::StoredDtype::kF32;
}

// Checkpoint -> HuggingFace directory: the weights, and GPT-2's tokenizer files when the
// checkpoint carries them or the flags name them.
void checkpoint_to_hf(const std::string& load, const std::string& save_hf,
                      const std::string& dtype_flag, const tokenizer::TokenizerOptions& flags) {
  ModelConfig config;
  const Parameters whole = load_checkpoint_weights(load, &config, std::cout);
  const io::StoredDtype dtype = export_dtype(load, dtype_flag);
  io::save_hf_model(save_hf, config, whole, false, dtype);
  std::cout << "wrote HuggingFace " << written_architecture(save_hf) << " " << save_hf << " ("
            << io::hf_torch_dtype(dtype) << ")\n";
  // Not the installation's GPT-2 files: they are no evidence of what the model was trained with.
  const tokenizer::TokenizerOptions t = flags.given() ? flags : carried_tokenizer(load);
  if (t.given() && t.huggingface()) {
    io::save_hf_tokenizer_json(save_hf, t.tokenizer_model);
    std::cout << "wrote its tokenizer (tokenizer.json, tokenizer_config.json from "
              << t.tokenizer_model << ")\n";
    return;
  }
  if (!t.given() || t.sentencepiece()) {
    std::cout << "the checkpoint carries no GPT-2 tokenizer: none written (give --vocab-file "
                 "and --merge-file to write one)\n";
    return;
  }
  io::save_hf_gpt2_tokenizer(save_hf, t.vocab_file, t.merge_file, config.max_positions());
  std::cout << "wrote its tokenizer (vocab.json, merges.txt from " << t.vocab_file << ", "
            << t.merge_file << ")\n";
}

// HuggingFace directory -> checkpoint, carrying the directory's tokenizer (or the flags').
void hf_to_checkpoint(const std::string& load_hf, const std::string& save,
                      const tokenizer::TokenizerOptions& flags) {
  engine::RankModelOptions o;
  o.layout.model = io::read_hf_config(load_hf);
  o.load_hf = load_hf;
  OneProcessModel one(std::move(o));
  checkpoint::RunRecord run{one.options.layout, one.options.seed, {}, 1};
  // The checkpoint's precision says how the weights were stored: a BF16 directory's values
  // are bf16 values, and the export writes them back as BF16 (export_dtype).
  if (io::hf_weights_dtype(load_hf) == io::StoredDtype::kBF16)
    run.layout.precision = kernels::Precision::kBf16;
  // Only files the flags or the directory name: the installation's GPT-2 files are no
  // evidence of what this model was trained with.
  const tokenizer::TokenizerOptions t = flags.given() ? flags : hf_directory_tokenizer(load_hf);
  run.tokenizer = checkpoint::tokenizer_record(t);
  engine::RankContext rank = one.rank();
  checkpoint::save(save, run, one.model, {0, 0, 0}, rank, std::cout);
}

// A checkpoint of LoRA adapters -> a checkpoint of the merged model W + (alpha / R) B A: a
// normal full checkpoint (no adapters, no base reference) that score, generate and train
// --load read as any other. Its tokenizer: the flags', or the adapters' checkpoint's.
void merged_checkpoint(const std::string& load, const std::string& save,
                       const tokenizer::TokenizerOptions& flags) {
  engine::RankModelOptions o;
  const Parameters whole = load_checkpoint_weights(load, &o.layout.model, std::cout);
  o.layout.model.lora = LoraConfig{};
  OneProcessModel one(std::move(o));
  Parameters& params = one.parameters();
  for (const ParamSpec& s : params.layout().specs()) {  // by name: the layouts' padding may differ
    const ParamSpec& from = whole.layout().find(s.name);
    std::copy_n(whole.values() + from.offset, s.numel(), params.values() + s.offset);
  }
  checkpoint::RunRecord run{one.options.layout, one.options.seed, {}, 1};
  const tokenizer::TokenizerOptions t = flags.given() ? flags : carried_tokenizer(load);
  run.tokenizer = checkpoint::tokenizer_record(t);
  engine::RankContext rank = one.rank();
  checkpoint::save(save, run, one.model, {0, 0, 0}, rank, std::cout);
}

}  // namespace

namespace {
// --merge-lora exactly when the checkpoint holds LoRA adapters (their export is the merged
// model: trident writes no adapter-only HF directory).
bool lora_flag_agrees(const std::string& load, bool merge_lora) {
  const bool lora =
      checkpoint::manifest_model(checkpoint::read_manifest(checkpoint::latest_checkpoint(load)))
          .lora.enabled();
  if (lora == merge_lora) return true;
  std::cerr << "trident convert: " << load
            << (lora ? " holds LoRA adapters: give --merge-lora to write the merged model\n"
                     : " holds no LoRA adapters: --merge-lora has nothing to merge\n");
  return false;
}
}  // namespace

namespace {
// --to gguf: from --load or --load-hf, to --output; nothing else written.
int convert_to_gguf(const std::string& load, const std::string& load_hf, const std::string& save,
                    bool merge_lora, GgufExportFlags f, const tokenizer::TokenizerOptions& tok) {
  if (load.empty() == load_hf.empty() || f.output.empty() || !save.empty()) {
    std::cerr << "trident convert: --to gguf takes --load CKPT or --load-hf DIR, and --output "
                 "FILE (not --save)\n";
    return 2;
  }
  std::vector<std::string> errors = tokenizer::check_tokenizer_options(tok);
  for (const std::string& e : errors) std::cerr << "trident convert: " << e << "\n";
  if (!errors.empty()) return 2;
  try {
    if (!load.empty() && !lora_flag_agrees(load, merge_lora)) return 2;
    f.load = load;
    f.load_hf = load_hf;
    export_gguf(f, tok);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident convert: " << e.what() << "\n";
    return 2;
  }
}
}  // namespace

int convert_main(const std::vector<std::string>& args) {
  CLI::App app("trident convert: checkpoint <-> HuggingFace directory, or to GGUF (llama.cpp)",
               "trident convert");
  std::string load, save_hf, load_hf, save, save_hf_dtype, to;
  GgufExportFlags gguf;
  bool merge_lora = false;
  tokenizer::TokenizerOptions tokenizer_flags;
  auto* from_ckpt = app.add_option("--load", load, "checkpoint directory (its latest)");
  auto* from_hf =
      app.add_option("--load-hf", load_hf,
                     "HuggingFace directory (GPT-2, Llama, Mistral, Qwen, Mixtral or Qwen3-MoE)");
  auto* to_hf =
      app.add_option(
             "--save-hf", save_hf,
             "write a HuggingFace directory (GPT-2, Llama, Mistral, Qwen, Mixtral or Qwen3-MoE)")
          ->needs(from_ckpt);
  app.add_option("--save-hf-dtype", save_hf_dtype,
                 "the exported tensors' dtype (default: bf16 when the checkpoint's precision is "
                 "bf16, as after --load-hf of a BF16 directory; else fp32)")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->needs(to_hf);
  app.add_option("--save", save,
                 "write a checkpoint directory (from --load-hf, or the merged model of --load "
                 "--merge-lora)");
  app.add_flag("--merge-lora", merge_lora,
               "a checkpoint of LoRA adapters: write the merged model W + (alpha / R) B A (to "
               "--save-hf or --save), its base read from the --load-hf directory the "
               "checkpoint records")
      ->needs(from_ckpt);
  from_ckpt->excludes(from_hf);
  auto* to_gguf =
      app.add_option("--to", to,
                     "gguf: write one GGUF file for llama.cpp (from --load or --load-hf, with "
                     "its tokenizer) to --output")
          ->check(CLI::IsMember({"gguf"}))
          ->excludes(to_hf);
  app.add_option("--output", gguf.output, "the GGUF file --to gguf writes")->needs(to_gguf);
  app.add_option("--outtype", gguf.outtype,
                 "--to gguf's type of the matrices: f32, f16 (default), bf16 or q8_0 (norms, "
                 "biases and position embeddings stay f32)")
      ->needs(to_gguf);
  add_tokenizer_args(app, &tokenizer_flags, "Tokenizer (written with the model)",
                     "the --load checkpoint's, or the --load-hf directory's");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  if (!to.empty()) return convert_to_gguf(load, load_hf, save, merge_lora, gguf, tokenizer_flags);
  if (save_hf.empty() == save.empty() || (!save.empty() && load_hf.empty() && !merge_lora)) {
    std::cerr << "trident convert: give --load CKPT --save-hf DIR, --load-hf DIR --save CKPT, or "
                 "--load CKPT --merge-lora --save CKPT (LoRA adapters merged)\n";
    return 2;
  }
  std::vector<std::string> errors = tokenizer::check_tokenizer_options(tokenizer_flags);
  for (const std::string& e : errors) std::cerr << "trident convert: " << e << "\n";
  if (!errors.empty()) return 2;
  try {
    if (!load.empty() && !lora_flag_agrees(load, merge_lora)) return 2;
    if (!load.empty() && !save.empty())
      merged_checkpoint(load, save, tokenizer_flags);
    else if (!load.empty())
      checkpoint_to_hf(load, save_hf, save_hf_dtype, tokenizer_flags);
    else
      hf_to_checkpoint(load_hf, save, tokenizer_flags);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident convert: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace trident::cli
