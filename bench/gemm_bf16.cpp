// What oneDNN (Debian's libdnnl) reaches for bf16 x bf16 -> fp32 matrix products on this
// CPU (avx512_bf16), next to fp32 sgemm, on gpt2-small layer shapes: the number issue 8's
// bf16 path will be planned against.
#include <chrono>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double measure(dnnl::engine& eng, dnnl::stream& strm, int m, int n, int k,
               dnnl::memory::data_type dt) {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a({m, k}, dt, tag::ab), b({k, n}, dt, tag::ab);
  dnnl::memory::desc c({m, n}, dnnl::memory::data_type::f32, tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), eng);  // oneDNN 2.x API
  dnnl::memory A(a, eng), B(b, eng), C(c, eng);
  dnnl::matmul mm(pd);
  auto run = [&] {
    mm.execute(strm, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
    strm.wait();
  };
  run();
  double start = seconds_now();
  int reps = 0;
  while (seconds_now() - start < 0.5 || reps < 3) run(), ++reps;
  return 2.0 * m * n * k * reps / (seconds_now() - start) / 1e9;
}

}  // namespace

int main() {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  struct Shape {
    const char* what;
    int m, n, k;
  } shapes[] = {{"qkv", 1024, 2304, 768},
                {"fc1", 1024, 3072, 768},
                {"fc2", 1024, 768, 3072},
                {"logits", 1024, 50304, 768},
                {"square", 2048, 2048, 2048}};
  std::printf("%-8s %6s %6s %6s %10s %10s %7s\n", "shape", "M", "N", "K", "fp32 GF/s", "bf16 GF/s",
              "ratio");
  for (const Shape& s : shapes) {
    double f32 = measure(eng, strm, s.m, s.n, s.k, dnnl::memory::data_type::f32);
    double bf16 = measure(eng, strm, s.m, s.n, s.k, dnnl::memory::data_type::bf16);
    std::printf("%-8s %6d %6d %6d %10.1f %10.1f %7.2f\n", s.what, s.m, s.n, s.k, f32, bf16,
                bf16 / f32);
  }
  return 0;
}
