/*
 * ext_vadd.c — z = x + y (f32) on the vector unit, written the way Ascend C kernels are:
 * tiles move GM -> UB on MTE2, the vector unit adds, MTE3 moves the sum back, and flags order
 * the three pipes.
 *
 * Entry points with the same arguments and tiling:
 *   ext_vadd_single — one tile in flight: load, add, store, and only then the next tile.
 *   ext_vadd_double — two UB slots: the next tile loads while this one adds and the previous
 *                     one stores (ping-pong double buffering).
 *   ext_vadd_missing_wait — deliberately wrong: ext_vadd_single without the wait between the
 *                     loads and the add, so the add reads whatever UB held before (a test
 *                     shows the stale result; do not copy it).
 *
 * Arguments (LP64F):  a0 x: const float*   a1 y: const float*   a2 z: float*
 *
 * Tiling (CSR_TILING points at it), 16 bytes:
 *   struct ext_vadd_tiling {
 *       uint64_t total;   // elements in x, y and z
 *       uint32_t tile;    // elements per tile, a multiple of 8;
 *                         //   single: 3 * 4 * tile <= UB bytes, double: 6 * 4 * tile <= UB
 *       uint32_t reserved;
 *   };
 * Blocks split the elements into contiguous runs of whole 8-element groups (npu_block_range).
 */
#include "npusim.h"
#include "npusim_ext.h"

struct ext_vadd_tiling {
    npu_u64 total;
    npu_u32 tile;
    npu_u32 reserved;
};

/* This block's element range, in groups of 8 so each block starts 32-byte aligned in GM. */
static inline void vadd_range(npu_u64 total, npu_u64 *begin, npu_u64 *end) {
    npu_u64 g0, g1;
    npu_block_range((total + 7) / 8, &g0, &g1);
    *begin = g0 * 8 < total ? g0 * 8 : total;
    *end = g1 * 8 < total ? g1 * 8 : total;
}

static inline const struct ext_vadd_tiling *vadd_tiling(npu_u64 buffers) {
    const struct ext_vadd_tiling *t = (const struct ext_vadd_tiling *)npu_tiling();
    if (t == 0 || t->tile == 0 || t->tile % 8 != 0) {
        npu_abort(1);
    }
    if (3 * buffers * 4 * (npu_u64)t->tile > npu_ub_bytes()) {
        npu_abort(2);
    }
    return t;
}

NPU_KERNEL void ext_vadd_single(const float *x, const float *y, float *z) {
    const struct ext_vadd_tiling *t = vadd_tiling(1);
    npu_u64 begin, end;
    vadd_range(t->total, &begin, &end);
    npu_u64 tile = t->tile;
    float *ux = NPU_UB;
    float *uy = NPU_UB_AT(4 * tile);
    float *uz = NPU_UB_AT(8 * tile);
    for (npu_u64 off = begin; off < end; off += tile) {
        npu_u64 len = end - off < tile ? end - off : tile;
        npu_copy_gm_to_ub_1d(ux, x + off, 4 * len);
        npu_copy_gm_to_ub_1d(uy, y + off, 4 * len);
        npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_V, 0);
        npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_V, 0);
        npu_vadd(uz, ux, uy, len);
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE3, 0);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE3, 0);
        npu_copy_ub_to_gm_1d(z + off, uz, 4 * len);
        /* The tile is finished (stored) before the next one starts loading. */
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
    }
}

NPU_KERNEL void ext_vadd_double(const float *x, const float *y, float *z) {
    const struct ext_vadd_tiling *t = vadd_tiling(2);
    npu_u64 begin, end;
    vadd_range(t->total, &begin, &end);
    npu_u64 tile = t->tile;
    /* Slot s: x at 12*tile*s, y at +4*tile, z at +8*tile (bytes). */
    /* Both slots start free: the vector unit is not reading x/y, MTE3 is not reading z. */
    npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE2, 0);
    npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE2, 1);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_V, 0);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_V, 1);
    npu_u64 i = 0;
    for (npu_u64 off = begin; off < end; off += tile, i++) {
        int s = (int)(i & 1);
        npu_u64 len = end - off < tile ? end - off : tile;
        float *ux = NPU_UB_AT(12 * tile * s);
        float *uy = NPU_UB_AT(12 * tile * s + 4 * tile);
        float *uz = NPU_UB_AT(12 * tile * s + 8 * tile);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE2, s);   /* x[s], y[s] free */
        npu_copy_gm_to_ub_1d(ux, x + off, 4 * len);
        npu_copy_gm_to_ub_1d(uy, y + off, 4 * len);
        npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_V, s);
        npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_V, s);   /* x[s], y[s] loaded */
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_V, s);   /* z[s] stored out */
        npu_vadd(uz, ux, uy, len);
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE2, s);    /* x[s], y[s] consumed */
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE3, s);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE3, s);   /* z[s] computed */
        npu_copy_ub_to_gm_1d(z + off, uz, 4 * len);
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_V, s);    /* z[s] consumed */
    }
    /* Consume the flags still set so every set has its wait. */
    npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE2, 0);
    npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE2, 1);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_V, 0);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_V, 1);
}

NPU_KERNEL void ext_vadd_missing_wait(const float *x, const float *y, float *z) {
    const struct ext_vadd_tiling *t = vadd_tiling(1);
    npu_u64 begin, end;
    vadd_range(t->total, &begin, &end);
    npu_u64 tile = t->tile;
    float *ux = NPU_UB;
    float *uy = NPU_UB_AT(4 * tile);
    float *uz = NPU_UB_AT(8 * tile);
    for (npu_u64 off = begin; off < end; off += tile) {
        npu_u64 len = end - off < tile ? end - off : tile;
        npu_copy_gm_to_ub_1d(ux, x + off, 4 * len);
        npu_copy_gm_to_ub_1d(uy, y + off, 4 * len);
        /* BUG (on purpose): no set_flag / wait_flag(MTE2 -> V) here. */
        npu_vadd(uz, ux, uy, len);
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_MTE3, 0);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_MTE3, 0);
        npu_copy_ub_to_gm_1d(z + off, uz, 4 * len);
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_MTE2, 0);
    }
}
