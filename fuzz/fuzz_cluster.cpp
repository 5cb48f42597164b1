// `trident plan --cluster FILE`: the cluster description (cpptoml and every key's rule) on
// arbitrary text. A bad file is answered with std::invalid_argument naming the file, key and
// rule, never another exception or a crash; a file that parses keeps every promise the
// performance model relies on.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_util.h"
#include "planner/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::planner;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Cluster c;
  try {
    c = parse_cluster(text, "fuzz.toml");
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("fuzz.toml", 0) == 0);
    return 0;
  }
  auto positive = [](double x) { return x > 0 && std::isfinite(x); };
  FUZZ_CHECK(c.nodes >= 1 && c.devices_per_node >= 1 && c.num_devices() >= 1);
  FUZZ_CHECK(positive(c.device.peak_tflops) && positive(c.device.memory_gib));
  FUZZ_CHECK(positive(c.intra_node.bandwidth_gbs) && positive(c.inter_node.bandwidth_gbs));
  FUZZ_CHECK(positive(c.intra_node.latency_us) && positive(c.inter_node.latency_us));
  for (size_t i = 0; i < c.gemm.table.size(); ++i) {
    FUZZ_CHECK(positive(c.gemm.table[i].first));
    FUZZ_CHECK(c.gemm.table[i].second > 0 && c.gemm.table[i].second <= 1);
    if (i) FUZZ_CHECK(c.gemm.table[i - 1].first < c.gemm.table[i].first);
  }
  // The efficiency the model divides by is never 0, infinite or above 1.
  for (double flops : {1.0, 1e9, 1e15}) {
    const double e = c.gemm.at(flops);
    FUZZ_CHECK(e > 0 && e <= 1 && std::isfinite(e));
  }
  // What parses also round-trips.
  Cluster back = parse_cluster(cluster_to_toml(c), "again.toml");
  FUZZ_CHECK(back.num_devices() == c.num_devices() &&
             back.gemm.table.size() == c.gemm.table.size());
  return 0;
}
