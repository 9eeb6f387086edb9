/*
 * vector_add.c — element-wise addition, the "hello world" of kernels.
 *
 * Each block adds its own contiguous slice (npu_block_range), so any block dim works.
 */
#include "npusim.h"

/*
 * vadd_f32(a, b, c, n): c[i] = a[i] + b[i] for i in 0..n.
 *   a0 a: const float*  first input, n floats
 *   a1 b: const float*  second input, n floats
 *   a2 c: float*        output, n floats (may alias a or b)
 *   a3 n: uint64_t      number of elements
 */
NPU_KERNEL void vadd_f32(const float *a, const float *b, float *c, uint64_t n) {
    uint64_t begin, end;
    npu_block_range(n, &begin, &end);
    for (uint64_t i = begin; i < end; i++) {
        c[i] = a[i] + b[i];
    }
}
