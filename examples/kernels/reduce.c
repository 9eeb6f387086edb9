/*
 * reduce.c — a two-pass sum: every block sums its slice into partial[block], then one block
 * sums the partials. The order of additions is fixed, so the result is deterministic.
 */
#include "npusim.h"

/*
 * reduce_sum_f32(x, partial, n): partial[b] = sum of block b's slice of x (npu_block_range).
 *   a0 x:       const float*  input, n floats
 *   a1 partial: float*        output, npu_block_dim() floats, one per block
 *   a2 n:       uint64_t      number of elements
 */
NPU_KERNEL void reduce_sum_f32(const float *x, float *partial, uint64_t n) {
    uint64_t begin, end;
    npu_block_range(n, &begin, &end);
    float sum = 0.0f;
    for (uint64_t i = begin; i < end; i++) {
        sum += x[i];
    }
    partial[npu_block_idx()] = sum;
}

/*
 * reduce_final_f32(partial, out, count): *out = partial[0] + ... + partial[count - 1].
 * Launch with block dim 1; extra blocks do nothing, so the sum is written exactly once.
 *   a0 partial: const float*  the partial sums of reduce_sum_f32
 *   a1 out:     float*        output, one float
 *   a2 count:   uint64_t      number of partial sums
 */
NPU_KERNEL void reduce_final_f32(const float *partial, float *out, uint64_t count) {
    if (npu_block_idx() != 0) {
        return;
    }
    float sum = 0.0f;
    for (uint64_t i = 0; i < count; i++) {
        sum += partial[i];
    }
    *out = sum;
}
