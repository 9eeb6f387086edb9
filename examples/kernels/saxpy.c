/*
 * saxpy.c — y = alpha * x + y, the BLAS level-1 classic.
 *
 * Shows a float argument: alpha arrives in fa0 while the integers and pointers take a0..a2.
 */
#include "npusim.h"

/*
 * saxpy(n, alpha, x, y): y[i] = alpha * x[i] + y[i] for i in 0..n.
 *   a0  n:     uint64_t      number of elements
 *   fa0 alpha: float         scale
 *   a1  x:     const float*  input, n floats
 *   a2  y:     float*        input and output, n floats
 */
NPU_KERNEL void saxpy(uint64_t n, float alpha, const float *x, float *y) {
    uint64_t begin, end;
    npu_block_range(n, &begin, &end);
    for (uint64_t i = begin; i < end; i++) {
        y[i] = alpha * x[i] + y[i];
    }
}
