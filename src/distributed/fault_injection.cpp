#include "distributed/fault_injection.h"

#include <csignal>
#include <stdexcept>

namespace trident::distributed {

void inject_fault(const std::string& kind, long iteration) {
  const std::string where = "injected fault at iteration " + std::to_string(iteration);
  if (kind == "stop") {
    std::raise(SIGSTOP);
    return;  // continued (SIGCONT): the run goes on
  }
  if (kind == "spin") {
    volatile unsigned long spins = 0;  // a side effect: an empty endless loop is undefined
    while (true) spins = spins + 1;
  }
  throw std::runtime_error(where);
}

}  // namespace trident::distributed
