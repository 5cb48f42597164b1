#pragma once
// Grouped-query attention on the multi-head kernels: the query projection [rows, heads * d]
// and the key/value projection [rows, k of G groups | v of G groups] are expanded into
// attention's [rows, 3, heads, d] layout, each query head reading its group's key and value.
// Backward sums the heads' key/value gradients back into their group. Training and
// generation no longer expand (attention reads the groups in place through QkvLayout, see
// attention.h); this is the unfused reference the tests hold that path to.
namespace trident::kernels {

struct QueryGroups {
  int heads = 0;            // query heads held (this rank's)
  int groups = 0;           // key/value groups in the kv tensor (held or replicated)
  int heads_per_group = 1;  // of the whole model: heads / G
  int first_group = 0;      // the kv tensor's group of this rank's first head
  int head_dim = 0;
  int group_of(int head) const { return first_group + head / heads_per_group; }
};

// q and kv rows `q_stride` and `kv_stride` floats apart: side by side in one buffer when
// one GEMM formed both ([rows, q | kv]).
void expand_grouped_qkv(const float* q, long q_stride, const float* kv, long kv_stride, float* qkv,
                        long rows, const QueryGroups& g);
// dq [rows, heads * d] and dkv [rows, 2 * groups * d] (groups no head reads get 0), with
// row strides as above.
void reduce_grouped_qkv_grad(const float* dqkv, float* dq, long q_stride, float* dkv,
                             long kv_stride, long rows, const QueryGroups& g);

// Separate, contiguous q and kv.
inline long grouped_q_floats(const QueryGroups& g) {
  return (long)g.heads * g.head_dim;
}
inline long grouped_kv_floats(const QueryGroups& g) {
  return 2L * g.groups * g.head_dim;
}
inline void expand_grouped_qkv(const float* q, const float* kv, float* qkv, long rows,
                               const QueryGroups& g) {
  expand_grouped_qkv(q, grouped_q_floats(g), kv, grouped_kv_floats(g), qkv, rows, g);
}
inline void reduce_grouped_qkv_grad(const float* dqkv, float* dq, float* dkv, long rows,
                                    const QueryGroups& g) {
  reduce_grouped_qkv_grad(dqkv, dq, grouped_q_floats(g), dkv, grouped_kv_floats(g), rows, g);
}

}  // namespace trident::kernels
