#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <fstream>
#include <stdexcept>

#include "tokenizer/gpt2_tokenizer.h"

namespace trident::tokenizer {

namespace {

// SentencePiece marks a word start with U+2581 (LOWER ONE EIGHTH BLOCK) in place of a space.
constexpr std::string_view kSpaceMark = "\xe2\x96\x81";
// What the library's Decode writes for an unknown piece (its default unk_surface).
constexpr std::string_view kUnknownSurface = " \xe2\x81\x87 ";

std::string piece_bytes(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      out += ' ';
      i += kSpaceMark.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

// A byte-fallback piece is spelled "<0xAB>".
char byte_piece_value(const std::string& piece) {
  return (char)std::stoi(piece.substr(3, 2), nullptr, 16);
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  // The library's own message for a missing file is "Not found: ..."; say which file first.
  if (!std::ifstream(model_file, std::ios::binary))
    throw std::runtime_error(model_file + ": cannot open");
  const auto status = sp_->Load(model_file);
  if (!status.ok())
    throw std::runtime_error(model_file + ": not a SentencePiece model (" + status.ToString() +
                             ")");
  vocab_size_ = sp_->GetPieceSize();
  bos_ = sp_->bos_id();
  eos_ = sp_->eos_id();
  if (eos_ < 0)
    throw std::runtime_error(model_file +
                             ": the model has no </s> (eos) piece, which trident needs as the "
                             "end-of-document token (train it without --eos_id=-1)");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::encode(std::string_view text, std::vector<int>* ids) const {
  std::vector<int> out;
  const auto status = sp_->Encode(text, &out);
  if (!status.ok()) throw std::runtime_error("SentencePiece encode: " + status.ToString());
  ids->insert(ids->end(), out.begin(), out.end());
}

void SentencePieceTokenizer::check_ids(const std::vector<int>& ids) const {
  for (int id : ids)
    if (id < 0 || id >= vocab_size_)
      throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary");
}

// Piece by piece, so that it concatenates (see Tokenizer::decode_bytes): unlike the
// library's Decode, the space that starts a sequence's first word is kept.
std::string SentencePieceTokenizer::decode_bytes(const std::vector<int>& ids) const {
  check_ids(ids);
  std::string out;
  for (int id : ids) {
    if (sp_->IsControl(id) || sp_->IsUnused(id)) continue;
    if (sp_->IsUnknown(id))
      out += kUnknownSurface;
    else if (sp_->IsByte(id))
      out += byte_piece_value(sp_->IdToPiece(id));
    else
      out += piece_bytes(sp_->IdToPiece(id));
  }
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int>& ids) const {
  check_ids(ids);
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece decode: " + status.ToString());
  return sanitize_utf8(text);
}

}  // namespace trident::tokenizer
