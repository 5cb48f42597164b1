#include "cli/curate_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/mpi_job.h"
#include "cli/parse_args.h"
#include "comm/mpi_communicator.h"
#include "core/files.h"
#include "curation/exchange.h"
#include "curation/pipeline.h"
#include "curation/quality.h"

namespace trident::cli {

namespace {

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ','))
      if (!part.empty()) out.push_back(part);
  }
  return out;
}

int train_quality_main(const std::vector<std::string>& args) {
  CLI::App app(
      "trident curate train-quality: fastText word 2-gram quality classifier "
      "(hq = --positive, lq = --negative)",
      "trident curate train-quality");
  curation::TrainQualityOptions o;
  std::string on_bad_line = "fail";
  app.add_option("--positive", o.positive, "JSONL files of reference (high-quality) text")
      ->required();
  app.add_option("--negative", o.negative, "JSONL files of raw text")->required();
  app.add_option("--output", o.output, "model file to write (fastText .bin)")->required();
  app.add_option("--text-key", o.text_key)->capture_default_str();
  app.add_option("--held-out", o.held_out, "fraction held out for the printed accuracy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
  app.add_option("--epoch", o.epoch)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--dim", o.dim)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--word-ngrams", o.word_ngrams)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--bucket", o.bucket, "hash buckets of word n-grams")->capture_default_str();
  app.add_option("--lr", o.lr)->capture_default_str();
  app.add_option("--workers", o.threads, "training threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--on-bad-line", on_bad_line)
      ->capture_default_str()
      ->check(CLI::IsMember({"fail", "skip"}));
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  o.skip_bad_lines = on_bad_line == "skip";
  try {
    curation::TrainQualityResult r = curation::train_quality(o, std::cout);
    std::cout << "train-quality: wrote " << o.output << " in " << r.seconds << " s\n";
    if (r.bad_lines) std::cout << "train-quality: skipped " << r.bad_lines << " bad lines\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident curate train-quality: " << e.what() << "; no model written\n";
    return 2;
  }
}

// The flags' text before it becomes options: comma-separated lists are split after parsing.
struct CurateFlagText {
  std::string on_bad_line = "fail";
  std::vector<std::string> stages, langs, task_files, task_keys;
};

// Input, output, report and audit; the stages, workers and bad lines.
void add_io_flags(CLI::App& app, curation::CurateOptions& o, CurateFlagText& text) {
  app.add_option("--input", o.inputs,
                 "JSONL files (under mpirun each rank reads a contiguous share)")
      ->required();
  app.add_option("--output", o.output,
                 "curated JSONL (written under a temporary name, then renamed)")
      ->required();
  app.add_option("--report", o.report, "JSON report per stage")->required();
  app.add_option("--removed", o.removed,
                 "audit JSONL: every removal with id, stage, reason, details");
  app.add_option("--text-key", o.text_key)->capture_default_str();
  app.add_option("--id-key", o.id_key,
                 "document id (for Pareto seeding, audit, decontaminated "
                 "pieces); default FILE:LINE when absent")
      ->capture_default_str();
  app.add_option("--stages", text.stages,
                 "comma-separated, from normalize,langid,quality,exact-dedup,"
                 "fuzzy-dedup,decontaminate (default: all whose inputs are given)");
  app.add_option("--workers", o.workers, "threads per rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--on-bad-line", text.on_bad_line,
                 "fail: stop at the first invalid JSON / missing key / invalid UTF-8 line; "
                 "skip: count, report and skip them")
      ->capture_default_str()
      ->check(CLI::IsMember({"fail", "skip"}));
  app.add_option("--progress-seconds", o.progress_seconds)->capture_default_str();
}

