/*
 * npusim_ext.h — the NPU extension of the kernel SDK: the AI core's local buffers, data
 * movers, vector and cube units, and the flags that order them. docs/isa.md is the reference;
 * device/src/core/npu/ is the implementation, and device/src/abi.rs the numbers (when they
 * disagree, abi.rs is right).
 *
 * Self-contained: include it on its own or after npusim.h (which gives block index / dim,
 * tiling access and printing). Freestanding: no libc, no <stdint.h> needed.
 *
 * Every instruction is an R4-type word in a custom major opcode, emitted with `.insn r4` /
 * `.insn r` and numeric opcodes (accepted by clang from version 14 on). All operands are
 * integer registers; no instruction writes one.
 *
 * The model in five lines:
 *  - Local buffers: UB (vector operands; the only one scalar code may load from / store to),
 *    L1 (cube staging), L0A / L0B (cube operands), L0C (cube f32 accumulator). Every buffer
 *    address an instruction names, and every local row stride, is a multiple of 32 bytes.
 *  - Pipes: S (scalar), V (vector), M (cube), MTE1 (L1 -> L0A/L0B), MTE2 (GM -> L1/UB),
 *    MTE3 (UB/L0C -> GM). Each runs its instructions in order; different pipes run at once.
 *  - An instruction reads its sources when it starts and its results appear when it is done.
 *    Nothing orders two pipes except flags: npu_set_flag(SRC, DST, ev) after the producer,
 *    npu_wait_flag(SRC, DST, ev) before the consumer. Forget one and the consumer reads stale
 *    (or clobbered) data, as on hardware. Each set must be issued before the wait it releases.
 *  - Scalar code reading a result (e.g. a reduction in UB) waits with DST = NPU_PIPE_S.
 *  - npu_pipe_barrier(p): later instructions of pipe p wait for all earlier ones;
 *    NPU_PIPE_ALL drains everything and stalls the scalar unit until then. npu_sync_all()
 *    is the same across the blocks of a launch.
 */
#ifndef NPUSIM_EXT_H
#define NPUSIM_EXT_H

#if !defined(__riscv) || __riscv_xlen != 64
#error "npusim_ext.h is for the NPU's RV64 core: compile with --target=riscv64-unknown-elf"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef __UINT64_TYPE__ npu_u64;
typedef __UINT32_TYPE__ npu_u32;
typedef __UINT16_TYPE__ npu_u16;

/* ---- Local buffers (abi.rs: UB_BASE ...) ------------------------------------------------ */

#define NPU_UB_BASE 0x21000000UL
#define NPU_L1_BASE 0x22000000UL
#define NPU_L0A_BASE 0x23000000UL
#define NPU_L0B_BASE 0x24000000UL
#define NPU_L0C_BASE 0x25000000UL
/* The bias table (BT): f32 bias rows a cube instruction can start C from (1 KiB). */
#define NPU_BT_BASE 0x26000000UL
/* Alignment of every local-buffer address and local row stride, in bytes. */
#define NPU_LOCAL_ALIGN 32UL

/* Typed base pointers. UB and L0C hold f32 here; cast as needed. */
#define NPU_UB ((float *)NPU_UB_BASE)
#define NPU_L1 ((void *)NPU_L1_BASE)
#define NPU_L0A ((void *)NPU_L0A_BASE)
#define NPU_L0B ((void *)NPU_L0B_BASE)
#define NPU_L0C ((float *)NPU_L0C_BASE)

/* The address `off` bytes into a buffer, as a typed pointer. */
#define NPU_UB_AT(off) ((float *)(NPU_UB_BASE + (npu_u64)(off)))
#define NPU_L1_AT(off) ((void *)(NPU_L1_BASE + (npu_u64)(off)))
#define NPU_L0A_AT(off) ((void *)(NPU_L0A_BASE + (npu_u64)(off)))
#define NPU_L0B_AT(off) ((void *)(NPU_L0B_BASE + (npu_u64)(off)))
#define NPU_L0C_AT(off) ((float *)(NPU_L0C_BASE + (npu_u64)(off)))
#define NPU_BT_AT(off) ((float *)(NPU_BT_BASE + (npu_u64)(off)))

