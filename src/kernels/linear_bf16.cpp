#include "kernels/linear_bf16.h"

#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "kernels/bf16_widened.h"

namespace trident::kernels {

namespace {

using dnnl::memory;
enum class Product { kForward, kInput, kWeight };

// Primitive descriptors are built once per (product, shape): that search is the slow part.
struct InnerProductCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::tuple<Product, int, int, int>, dnnl::primitive> primitives;

  static memory::desc plain(int rows, int cols, memory::data_type dt) {
    return memory::desc({rows, cols}, dt, memory::format_tag::ab);
  }

  dnnl::primitive& get(Product product, int rows, int in, int out) {
    auto key = std::make_tuple(product, rows, in, out);
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
    const memory::desc x16 = plain(rows, in, bf16), w16 = plain(out, in, bf16);
    const memory::desc y32 = plain(rows, out, f32), dy16 = plain(rows, out, bf16);
    const memory::desc dx32 = plain(rows, in, f32), dw32 = plain(out, in, f32);
    using dnnl::inner_product_forward, dnnl::prop_kind;
    // The backward descriptors take a forward one as a hint (bf16 output, as in training).
    inner_product_forward::primitive_desc hint(
        inner_product_forward::desc(prop_kind::forward_training, x16, w16, dy16), engine);
    dnnl::primitive p;
    switch (product) {
      case Product::kForward:
        p = inner_product_forward(inner_product_forward::primitive_desc(
            inner_product_forward::desc(prop_kind::forward_training, x16, w16, y32), engine));
        break;
      case Product::kInput:
        p = dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(
            dnnl::inner_product_backward_data::desc(dx32, w16, dy16), engine, hint));
        break;
      case Product::kWeight:
        p = dnnl::inner_product_backward_weights(
            dnnl::inner_product_backward_weights::primitive_desc(
                dnnl::inner_product_backward_weights::desc(x16, dw32, dy16), engine, hint));
        break;
    }
    return primitives.emplace(key, p).first->second;
  }

  void run(Product product, int rows, int in, int out, std::unordered_map<int, memory> args) {
    get(product, rows, in, out).execute(stream, args);
    stream.wait();
  }
};

InnerProductCache& cache() {
  static InnerProductCache c;  // compiled kernels only: no numerical state
  return c;
}

memory bind(int rows, int cols, memory::data_type dt, const void* data) {
  return memory(InnerProductCache::plain(rows, cols, dt), cache().engine, const_cast<void*>(data));
}

constexpr auto kBf16 = memory::data_type::bf16;
constexpr auto kF32 = memory::data_type::f32;

}  // namespace

void linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in, int out) {
  if (rows == 0) return;
  if (!onednn_runs_bf16())
    return gemm_bf16_widened(Trans::kNo, Trans::kYes, rows, out, in, x, in, w, in, 0.f, y, out);
  cache().run(Product::kForward, rows, in, out,
              {{DNNL_ARG_SRC, bind(rows, in, kBf16, x)},
               {DNNL_ARG_WEIGHTS, bind(out, in, kBf16, w)},
               {DNNL_ARG_DST, bind(rows, out, kF32, y)}});
}

void linear_backward_input_bf16(const bf16_t* dy, const bf16_t* w, float* dx, int rows, int in,
                                int out) {
  if (rows == 0) return;
  if (!onednn_runs_bf16())
    return gemm_bf16_widened(Trans::kNo, Trans::kNo, rows, in, out, dy, out, w, in, 0.f, dx, in);
  cache().run(Product::kInput, rows, in, out,
              {{DNNL_ARG_DIFF_DST, bind(rows, out, kBf16, dy)},
               {DNNL_ARG_WEIGHTS, bind(out, in, kBf16, w)},
               {DNNL_ARG_DIFF_SRC, bind(rows, in, kF32, dx)}});
}

void linear_backward_weight_bf16(const bf16_t* dy, const bf16_t* x, float* dw, int rows, int in,
                                 int out) {
  if (rows == 0) return;
  if (!onednn_runs_bf16())
    return gemm_bf16_widened(Trans::kYes, Trans::kNo, out, in, rows, dy, out, x, in, 0.f, dw, in);
  cache().run(Product::kWeight, rows, in, out,
              {{DNNL_ARG_SRC, bind(rows, in, kBf16, x)},
               {DNNL_ARG_DIFF_DST, bind(rows, out, kBf16, dy)},
               {DNNL_ARG_DIFF_WEIGHTS, bind(out, in, kF32, dw)}});
}

}  // namespace trident::kernels