// normalize, langid and quality (with its Pareto draw).
void add_filter_flags(CLI::App& app, curation::CurateOptions& o, CurateFlagText& text) {
  app.add_option("--min-chars", o.min_chars, "normalize: drop documents shorter (code points)")
      ->capture_default_str();
  app.add_option("--langs", text.langs, "langid: languages kept (CLD2 codes, comma-separated)")
      ->default_str("en");
  app.add_option("--lang-threshold", o.lang_threshold,
                 "langid: least share of the text in a kept language")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--langid-sample-bytes", o.langid_sample_bytes,
                 "langid: on longer documents, CLD2 reads an evenly spread sample of this "
                 "many bytes, and the whole document only when the sample's answer is near "
                 "the threshold or unreliable (0: whole documents always)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--quality-model", o.quality_model, "quality: fastText model from train-quality");
  app.add_option("--quality-score-key", o.quality_score_key,
                 "quality: read a precomputed score in [0, 1] from this field instead");
  app.add_option("--pareto-alpha", o.pareto_alpha, "quality: keep when Pareto(alpha) > 1 - score")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "Pareto draws (per document id) and MinHash permutations")
      ->capture_default_str();
}

// Fuzzy dedup (MinHash, LSH) and decontamination.
void add_dedup_and_decontamination_flags(CLI::App& app, curation::CurateOptions& o,
                                         CurateFlagText& text) {
  app.add_option("--minhash-perms", o.minhash_perms)
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--shingle-size", o.shingle_size, "words per shingle")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--jaccard-threshold", o.jaccard_threshold,
                 "fuzzy: pairs at least this similar are duplicates")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--keep", o.keep, "fuzzy: the document kept per cluster")
      ->capture_default_str()
      ->check(CLI::IsMember({"longest", "first"}));
  app.add_option("--max-bucket", o.max_bucket, "fuzzy: larger LSH buckets pair with one pivot")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--candidates-out", o.candidates_out,
                 "fuzzy: write every LSH candidate pair with its Jaccard");
  app.add_option("--decontaminate-files", text.task_files,
                 "downstream task JSONL files (comma-separated)");
  app.add_option("--decontaminate-keys", text.task_keys,
                 "their fields holding text (strings or lists)")
      ->default_str("text");
  app.add_option("--ngram", o.ngram)->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--context-chars", o.context_chars, "removed on each side of a match")
      ->capture_default_str();
  app.add_option("--min-piece-chars", o.min_piece_chars, "shorter pieces are dropped")
      ->capture_default_str();
  app.add_option("--max-pieces", o.max_pieces, "a document cut into more is dropped")
      ->capture_default_str();
}

// The parsed flags' text into the options: lists split, stages in pipeline order whatever
// order they were typed in. Returns the argument error, or "" when there is none.
std::string resolve_options(const CurateFlagText& text, curation::CurateOptions& o) {
  o.skip_bad_lines = text.on_bad_line == "skip";
  if (!text.langs.empty()) o.langs = split_commas(text.langs);
  o.decontaminate_files = split_commas(text.task_files);
  if (!text.task_keys.empty()) o.decontaminate_keys = split_commas(text.task_keys);
  const std::vector<std::string> stages = split_commas(text.stages);
  const std::vector<std::string>& all = curation::all_stages();
  if (stages.empty()) {
    o.stages = curation::default_stages(o);
  } else {
    for (const std::string& s : stages)
      if (std::find(all.begin(), all.end(), s) == all.end())
        return "unknown stage '" + s + "' in --stages";
    for (const std::string& s : all)
      if (std::find(stages.begin(), stages.end(), s) != stages.end()) o.stages.push_back(s);
  }
  if (o.has("quality") && o.quality_model.empty() == o.quality_score_key.empty())
    return "the quality stage needs exactly one of --quality-model and --quality-score-key";
  if (o.has("decontaminate") && o.decontaminate_files.empty())
    return "the decontaminate stage needs --decontaminate-files";
  return "";
}

