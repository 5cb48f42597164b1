#include "engine/tied_embedding.h"

namespace trident::engine {

void sync_tied_embedding(std::vector<GPTModel*>& chunks, comm::Communicator& pipeline) {
  const int p = pipeline.size();
  if (p == 1) return;
  const int s = pipeline.rank();
  GPTModel* holder = nullptr;
  if (s == 0 && chunks.front()->placement().pre_process) holder = chunks.front();
  if (s == p - 1 && chunks.back()->placement().post_process) holder = chunks.back();
  // An untied output layer has a gradient of its own: nothing to sum across the ends.
  if (!holder || !holder->config().tied_output()) return;
  if (!holder->parameters().has_gradients()) return;  // LoRA: the embedding is frozen
  ParamRef word = holder->parameters().get("embedding.word_embeddings.weight");
  std::vector<float> theirs(word.numel);
  const int peer = s == 0 ? p - 1 : 0, tag = 1 << 30;
  auto request = pipeline.isend(word.grad, word.numel, peer, tag);
  pipeline.recv(theirs.data(), word.numel, peer, tag);
  request->wait();
  for (long i = 0; i < word.numel; ++i) word.grad[i] += theirs[i];
}

}  // namespace trident::engine
