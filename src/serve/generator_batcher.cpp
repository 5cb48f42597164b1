#include "serve/generator_batcher.h"

namespace trident::serve {

int GeneratorBatcher::free_slots() const {
  return g_.free_slots();
}

long GeneratorBatcher::add(generation::GenerationRequest r, generation::Generator::Callback cb) {
  return g_.add(std::move(r), std::move(cb));
}

void GeneratorBatcher::cancel(long id) {
  g_.cancel(id);
}

void GeneratorBatcher::step() {
  g_.step();
}

bool GeneratorBatcher::take_result(long id, generation::GenerationResult* out) {
  return g_.take_result(id, out);
}

std::string GeneratorBatcher::validate(const generation::GenerationRequest& r) const {
  return generation::validate(r, g_.model());
}

}  // namespace trident::serve