// Rank 0's summary: throughput, each stage's counts, the S-curve, bad lines, the files.
void print_summary(const curation::CurateResult& r, const curation::CurateOptions& o,
                   int world_size) {
  const auto& rep = r.report;
  std::cout << "curate: " << rep["lines_in"] << " lines, " << rep["bytes_in"].get<double>() / 1e6
            << " MB in " << rep["seconds"] << " s (" << rep["mb_per_s"] << " MB/s, " << o.workers
            << " workers x " << world_size << " ranks)\n";
  for (const auto& s : rep["stages"]) {
    std::cout << "  " << s["stage"].get<std::string>() << ": " << s["documents_in"] << " in, "
              << s["kept"] << " kept, " << s["removed"] << " removed";
    for (const auto& [k, v] : s["reasons"].items()) std::cout << "; " << k << ": " << v;
    std::cout << " (" << s["mb_per_s_per_worker"].get<double>() << " MB/s per worker)\n";
  }
  if (!r.s_curve.empty()) std::cout << r.s_curve;
  if (rep["bad_lines"].get<long>() > 0) {
    std::cout << "curate: skipped " << rep["bad_lines"] << " bad lines:\n";
    for (const auto& m : rep["bad_line_messages"])
      std::cout << "  " << m.get<std::string>() << "\n";
  }
  std::cout << "curate: wrote " << rep["documents_out"] << " documents to " << o.output
            << ", report " << o.report << (o.removed.empty() ? "" : ", removals " + o.removed)
            << "\n";
}

// Each output writable, and no two the same file (their temporary names would collide).
void check_outputs(const curation::CurateOptions& o) {
  std::vector<std::pair<std::string, std::string>> outputs = {{"--output", o.output},
                                                              {"--report", o.report}};
  if (!o.removed.empty()) outputs.push_back({"--removed", o.removed});
  if (!o.candidates_out.empty()) outputs.push_back({"--candidates-out", o.candidates_out});
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (std::filesystem::weakly_canonical(outputs[i].second) ==
          std::filesystem::weakly_canonical(outputs[j].second))
        throw FormatError(outputs[i].first + " " + outputs[i].second + " is also " +
                          outputs[j].first + ": each output needs a file of its own");
  for (const auto& [flag, path] : outputs) check_output_file(path, flag);
}

}  // namespace

int curate_main(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "train-quality")
    return train_quality_main(std::vector<std::string>(args.begin() + 1, args.end()));
  comm::MpiRuntime mpi(nullptr, nullptr);
  CLI::App app(
      "trident curate: MT-NLG's data curation (normalise, language ID, quality + "
      "Pareto, exact and fuzzy dedup, 13-gram decontamination), JSONL in and out. "
      "`trident curate train-quality --help` trains the quality classifier.",
      "trident curate");
  curation::CurateOptions o;
  CurateFlagText text;
  add_io_flags(app, o, text);
  add_filter_flags(app, o, text);
  add_dedup_and_decontamination_flags(app, o, text);
  int code = 0;
  if (!parse_quietly_off_rank_0(mpi, [&] { return parse_args(app, args, &code); })) return code;
  const std::string cmd = "trident curate";
  if (const std::string error = resolve_options(text, o); !error.empty())
    return fail_job(mpi, cmd, 2, error);
  try {
    // Before any work: an output that cannot be written is found now, not after the others.
    if (mpi.world_rank() == 0) check_outputs(o);
  } catch (const FormatError& e) {
    return fail_job(mpi, cmd, 2, std::string(e.what()) + "; nothing written");
  }
  try {
    curation::Exchange ex;
    curation::CurateResult r = curation::curate(o, ex, std::cerr);
    if (mpi.world_rank() == 0) print_summary(r, o, mpi.world_size());
    return 0;
  } catch (const curation::BadLineError& e) {
    return fail_job(mpi, cmd, 2,
                    std::string("bad line ") + e.what() +
                        " (use --on-bad-line skip to skip such lines); nothing written");
  } catch (const curation::PublishError& e) {
    return fail_job(mpi, cmd, 2, e.what());  // it names what is in place and what is not
  } catch (const std::exception& e) {
    // curation::curate leaves nothing behind before it publishes (curation/pipeline.h).
    return fail_job(mpi, cmd, 2, std::string(e.what()) + "; nothing written");
  }
}

}  // namespace trident::cli
