/*
 * ext_matmul.c — C = A x B on the cube unit: A is m x k and B is k x n, both f16 (raw
 * IEEE binary16 bits), C is m x n f32, all row-major and dense in GM.
 *
 * The output is cut into tm x tn tiles, numbered row-major; each block takes a contiguous run
 * of tiles (npu_block_range). For a tile, K is walked in stages of tk1 (GM -> L1 on MTE2) and
 * each stage in steps of tk0 (L1 -> L0A/L0B on MTE1, one cube instruction on M accumulating
 * in L0C). Every level is double-buffered — two L1 stages, two L0A/L0B pairs, and (when
 * l0c_buffers = 2) two L0C tiles so one tile is written out (MTE3) while the next
 * accumulates — so the four pipes overlap. With a_resident = 1 the A panel of a tile row
 * (tm x k) is kept in L1 and loaded once for all the tiles of that row the block owns.
 *
 * Arguments (LP64F):  a0 a: const uint16_t*   a1 b: const uint16_t*   a2 c: float*
 *
 * Tiling (CSR_TILING points at it), 48 bytes:
 *   struct ext_matmul_tiling {
 *       uint32_t m, n, k;
 *       uint32_t tm, tn;       // output tile; multiples of 16
 *       uint32_t tk1;          // K per L1 stage; a multiple of tk0
 *       uint32_t tk0;          // K per cube instruction; a multiple of 16
 *       uint32_t a_resident;   // 0 or 1
 *       uint32_t l0c_buffers;  // 1 or 2
 *       uint32_t reserved[3];
 *   };
 *   Fits when: 2 * tm * tk0 * 2 <= L0A, 2 * tk0 * tn * 2 <= L0B,
 *   l0c_buffers * tm * tn * 4 <= L0C, and
 *   (a_resident ? ceil(k / tk1) : 2) * tm * tk1 * 2 + 2 * tk1 * tn * 2 <= L1.
 */
#include "npusim.h"
#include "npusim_ext.h"

struct ext_matmul_tiling {
    npu_u32 m, n, k;
    npu_u32 tm, tn;
    npu_u32 tk1;
    npu_u32 tk0;
    npu_u32 a_resident;
    npu_u32 l0c_buffers;
    npu_u32 reserved[3];
};

static inline npu_u64 min_u64(npu_u64 a, npu_u64 b) {
    return a < b ? a : b;
}

