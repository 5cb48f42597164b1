#include "cli/preprocess_command.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/chat_template_args.h"
#include "cli/input_file.h"
#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"

namespace trident::cli {

int preprocess_main(const std::vector<std::string>& args) {
  CLI::App app("trident preprocess: JSONL -> Megatron indexed dataset (.bin/.idx)",
               "trident preprocess");
  data::PreprocessOptions o;
  std::string on_bad_line = "fail";
  app.add_option("--input", o.input, "JSONL file, one document per line (-: standard input)")
      ->required();
  app.add_option("--json-keys", o.json_keys, "keys to extract (one dataset per key)")
      ->capture_default_str();
  app.add_option("--output-prefix", o.output_prefix, "writes <prefix>_<key>_document.bin/.idx")
      ->required();
  // No default: a dataset's ids mean nothing without the tokenizer, so it is named.
  add_tokenizer_args(app, &o.tokenizer, "Tokenizer");
  app.add_flag("--append-eod", o.append_eod,
               "append the end-of-document token (<|endoftext|>, SentencePiece's </s>) to every "
               "document");
  app.add_option("--eod-id", o.eod_id,
                 "the id --append-eod appends (default: the tokenizer's end-of-document); chat "
                 "SFT data needs one the template never writes, such as Llama 3's "
                 "<|end_of_text|>, to keep packed conversations apart")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--add-bos", o.add_bos,
               "put the beginning-of-sequence token (SentencePiece's <s>) before every "
               "document, as Megatron's and HF's Llama tokenizers do");
  app.add_option("--workers", o.workers, "tokenizer threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--on-bad-line", on_bad_line,
                 "fail: stop at the first invalid JSON / missing key / invalid UTF-8 line; "
                 "skip: count, report and skip them")
      ->capture_default_str()
      ->check(CLI::IsMember({"fail", "skip"}));
  ChatTemplateFlags chat;
  add_chat_template_args(app, &chat,
                         "the --json-keys key holds conversations (lists of {role, content}): "
                         "render each with the model's chat template, and write a loss mask "
                         "<prefix>_<key>_loss_mask.bin/.idx (1 on the assistant's tokens) for "
                         "train --sft");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  o.skip_bad_lines = on_bad_line == "skip";
  if (!chat.apply && (!chat.template_path.empty() || chat.kwargs != "{}")) {
    std::cerr << "trident preprocess: --chat-template and --chat-template-kwargs need "
                 "--apply-chat-template\n";
    return 2;
  }
  try {
    if (chat.apply) {
      o.chat_template = std::make_shared<const chat_template::ChatTemplate>(
          load_chat_template(chat, o.tokenizer));
      o.chat_options.extra = chat_template_kwargs(chat);
    }
    const InputFile spooled(o.input);
    const std::string given_input = o.input;
    o.input = spooled.path();
    data::PreprocessReport r = data::preprocess(o, std::cerr);
    std::cout << "preprocess: " << r.lines << " lines, " << r.documents << " documents, "
              << r.tokens << " tokens in " << r.seconds << " s ("
              << (long)(r.documents / std::max(r.seconds, 1e-9)) << " docs/s, "
              << r.bytes / std::max(r.seconds, 1e-9) / 1e6 << " MB/s, " << o.workers
              << " workers)\n";
    if (r.empty_documents)
      std::cout << "preprocess: skipped " << r.empty_documents << " documents without tokens\n";
    if (r.bad_lines) {
      std::cout << "preprocess: skipped " << r.bad_lines << " bad lines";
      std::cout << (r.bad_lines > (long)r.bad_line_messages.size() ? ", the first:\n" : ":\n");
      for (const std::string& m : r.bad_line_messages)
        std::cout << "  " << given_input << ":" << m << "\n";
    }
    for (const std::string& p : r.outputs) std::cout << "wrote " << p << ".bin/.idx\n";
    return 0;
  } catch (const data::BadLineError& e) {
    std::cerr << "trident preprocess: bad line " << e.what()
              << " (use --on-bad-line skip to skip such lines); no output written\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "trident preprocess: " << e.what() << "; no output written\n";
    return 2;
  }
}

}  // namespace trident::cli
