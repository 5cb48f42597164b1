#pragma once
// The engine's Batcher over the real continuous-batching Generator (a separate header, so
// code that only knows Batcher does not link the model).
#include "serve/batcher.h"

namespace trident::serve {

class GeneratorBatcher final : public Batcher {
 public:
  explicit GeneratorBatcher(generation::Generator& g) : g_(g) {}
  int free_slots() const override;
  long add(generation::GenerationRequest r, generation::Generator::Callback cb) override;
  void cancel(long id) override;
  void step() override;
  bool take_result(long id, generation::GenerationResult* out) override;
  std::string validate(const generation::GenerationRequest& r) const override;

 private:
  generation::Generator& g_;
};

}  // namespace trident::serve