NPU_KERNEL void ext_matmul_f16(const npu_u16 *a, const npu_u16 *b, float *c) {
    const struct ext_matmul_tiling *t = (const struct ext_matmul_tiling *)npu_tiling();
    if (t == 0 || t->tm == 0 || t->tn == 0 || t->tk0 == 0 || t->tk1 == 0 ||
        t->tm % 16 != 0 || t->tn % 16 != 0 || t->tk0 % 16 != 0 || t->tk1 % t->tk0 != 0 ||
        (t->l0c_buffers != 1 && t->l0c_buffers != 2)) {
        npu_abort(1);
    }
    npu_u64 M = t->m, N = t->n, K = t->k;
    npu_u64 tm = t->tm, tn = t->tn, tk1 = t->tk1, tk0 = t->tk0;
    npu_u64 tiles_n = (N + tn - 1) / tn;
    npu_u64 tiles = ((M + tm - 1) / tm) * tiles_n;
    npu_u64 kstages = (K + tk1 - 1) / tk1;
    int resident = t->a_resident != 0;
    npu_u64 cbufs = t->l0c_buffers;

    /* Buffer layout. */
    npu_u64 a_stage = tm * tk1 * 2, b_stage = tk1 * tn * 2;
    npu_u64 a_slots = resident ? kstages : 2;
    npu_u64 l1_b = a_slots * a_stage;
    npu_u64 l0a_slot = tm * tk0 * 2, l0b_slot = tk0 * tn * 2, l0c_slot = tm * tn * 4;
    if (l1_b + 2 * b_stage > npu_l1_bytes() || 2 * l0a_slot > npu_l0a_bytes() ||
        2 * l0b_slot > npu_l0b_bytes() || cbufs * l0c_slot > npu_l0c_bytes()) {
        npu_abort(2);
    }

    npu_u64 t0, t1;
    npu_block_range(tiles, &t0, &t1);
    if (t0 >= t1 || K == 0) {
        return;
    }

    /* Every slot starts free. */
    npu_set_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, 0);
    npu_set_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, 1);
    npu_set_flag(NPU_PIPE_M, NPU_PIPE_MTE1, 0);
    npu_set_flag(NPU_PIPE_M, NPU_PIPE_MTE1, 1);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_M, 0);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_M, 1);

    npu_u64 stage = 0, step = 0, done_tiles = 0;
    npu_u64 prev_mi = ~(npu_u64)0;
    for (npu_u64 tile = t0; tile < t1; tile++) {
        npu_u64 mi = tile / tiles_n, ni = tile % tiles_n;
        npu_u64 rows = min_u64(tm, M - mi * tm), cols = min_u64(tn, N - ni * tn);
        int load_a = !resident || mi != prev_mi;
        if (resident && load_a && prev_mi != ~(npu_u64)0) {
            /* The resident panel is about to be replaced: MTE1 must be done reading it. */
            npu_set_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, 2);
            npu_wait_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, 2);
        }
        prev_mi = mi;
        npu_u64 cs = done_tiles % cbufs;
        float *l0c = NPU_L0C_AT(cs * l0c_slot);

        for (npu_u64 kc = 0; kc < kstages; kc++, stage++) {
            npu_u64 kk = min_u64(tk1, K - kc * tk1);
            int bs = (int)(stage & 1);
            npu_u64 a_l1 = (resident ? kc : (npu_u64)bs) * a_stage;
            npu_u64 b_l1 = l1_b + (npu_u64)bs * b_stage;
            npu_wait_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, bs);
            if (load_a) {
                npu_copy_gm_to_l1(NPU_L1_AT(a_l1), a + mi * tm * K + kc * tk1, rows, 2 * kk,
                                  2 * K, 2 * tk1);
            }
            npu_copy_gm_to_l1(NPU_L1_AT(b_l1), b + kc * tk1 * N + ni * tn, kk, 2 * cols, 2 * N,
                              2 * tn);
            npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_MTE1, bs);
            npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_MTE1, bs);

            for (npu_u64 ks = 0; ks * tk0 < kk; ks++, step++) {
                npu_u64 k0 = min_u64(tk0, kk - ks * tk0);
                int ls = (int)(step & 1);
                void *l0a = NPU_L0A_AT(ls * l0a_slot);
                void *l0b = NPU_L0B_AT(ls * l0b_slot);
                npu_wait_flag(NPU_PIPE_M, NPU_PIPE_MTE1, ls);
                npu_copy_l1_to_l0a(l0a, NPU_L1_AT(a_l1 + 2 * ks * tk0), rows, 2 * k0, 2 * tk1,
                                   npu_pitch(2 * k0));
                npu_copy_l1_to_l0b(l0b, NPU_L1_AT(b_l1 + 2 * ks * tk0 * tn), k0, 2 * cols,
                                   2 * tn, npu_pitch(2 * cols));
                npu_set_flag(NPU_PIPE_MTE1, NPU_PIPE_M, ls);
                npu_wait_flag(NPU_PIPE_MTE1, NPU_PIPE_M, ls);
                int first = kc == 0 && ks == 0;
                if (first) {
                    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_M, (int)cs);   /* L0C slot written out */
                }
                npu_mmad_f16(l0c, (const npu_u16 *)l0a, (const npu_u16 *)l0b, rows, cols, k0,
                             !first);
                npu_set_flag(NPU_PIPE_M, NPU_PIPE_MTE1, ls);   /* L0A/L0B slot consumed */
            }
            npu_set_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, bs);    /* L1 stage consumed */
        }

        npu_set_flag(NPU_PIPE_M, NPU_PIPE_MTE3, (int)cs);
        npu_wait_flag(NPU_PIPE_M, NPU_PIPE_MTE3, (int)cs);
        npu_copy_l0c_to_gm(c + mi * tm * N + ni * tn, l0c, rows, 4 * cols, npu_pitch(4 * cols),
                           4 * N);
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_M, (int)cs);
        done_tiles++;
    }
    npu_wait_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, 0);
    npu_wait_flag(NPU_PIPE_MTE1, NPU_PIPE_MTE2, 1);
    npu_wait_flag(NPU_PIPE_M, NPU_PIPE_MTE1, 0);
    npu_wait_flag(NPU_PIPE_M, NPU_PIPE_MTE1, 1);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_M, 0);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_M, 1);
}
