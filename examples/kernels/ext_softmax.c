/*
 * ext_softmax.c — row softmax, y[r][c] = exp(x[r][c] - max_r) / sum_r, f32.
 *
 * Each block owns a contiguous run of rows (npu_block_range) and walks it in tiles of
 * `rows_per_tile` rows, double-buffered: the next tile loads (MTE2) while this one computes
 * (V) and the previous one stores (MTE3). Per tile: a max reduction per row, one V -> S sync
 * for the scalar unit to read the maxima, subtract and exp, a sum per row, one more sync, scale
 * by 1/sum. Rows must fit in half of UB (cols <= about 24K).
 *
 * Arguments (LP64F):  a0 x: const float* (rows x cols)   a1 y: float* (rows x cols)
 *
 * Tiling (CSR_TILING points at it), 24 bytes:
 *   struct ext_softmax_tiling {
 *       uint32_t rows, cols;
 *       uint32_t rows_per_tile;  // >= 1
 *       uint32_t pitch;          // UB row pitch in elements: cols rounded up to 8
 *       uint32_t reserved[2];
 *   };
 *   UB use: 2 * rows_per_tile * pitch * 4 + rows_per_tile * 32 bytes.
 */
#include "npusim.h"
#include "npusim_ext.h"

struct ext_softmax_tiling {
    npu_u32 rows, cols;
    npu_u32 rows_per_tile;
    npu_u32 pitch;
    npu_u32 reserved[2];
};

NPU_KERNEL void ext_softmax(const float *x, float *y) {
    const struct ext_softmax_tiling *t = (const struct ext_softmax_tiling *)npu_tiling();
    if (t == 0 || t->rows_per_tile == 0 || t->pitch < t->cols || t->pitch % 8 != 0) {
        npu_abort(1);
    }
    npu_u64 cols = t->cols, pitch = t->pitch, rpt = t->rows_per_tile;
    npu_u64 slot_bytes = rpt * pitch * 4;
    if (2 * slot_bytes + rpt * 32 > npu_ub_bytes()) {
        npu_abort(2);
    }
    /* Per-row reduction results, one 32-byte slot each, after the two data slots. */
    float *red = NPU_UB_AT(2 * slot_bytes);
    npu_u64 r0, r1;
    npu_block_range(t->rows, &r0, &r1);

    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 1);
    npu_u64 i = 0;
    for (npu_u64 r = r0; r < r1; r += rpt, i++) {
        int s = (int)(i & 1);
        npu_u64 rows = r1 - r < rpt ? r1 - r : rpt;
        float *buf = NPU_UB_AT(slot_bytes * s);
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, s);   /* slot s stored out */
        npu_copy_gm_to_ub(buf, x + r * cols, rows, 4 * cols, 4 * cols, 4 * pitch);
        npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_V, s);
        npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_V, s);

        for (npu_u64 j = 0; j < rows; j++) {
            npu_vrmax(red + 8 * j, buf + j * pitch, cols);
        }
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        for (npu_u64 j = 0; j < rows; j++) {
            npu_vadds(buf + j * pitch, buf + j * pitch, -red[8 * j], cols);
        }
        npu_vexp(buf, buf, rows * pitch);
        for (npu_u64 j = 0; j < rows; j++) {
            npu_vsum(red + 8 * j, buf + j * pitch, cols);
        }
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, 0);
        for (npu_u64 j = 0; j < rows; j++) {
            npu_vmuls(buf + j * pitch, buf + j * pitch, 1.0f / red[8 * j], cols);
        }

        npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE3, s);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE3, s);
        npu_copy_ub_to_gm(y + r * cols, buf, rows, 4 * cols, 4 * pitch, 4 * cols);
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, s);
    }
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 1);
}
