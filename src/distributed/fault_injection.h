#pragma once
// Testing: what a rank told to fail at an iteration does (--inject-fault-kind). error throws
// (the job must end cleanly); stop sends the process SIGSTOP (a frozen rank); spin loops
// forever without communicating (a rank stuck in its own code). The last two are hangs the
// watchdog (--distributed-timeout-minutes) must end with a diagnosis.
#include <string>

namespace trident::distributed {

void inject_fault(const std::string& kind, long iteration);

}  // namespace trident::distributed
