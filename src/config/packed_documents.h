#pragma once
// How a sample of several documents, each ended by the end-of-document token, is read
// (Megatron's --reset-position-ids, --reset-attention-mask, --eod-mask-loss): the EOD
// belongs to the document it ends; positions restart after it; no token attends across it;
// and the prediction made at an EOD input is not counted.
namespace trident {

struct PackedDocuments {
  int eod = -1;  // the end-of-document id; -1: none known
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool splits_documents() const { return reset_position_ids || reset_attention_mask; }
};

}  // namespace trident
