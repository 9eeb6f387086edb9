/*
 * ext_layernorm.c — layer norm over the last axis, f32:
 *   y[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c]
 * with mean_r and var_r (biased) over the row's `cols` elements, computed in two passes.
 *
 * Each block owns a contiguous run of rows and walks it in double-buffered tiles of
 * `rows_per_tile` rows, like ext_softmax.c. Per tile: a sum per row, a V -> S sync so the
 * scalar unit can read the means, subtract; square into a scratch row and sum, another sync,
 * 1/sqrt(var + eps) on the scalar unit; scale, times gamma, plus beta.
 *
 * Arguments (LP64F):  a0 x: const float* (rows x cols)   a1 gamma: const float* (cols)
 *                     a2 beta: const float* (cols)        a3 y: float* (rows x cols)
 *
 * Tiling (CSR_TILING points at it), 24 bytes:
 *   struct ext_layernorm_tiling {
 *       uint32_t rows, cols;
 *       uint32_t rows_per_tile;  // >= 1
 *       uint32_t pitch;          // UB row pitch in elements: cols rounded up to 8
 *       float eps;
 *       uint32_t reserved;
 *   };
 *   UB use: (2 * rows_per_tile + 3) * pitch * 4 + rows_per_tile * 32 bytes.
 */
#include "npusim.h"
#include "npusim_ext.h"

struct ext_layernorm_tiling {
    npu_u32 rows, cols;
    npu_u32 rows_per_tile;
    npu_u32 pitch;
    float eps;
    npu_u32 reserved;
};

/* 1 / sqrt(v) on the scalar unit. fsqrt.s directly: a libm sqrtf call (for errno) would not
 * link on the NPU. */
static inline float rsqrt(float v) {
    float r;
    __asm__("fsqrt.s %0, %1" : "=f"(r) : "f"(v));
    return 1.0f / r;
}

NPU_KERNEL void ext_layernorm(const float *x, const float *gamma, const float *beta, float *y) {
    const struct ext_layernorm_tiling *t = (const struct ext_layernorm_tiling *)npu_tiling();
    if (t == 0 || t->rows_per_tile == 0 || t->pitch < t->cols || t->pitch % 8 != 0) {
        npu_abort(1);
    }
    npu_u64 cols = t->cols, pitch = t->pitch, rpt = t->rows_per_tile;
    float eps = t->eps;
    float inv_cols = 1.0f / (float)cols;
    npu_u64 row_bytes = pitch * 4;
    npu_u64 slot_bytes = rpt * row_bytes;
    if (2 * slot_bytes + 3 * row_bytes + rpt * 32 > npu_ub_bytes()) {
        npu_abort(2);
    }
    float *ug = NPU_UB_AT(2 * slot_bytes);
    float *ub = NPU_UB_AT(2 * slot_bytes + row_bytes);
    float *sq = NPU_UB_AT(2 * slot_bytes + 2 * row_bytes);
    float *red = NPU_UB_AT(2 * slot_bytes + 3 * row_bytes);
    npu_u64 r0, r1;
    npu_block_range(t->rows, &r0, &r1);
    if (r0 >= r1) {
        return;
    }

    /* gamma and beta once; the first tile's MTE2 -> V flag covers them. */
    npu_copy_gm_to_ub_1d(ug, gamma, 4 * cols);
    npu_copy_gm_to_ub_1d(ub, beta, 4 * cols);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 1);
    npu_u64 i = 0;
    for (npu_u64 r = r0; r < r1; r += rpt, i++) {
        int s = (int)(i & 1);
        npu_u64 rows = r1 - r < rpt ? r1 - r : rpt;
        float *buf = NPU_UB_AT(slot_bytes * s);
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, s);
        npu_copy_gm_to_ub(buf, x + r * cols, rows, 4 * cols, 4 * cols, 4 * pitch);
        npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_V, s);
        npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_V, s);

        for (npu_u64 j = 0; j < rows; j++) {
            npu_vsum(red + 8 * j, buf + j * pitch, cols);
        }
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        for (npu_u64 j = 0; j < rows; j++) {
            float *row = buf + j * pitch;
            npu_vadds(row, row, -(red[8 * j] * inv_cols), cols);
            /* The vector pipe runs in order: the sum reads `sq` after the multiply wrote it,
             * and the next row's multiply writes it after this sum has read it. */
            npu_vmul(sq, row, row, cols);
            npu_vsum(red + 8 * j, sq, cols);
        }
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        for (npu_u64 j = 0; j < rows; j++) {
            float *row = buf + j * pitch;
            npu_vmuls(row, row, rsqrt(red[8 * j] * inv_cols + eps), cols);
            npu_vmul(row, row, ug, cols);
            npu_vadd(row, row, ub, cols);
        }

        npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE3, s);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE3, s);
        npu_copy_ub_to_gm(y + r * cols, buf, rows, 4 * cols, 4 * pitch, 4 * cols);
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, s);
    }
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 1);
}
