#include "cli/gguf_export.h"

#include <filesystem>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/checkpoint_weights.h"
#include "cli/tokenizer_args.h"
#include "core/files.h"
#include "deploy/gguf_model.h"
#include "deploy/gguf_vocab.h"
#include "io/hf_gpt2.h"

namespace trident::cli {

namespace fs = std::filesystem;

namespace {

// The model a checkpoint or directory records, read before its weights.
ModelConfig recorded_model(const GgufExportFlags& f) {
  if (!f.load_hf.empty()) return io::read_hf_config(f.load_hf);
  return checkpoint::manifest_model(
      checkpoint::read_manifest(checkpoint::latest_checkpoint(f.load)));
}

// general.name: the directory's name ("ckpt" for ckpt/ or ckpt).
std::string model_name(const GgufExportFlags& f) {
  fs::path p = f.load.empty() ? f.load_hf : f.load;
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

void export_gguf(const GgufExportFlags& f, const tokenizer::TokenizerOptions& tokenizer_flags) {
  const deploy::OutType type = deploy::parse_outtype(f.outtype);
  check_output_file(f.output, "--output");
  const std::string arch = deploy::gguf_architecture(recorded_model(f));
  // The tokenizer is part of a GGUF model: the flags', or the checkpoint's or directory's
  // copy; never the installation's GPT-2 files, no evidence of what the model was trained with.
  const tokenizer::TokenizerOptions tok = tokenizer_flags.given() ? tokenizer_flags
                                          : f.load.empty() ? hf_directory_tokenizer(f.load_hf)
                                                           : carried_tokenizer(f.load);
  if (!tok.given())
    throw FormatError("--to gguf: " + (f.load.empty() ? f.load_hf : f.load) +
                      " carries no tokenizer and a GGUF model needs one: give --vocab-file and "
                      "--merge-file, or --tokenizer-type and --tokenizer-model");
  ModelConfig config;
  const Parameters whole = f.load.empty() ? load_hf_directory_weights(f.load_hf, &config)
                                          : load_checkpoint_weights(f.load, &config, std::cout);
  deploy::GgufWriter w;
  std::vector<std::string> notes = deploy::add_model(w, config, whole, type, model_name(f));
  for (const std::string& n : deploy::add_vocabulary(w, tok, config.vocab_size)) notes.push_back(n);
  for (const std::string& n : notes) std::cout << "note: " << n << "\n";
  const std::uint64_t bytes = w.write(f.output);
  std::cout << "wrote GGUF " << arch << " " << f.output << " (" << deploy::outtype_name(type)
            << ", " << w.tensors().size() << " tensors, " << bytes << " bytes; tokenizer "
            << tok.source() << ")\n";
}

}  // namespace trident::cli
