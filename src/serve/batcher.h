#pragma once
// What the serving engine needs of a continuous-batching generator. The real one is
// generation::Generator (generator_batcher.h); tests drive the engine with a fake, so the
// queueing, cancellation and shutdown logic is tested without a model.
#include <string>

#include "generation/generator.h"

namespace trident::serve {

class Batcher {
 public:
  virtual ~Batcher() = default;
  virtual int free_slots() const = 0;
  virtual long add(generation::GenerationRequest r, generation::Generator::Callback cb) = 0;
  virtual void cancel(long id) = 0;
  virtual void step() = 0;
  virtual bool take_result(long id, generation::GenerationResult* out) = 0;
  // Empty when r fits the model; safe to call from any thread (reads only the model's shape).
  virtual std::string validate(const generation::GenerationRequest& r) const = 0;
};

}  // namespace trident::serve