/* `bytes` rounded up to the local alignment: the row pitch of a cube operand. */
static inline npu_u64 npu_pitch(npu_u64 bytes) {
    return (bytes + NPU_LOCAL_ALIGN - 1) & ~(NPU_LOCAL_ALIGN - 1);
}

/* Buffer sizes of this core, from read-only CSRs (abi.rs: CSR_UB_BYTES ...). */
#define NPU__CSR_READ(csr)                                                                     \
    ({                                                                                         \
        npu_u64 npu__v;                                                                        \
        __asm__ volatile("csrr %0, " #csr : "=r"(npu__v));                                     \
        npu__v;                                                                                \
    })
static inline npu_u64 npu_ub_bytes(void) { return NPU__CSR_READ(0xCC4); }
static inline npu_u64 npu_l1_bytes(void) { return NPU__CSR_READ(0xCC5); }
static inline npu_u64 npu_l0a_bytes(void) { return NPU__CSR_READ(0xCC6); }
static inline npu_u64 npu_l0b_bytes(void) { return NPU__CSR_READ(0xCC7); }
static inline npu_u64 npu_l0c_bytes(void) { return NPU__CSR_READ(0xCC8); }
static inline npu_u64 npu_bt_bytes(void) { return NPU__CSR_READ(0xCC9); }

/* ---- Encoding helpers ------------------------------------------------------------------- */

/* `.insn r4 OPCODE, FUNCT3, FUNCT2, rd, rs1, rs2, rs3` with four register operands. The
 * "memory" clobber keeps the compiler from moving scalar loads and stores across it. */
#define NPU__R4(opcode, f3, f2, d, a, b, c)                                                    \
    __asm__ volatile(".insn r4 " #opcode ", " #f3 ", " #f2 ", %0, %1, %2, %3"                  \
                     :                                                                         \
                     : "r"((npu_u64)(d)), "r"((npu_u64)(a)), "r"((npu_u64)(b)),                \
                       "r"((npu_u64)(c))                                                       \
                     : "memory")
#define NPU__SYNC(f3, v)                                                                       \
    __asm__ volatile(".insn r 0x7b, " #f3 ", 0, x0, %0, x0" : : "r"((npu_u64)(v)) : "memory")

/* The bits of an f32, for scalar operands (passed in an integer register). */
static inline npu_u64 npu__f32_bits(float f) {
    union {
        float f;
        npu_u32 u;
    } v;
    v.f = f;
    return v.u;
}

/* ---- Synchronization (custom-3, 0x7b) ---------------------------------------------------- */

#define NPU_PIPE_S 0
#define NPU_PIPE_V 1
#define NPU_PIPE_M 2
#define NPU_PIPE_MTE1 3
#define NPU_PIPE_MTE2 4
#define NPU_PIPE_MTE3 5
#define NPU_PIPE_ALL 6
/* Event ids per (src, dst) pair: 0 .. NPU_EVENTS-1. */
#define NPU_EVENTS 8

#define NPU__FLAG(src, dst, ev) ((npu_u64)(src) | ((npu_u64)(dst) << 8) | ((npu_u64)(ev) << 16))

/* Releases flag (src, dst, ev) once everything issued to `src` so far has completed. */
static inline void npu_set_flag(int src, int dst, int ev) { NPU__SYNC(0, NPU__FLAG(src, dst, ev)); }
/* Holds `dst` (or the scalar unit, for NPU_PIPE_S) until the oldest unconsumed set of the flag
 * is released, and consumes it. A wait with no earlier set faults. */
static inline void npu_wait_flag(int src, int dst, int ev) { NPU__SYNC(1, NPU__FLAG(src, dst, ev)); }
/* Later instructions of `pipe` wait for all earlier ones; NPU_PIPE_ALL also stalls the
 * scalar unit until every pipe is idle. */
static inline void npu_pipe_barrier(int pipe) { NPU__SYNC(2, pipe); }
/* A barrier across the blocks of the launch: every pipe drains, then the block waits until
 * `blocks` of them (0: every block of the launch) have reached an npu_sync_all, and all go on
 * together. Each waiting block needs a core of its own (blockDim no more than the launch's
 * cores); a barrier some block never reaches, or a negative count, fails the launch. */
static inline void npu_sync_all(int blocks) { NPU__SYNC(3, blocks); }
/* Cross-core flags (0..15), counters between the blocks of a launch. npu_cross_set counts one
 * set, released once everything issued to `pipe` has completed, for the blocks `mode` names:
 * 0 every block of the same kind (released when all of them have set it), 1 the vector blocks
 * of this AI core (when both have), 2 from the cube block to each vector block of its AI core,
 * or from the vector blocks to the cube block (when both have). npu_cross_wait holds the
 * block until a set of `flag` is counted for it and consumes it; a wait no set can ever
 * release fails the launch. A counter holds 15 unconsumed sets. */
static inline void npu_cross_set(int mode, int pipe, int flag) {
    NPU__SYNC(4, (npu_u64)(flag) | ((npu_u64)(mode) << 8) | ((npu_u64)(pipe) << 16));
}
static inline void npu_cross_wait(int flag) { NPU__SYNC(5, flag); }

/* ---- Data movement (custom-1, 0x2b) ------------------------------------------------------ */
/*
 * Every copy moves `rows` rows of `row_bytes` bytes; row r is read at src + r * src_stride and
 * written at dst + r * dst_stride. On the local side the address and (for rows > 1) the stride
 * are multiples of 32 and the stride is at least row_bytes; global-memory addresses and strides
 * are free. Cost on the pipe: setup + rows * pitch(row_bytes) / bandwidth, plus the global
 * memory latency before the data lands (docs/isa.md).
 */
#define NPU__SHAPE(rows, row_bytes) (((npu_u64)(rows) << 32) | (npu_u32)(row_bytes))
#define NPU__STRIDES(src, dst) (((npu_u64)(src) << 32) | (npu_u32)(dst))

/* The repeat register (CSR 0x800, docs/isa.md "Data movement"): the next copy instruction
 * (only that one) moves its rows x row_bytes rectangle `reps` times (1..65535), the i-th from
 * src + i * src_rep to dst + i * dst_rep (bytes, each below 2^24; multiples of 32 on a local
 * side) — an ND -> NZ conversion or a panel of fractal rows in one instruction. */
#define NPU_CSR_MOVE_REPEAT "0x800"
static inline void npu_move_repeat(npu_u32 reps, npu_u32 src_rep, npu_u32 dst_rep) {
    npu_u64 v = (npu_u64)(reps & 0xffff) | ((npu_u64)(src_rep & 0xffffff) << 16) |
                ((npu_u64)(dst_rep & 0xffffff) << 40);
    __asm__ volatile("csrw " NPU_CSR_MOVE_REPEAT ", %0" : : "r"(v));
}

/* GM -> UB (MTE2). */
static inline void npu_copy_gm_to_ub(void *ub_dst, const void *gm_src, npu_u32 rows,
                                     npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 0, 0, ub_dst, gm_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* GM -> L1 (MTE2). */
static inline void npu_copy_gm_to_l1(void *l1_dst, const void *gm_src, npu_u32 rows,
                                     npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 1, 0, l1_dst, gm_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* UB -> GM (MTE3). */
static inline void npu_copy_ub_to_gm(void *gm_dst, const void *ub_src, npu_u32 rows,
                                     npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 2, 0, gm_dst, ub_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L1 -> L0A (MTE1). */
static inline void npu_copy_l1_to_l0a(void *l0a_dst, const void *l1_src, npu_u32 rows,
                                      npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 3, 0, l0a_dst, l1_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L1 -> L0B (MTE1). */
static inline void npu_copy_l1_to_l0b(void *l0b_dst, const void *l1_src, npu_u32 rows,
                                      npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 4, 0, l0b_dst, l1_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L0C -> GM, f32 (MTE3). */
static inline void npu_copy_l0c_to_gm(void *gm_dst, const void *l0c_src, npu_u32 rows,
                                      npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 5, 0, gm_dst, l0c_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L1 -> L0A / L0B with every row one 16 x 16 fractal of 2-byte elements (row_bytes = 512),
 * written transposed (MTE1; copy mode 1). */
static inline void npu_copy_l1_to_l0a_t(void *l0a_dst, const void *l1_src, npu_u32 rows,
                                        npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 3, 1, l0a_dst, l1_src, NPU__SHAPE(rows, 512),
            NPU__STRIDES(src_stride, dst_stride));
}
static inline void npu_copy_l1_to_l0b_t(void *l0b_dst, const void *l1_src, npu_u32 rows,
                                        npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 4, 1, l0b_dst, l1_src, NPU__SHAPE(rows, 512),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L0C -> GM converting f32 to f16 (round to nearest even): row_bytes counts the f32 source
 * bytes, each row lands as row_bytes / 2 bytes (MTE3; copy mode 1). */
static inline void npu_copy_l0c_to_gm_f16(void *gm_dst, const void *l0c_src, npu_u32 rows,
                                          npu_u32 row_bytes, npu_u32 src_stride,
                                          npu_u32 dst_stride) {
    NPU__R4(0x2b, 5, 1, gm_dst, l0c_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L0C -> GM adding each f32 to what GM holds, rounded once to nearest even (MTE3; copy mode 2:
 * the fixpipe's atomic add). */
static inline void npu_copy_l0c_to_gm_add_f32(void *gm_dst, const void *l0c_src, npu_u32 rows,
                                              npu_u32 row_bytes, npu_u32 src_stride,
                                              npu_u32 dst_stride) {
    NPU__R4(0x2b, 5, 2, gm_dst, l0c_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* UB -> GM adding each element (f32, f16 or i32) to what GM holds (MTE3; copy modes 1, 2, 3):
 * floats rounded once to nearest even, i32 wrapping. */
#define NPU__UB_TO_GM_ADD(name, f2)                                                              \
    static inline void name(void *gm_dst, const void *ub_src, npu_u32 rows, npu_u32 row_bytes,  \
                            npu_u32 src_stride, npu_u32 dst_stride) {                           \
        NPU__R4(0x2b, 2, f2, gm_dst, ub_src, NPU__SHAPE(rows, row_bytes),                       \
                NPU__STRIDES(src_stride, dst_stride));                                          \
    }
NPU__UB_TO_GM_ADD(npu_copy_ub_to_gm_add_f32, 1)
NPU__UB_TO_GM_ADD(npu_copy_ub_to_gm_add_f16, 2)
NPU__UB_TO_GM_ADD(npu_copy_ub_to_gm_add_i32, 3)
#undef NPU__UB_TO_GM_ADD
/* L0C -> UB (MTE3, the fixpipe into the vector side): f32 rows as they are, or (_f16)
 * converted to f16 (round to nearest even; row_bytes counts the f32 source bytes). */
static inline void npu_copy_l0c_to_ub(void *ub_dst, const void *l0c_src, npu_u32 rows,
                                      npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 7, 0, ub_dst, l0c_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
static inline void npu_copy_l0c_to_ub_f16(void *ub_dst, const void *l0c_src, npu_u32 rows,
                                          npu_u32 row_bytes, npu_u32 src_stride,
                                          npu_u32 dst_stride) {
    NPU__R4(0x2b, 7, 1, ub_dst, l0c_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* L1 -> BT (MTE1): f32 rows as they are, or (_f16) f16 rows widened to f32 (row_bytes counts
 * the f16 source bytes; each row lands as 2 * row_bytes). */
static inline void npu_copy_l1_to_bt(float *bt_dst, const void *l1_src, npu_u32 rows,
                                     npu_u32 row_bytes, npu_u32 src_stride, npu_u32 dst_stride) {
    NPU__R4(0x2b, 6, 0, bt_dst, l1_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
static inline void npu_copy_l1_to_bt_f16(float *bt_dst, const void *l1_src, npu_u32 rows,
                                         npu_u32 row_bytes, npu_u32 src_stride,
                                         npu_u32 dst_stride) {
    NPU__R4(0x2b, 6, 1, bt_dst, l1_src, NPU__SHAPE(rows, row_bytes),
            NPU__STRIDES(src_stride, dst_stride));
}
/* Contiguous forms: one row of `bytes`. */
static inline void npu_copy_gm_to_ub_1d(void *ub_dst, const void *gm_src, npu_u32 bytes) {
    npu_copy_gm_to_ub(ub_dst, gm_src, 1, bytes, bytes, bytes);
}
static inline void npu_copy_ub_to_gm_1d(void *gm_dst, const void *ub_src, npu_u32 bytes) {
    npu_copy_ub_to_gm(gm_dst, ub_src, 1, bytes, bytes, bytes);
}

/* ---- Vector unit (custom-0, 0x0b) on UB --------------------------------------------------- */
/*
 * All pointers are UB addresses, 32-byte aligned; n is the element count (any value, the
 * operands must fit in UB). dst may equal a source. Cost on V: 4 + ceil(n / 128) cycles
 * (reductions 7 more) with the default preset.
 */
#define NPU__VEC(f3, f2, d, a, b, n) NPU__R4(0x0b, f3, f2, d, a, b, n)

/* Element-wise, f32: dst[i] = a[i] op b[i]. */
static inline void npu_vadd(float *dst, const float *a, const float *b, npu_u64 n) { NPU__VEC(0, 0, dst, a, b, n); }
static inline void npu_vsub(float *dst, const float *a, const float *b, npu_u64 n) { NPU__VEC(1, 0, dst, a, b, n); }
static inline void npu_vmul(float *dst, const float *a, const float *b, npu_u64 n) { NPU__VEC(2, 0, dst, a, b, n); }
static inline void npu_vdiv(float *dst, const float *a, const float *b, npu_u64 n) { NPU__VEC(3, 0, dst, a, b, n); }
static inline void npu_vmax(float *dst, const float *a, const float *b, npu_u64 n) { NPU__VEC(4, 0, dst, a, b, n); }
static inline void npu_vmin(float *dst, const float *a, const float *b, npu_u64 n) { NPU__VEC(5, 0, dst, a, b, n); }

/* Scalar broadcast, f32: dst[i] = a[i] op s. */
static inline void npu_vadds(float *dst, const float *a, float s, npu_u64 n) { NPU__VEC(0, 1, dst, a, npu__f32_bits(s), n); }
static inline void npu_vmuls(float *dst, const float *a, float s, npu_u64 n) { NPU__VEC(1, 1, dst, a, npu__f32_bits(s), n); }
static inline void npu_vmaxs(float *dst, const float *a, float s, npu_u64 n) { NPU__VEC(2, 1, dst, a, npu__f32_bits(s), n); }
static inline void npu_vmins(float *dst, const float *a, float s, npu_u64 n) { NPU__VEC(3, 1, dst, a, npu__f32_bits(s), n); }
/* dst[i] = s. */
static inline void npu_vdup(float *dst, float s, npu_u64 n) { NPU__VEC(4, 1, dst, 0, npu__f32_bits(s), n); }

/* Unary, f32: dst[i] = f(a[i]). */
static inline void npu_vexp(float *dst, const float *a, npu_u64 n) { NPU__VEC(0, 2, dst, a, 0, n); }
static inline void npu_vln(float *dst, const float *a, npu_u64 n) { NPU__VEC(1, 2, dst, a, 0, n); }
static inline void npu_vsqrt(float *dst, const float *a, npu_u64 n) { NPU__VEC(2, 2, dst, a, 0, n); }
static inline void npu_vrelu(float *dst, const float *a, npu_u64 n) { NPU__VEC(3, 2, dst, a, 0, n); }
static inline void npu_vabs(float *dst, const float *a, npu_u64 n) { NPU__VEC(4, 2, dst, a, 0, n); }
static inline void npu_vrec(float *dst, const float *a, npu_u64 n) { NPU__VEC(5, 2, dst, a, 0, n); }
static inline void npu_vmov(float *dst, const float *a, npu_u64 n) { NPU__VEC(6, 2, dst, a, 0, n); }

/* Reductions: dst[0] = sum(a[0..n]) (accumulated in f64, rounded once) / max(a[0..n]). */
static inline void npu_vsum(float *dst, const float *a, npu_u64 n) { NPU__VEC(0, 3, dst, a, 0, n); }
static inline void npu_vrmax(float *dst, const float *a, npu_u64 n) { NPU__VEC(1, 3, dst, a, 0, n); }

/* Casts: f32 -> f16 (round to nearest even) and f16 -> f32 (exact); f16 as raw bits. */
static inline void npu_vcvt_f16_f32(npu_u16 *dst, const float *a, npu_u64 n) { NPU__VEC(2, 3, dst, a, 0, n); }
static inline void npu_vcvt_f32_f16(float *dst, const npu_u16 *a, npu_u64 n) { NPU__VEC(3, 3, dst, a, 0, n); }

/* dst[i] = a[i] > 0 ? a[i] : a[i] * s (leaky ReLU), f32. */
static inline void npu_vlrelu(float *dst, const float *a, float s, npu_u64 n) { NPU__VEC(5, 1, dst, a, npu__f32_bits(s), n); }

/* ---- Typed vector instructions ------------------------------------------------------------ */
/*
 * Every vector instruction takes an element type in bits 32..36 of its count operand:
 * NPU_F32 (the default, 0), NPU_F16, NPU_I32, NPU_I16, NPU_BF16. The `_t` forms below take untyped
 * pointers, the count and the type; scalars are passed as their bits in that type
 * (npu_f32_bits / npu_f16_bits, or the integer itself). f16 and i16 run at twice the f32
 * element rate. f16 results are exact IEEE half; integer arithmetic wraps. vdiv, vexp, vln,
 * vsqrt, vrec and vlrelu are float-only (an integer type faults at issue).
 */
#define NPU_F32 0
#define NPU_F16 1
#define NPU_I32 2
#define NPU_I16 3
#define NPU_BF16 4
/* 8-bit integers: a cast's source or destination, vdup and vmov only (anything else faults). */
#define NPU_I8 5
#define NPU_U8 6
/* 4-bit integers, two to a byte (element 2k in the low nibble of byte k): a cast's source or
 * destination only, over an even count (an odd one faults). */
#define NPU_I4 7
/* The count operand: n elements of type t. */
#define NPU_COUNT(n, t) ((npu_u64)(npu_u32)(n) | ((npu_u64)(t) << 32))

/* Round modes of npu_vcvt, Ascend C's RoundMode order (docs/isa.md). */
#define NPU_ROUND_NONE 0
#define NPU_ROUND_RINT 1
#define NPU_ROUND_FLOOR 2
#define NPU_ROUND_CEIL 3
#define NPU_ROUND_ROUND 4
#define NPU_ROUND_TRUNC 5
#define NPU_ROUND_ODD 6
/* Comparisons of npu_vcmp, Ascend C's CMPMODE order. */
#define NPU_CMP_LT 0
#define NPU_CMP_GT 1
#define NPU_CMP_EQ 2
#define NPU_CMP_LE 3
#define NPU_CMP_GE 4
#define NPU_CMP_NE 5

/* The bits of a value for a scalar operand of type NPU_F32. */
static inline npu_u64 npu_f32_bits(float f) { return npu__f32_bits(f); }

#define NPU__VT(f3, f2, d, a, b, n, t) NPU__R4(0x0b, f3, f2, d, a, b, NPU_COUNT(n, t))
static inline void npu_vadd_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(0, 0, d, a, b, n, t); }
static inline void npu_vsub_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(1, 0, d, a, b, n, t); }
static inline void npu_vmul_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(2, 0, d, a, b, n, t); }
static inline void npu_vdiv_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(3, 0, d, a, b, n, t); }
static inline void npu_vmax_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(4, 0, d, a, b, n, t); }
static inline void npu_vmin_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(5, 0, d, a, b, n, t); }
/* Bitwise and / or / not: integer types only (a float type faults at issue). */
static inline void npu_vand_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(6, 0, d, a, b, n, t); }
static inline void npu_vor_t(void *d, const void *a, const void *b, npu_u64 n, int t) { NPU__VT(7, 0, d, a, b, n, t); }
static inline void npu_vadds_t(void *d, const void *a, npu_u64 s, npu_u64 n, int t) { NPU__VT(0, 1, d, a, s, n, t); }
static inline void npu_vmuls_t(void *d, const void *a, npu_u64 s, npu_u64 n, int t) { NPU__VT(1, 1, d, a, s, n, t); }
static inline void npu_vmaxs_t(void *d, const void *a, npu_u64 s, npu_u64 n, int t) { NPU__VT(2, 1, d, a, s, n, t); }
static inline void npu_vmins_t(void *d, const void *a, npu_u64 s, npu_u64 n, int t) { NPU__VT(3, 1, d, a, s, n, t); }
static inline void npu_vdup_t(void *d, npu_u64 s, npu_u64 n, int t) { NPU__VT(4, 1, d, 0, s, n, t); }
static inline void npu_vlrelu_t(void *d, const void *a, npu_u64 s, npu_u64 n, int t) { NPU__VT(5, 1, d, a, s, n, t); }
static inline void npu_vexp_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(0, 2, d, a, 0, n, t); }
static inline void npu_vln_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(1, 2, d, a, 0, n, t); }
static inline void npu_vsqrt_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(2, 2, d, a, 0, n, t); }
static inline void npu_vrelu_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(3, 2, d, a, 0, n, t); }
static inline void npu_vabs_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(4, 2, d, a, 0, n, t); }
static inline void npu_vrec_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(5, 2, d, a, 0, n, t); }
static inline void npu_vmov_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(6, 2, d, a, 0, n, t); }
static inline void npu_vnot_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(7, 2, d, a, 0, n, t); }
/* Reductions: d[0] = sum / max of a[0..n], in type t (f16 sums are exact, rounded once). */
static inline void npu_vsum_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(0, 3, d, a, 0, n, t); }
static inline void npu_vrmax_t(void *d, const void *a, npu_u64 n, int t) { NPU__VT(1, 3, d, a, 0, n, t); }
/* Cast: d (type dst_t) = a (type src_t), rounded with `mode` (NPU_ROUND_*); one rounding. */
static inline void npu_vcvt(void *d, int dst_t, const void *a, int src_t, int mode, npu_u64 n) {
    NPU__R4(0x0b, 4, 3, d, a, 0,
            NPU_COUNT(n, dst_t) | ((npu_u64)mode << 36) | ((npu_u64)src_t << 40));
}
/* Compare: bit i of the byte mask (ceil(n / 8) bytes) = a[i] cmp b[i] (NPU_CMP_*). */
static inline void npu_vcmp(void *mask, const void *a, const void *b, npu_u64 n, int t, int cmp) {
    NPU__R4(0x0b, 5, 3, mask, a, b, NPU_COUNT(n, t) | ((npu_u64)cmp << 36));
}
/* Select: d[i] = mask bit i ? a[i] : b[i] (npu_vsel) or : s (npu_vsels). */
static inline void npu_vsel(void *d, const void *mask, const void *a, const void *b, npu_u64 n, int t) {
    NPU__R4(0x0b, 6, 3, d, a, b,
            NPU_COUNT(n, t) | ((((npu_u64)mask - NPU_UB_BASE) / NPU_LOCAL_ALIGN) << 48));
}
static inline void npu_vsels(void *d, const void *mask, const void *a, npu_u64 s, npu_u64 n, int t) {
    NPU__R4(0x0b, 6, 3, d, a, s,
            NPU_COUNT(n, t) | (1UL << 36) | ((((npu_u64)mask - NPU_UB_BASE) / NPU_LOCAL_ALIGN) << 48));
}

/* ---- Cube unit (custom-2, 0x5b) ----------------------------------------------------------- */
/*
 * C (m x n, f32, in L0C) = [C +] A (m x k, in L0A) x B (k x n, in L0B), all row-major with each
 * row starting on a 32-byte boundary: row pitch = npu_pitch(row bytes). m, n, k < 65536.
 * f16 products are exact and accumulate in f32, in k order. Cost on M:
 * 8 + ceil16(m) * ceil16(n) * ceil16(k) * 2 / 8192 cycles for f16 (/ 2048 for f32).
 */
#define NPU__MNK(m, n, k) ((npu_u64)(npu_u16)(m) | ((npu_u64)(npu_u16)(n) << 16) | ((npu_u64)(npu_u16)(k) << 32))

static inline void npu_mmad_f16(float *c, const npu_u16 *a, const npu_u16 *b, npu_u32 m,
                                npu_u32 n, npu_u32 k, int accumulate) {
    if (accumulate) {
        NPU__R4(0x5b, 1, 0, c, a, b, NPU__MNK(m, n, k));
    } else {
        NPU__R4(0x5b, 0, 0, c, a, b, NPU__MNK(m, n, k));
    }
}
static inline void npu_mmad_f32(float *c, const float *a, const float *b, npu_u32 m, npu_u32 n,
                                npu_u32 k, int accumulate) {
    if (accumulate) {
        NPU__R4(0x5b, 3, 0, c, a, b, NPU__MNK(m, n, k));
    } else {
        NPU__R4(0x5b, 2, 0, c, a, b, NPU__MNK(m, n, k));
    }
}

/*
 * The fractal layout (funct3 bit 2): with K0 = 32 / element bytes (16 for f16, 8 for f32),
 * A in L0A is ceil(m/16) x ceil(k/K0) fractals of 16 rows x 32 bytes, fractal row by fractal
 * row ("zZ"); B in L0B is ceil(k/K0) x ceil(n/16) fractals in the same order, each holding its
 * 16 columns of B as 32-byte rows ("zN"); C in L0C is ceil(n/16) x ceil(m/16) fractals of
 * 16 x 16 f32, fractal column by fractal column ("NZ"). Same arithmetic, same cost.
 */
static inline void npu_mmad_f16_nz(float *c, const npu_u16 *a, const npu_u16 *b, npu_u32 m,
                                   npu_u32 n, npu_u32 k, int accumulate) {
    if (accumulate) {
        NPU__R4(0x5b, 5, 0, c, a, b, NPU__MNK(m, n, k));
    } else {
        NPU__R4(0x5b, 4, 0, c, a, b, NPU__MNK(m, n, k));
    }
}
static inline void npu_mmad_f32_nz(float *c, const float *a, const float *b, npu_u32 m,
                                   npu_u32 n, npu_u32 k, int accumulate) {
    if (accumulate) {
        NPU__R4(0x5b, 7, 0, c, a, b, NPU__MNK(m, n, k));
    } else {
        NPU__R4(0x5b, 6, 0, c, a, b, NPU__MNK(m, n, k));
    }
}

/* The fractal layout with C starting from a bias row: C = bias + A x B, bias the n f32 at
 * `bias` (in BT, 32-byte aligned), the same for every row of C (funct2 = 1). */
#define NPU__MNK_BIAS(m, n, k, bias)                                                           \
    (NPU__MNK(m, n, k) | (((npu_u64)(bias) - NPU_BT_BASE) / NPU_LOCAL_ALIGN) << 48)
static inline void npu_mmad_f16_nz_bias(float *c, const npu_u16 *a, const npu_u16 *b,
                                        const float *bias, npu_u32 m, npu_u32 n, npu_u32 k) {
    NPU__R4(0x5b, 4, 1, c, a, b, NPU__MNK_BIAS(m, n, k, bias));
}
static inline void npu_mmad_f32_nz_bias(float *c, const float *a, const float *b,
                                        const float *bias, npu_u32 m, npu_u32 n, npu_u32 k) {
    NPU__R4(0x5b, 6, 1, c, a, b, NPU__MNK_BIAS(m, n, k, bias));
}

#ifdef __cplusplus
}
#endif

#endif /* NPUSIM_EXT_H */
