/*
 * kernel_operator.h — Ascend C's kernel programming interface over npusim's NPU extension.
 *
 * Kernels written for Ascend C (`#include "kernel_operator.h"`, `using namespace AscendC;`,
 * TPipe / TQue / TBuf, GlobalTensor / LocalTensor, DataCopy, the vector APIs) compile with
 * clang for the simulated AI core against this header and run on npusim, functionally and in
 * simulated time. Names, template parameters, argument orders and semantics follow the
 * Ascend C API reference; this file is an independent implementation of the subset the
 * introductory vector and cube samples use (docs/ascendc.md lists it, and what differs).
 *
 * Build with scripts/ascendc-compile.sh (or scripts/npusim-ascendc.sh for the host path): clang++-16
 * for riscv64 (rv64imf, lp64f), C++17, freestanding, with CANN's mode macros (the NPU build:
 * __CCE_AICORE__ and the core macro; --cpu-debug: __CCE_KT_TEST__ and ASCENDC_CPU_DEBUG) and
 * device/sdk, device/sdk/ascendc and device/sdk/ascendc/std on the include path
 * (docs/ascendc.md, "Compile environment").
 *
 * No exceptions, RTTI, libstdc++ or global constructors: everything is inline and per block.
 * The TPipe's bookkeeping lives at the bottom of the block's own stack window, so blocks share
 * no mutable global state.
 *
 * How the model maps:
 *  - UB is the VECIN / VECOUT / VECCALC storage; TPipe::InitBuffer carves each local buffer
 *    linearly from offset 0 (32-byte aligned); running out aborts the block with a message.
 *  - A TQue<VECIN> is filled by MTE2 (DataCopy GM -> UB) and read by V: EnQue is
 *    set_flag(MTE2, V), DeQue is wait_flag(MTE2, V), FreeTensor is set_flag(V, MTE2) and the
 *    AllocTensor that reuses the slot waits for it. TQue<VECOUT> is the same with V -> MTE3.
 *    So a missing DeQue lets the vector unit read the buffer before the copy landed: stale
 *    data, as on hardware.
 *  - Vector APIs issue one NPU vector instruction per call (tensor-count form) or per repeat
 *    (mask / repeat form); element types float, half, bfloat16_t, int32_t, int16_t.
 *  - The cube positions carve their own buffers: A1 / B1 / C1 from L1, A2 from L0A, B2 from
 *    L0B, CO1 from L0C, C2 from BT, the bias table (CO2 from UB); their queues sync
 *    MTE2 -> MTE1 (A1 / B1 / C1), MTE1 -> M (A2 / B2 / C2) and M -> MTE3 (CO1; npusim's
 *    fixpipe is the MTE3 mover). DataCopy
 *    with Nd2NzParams, LoadData, Mmad (one fractal-layout cube instruction) and Fixpipe are
 *    the cube path (docs/ascendc.md, "The model").
 */
#ifndef NPUSIM_ASCENDC_KERNEL_OPERATOR_H
#define NPUSIM_ASCENDC_KERNEL_OPERATOR_H

#ifndef __cplusplus
#error "kernel_operator.h is C++: compile the kernel with clang++"
#endif

#include <stdarg.h>

#include "npusim.h"
#include "npusim_ext.h"

/* The tiling structs of the high-level APIs (PadTiling, UnPadTiling, TCubeTiling), shared with
 * the host's tiling/tiling_api.h. */
#include "../../../acl/include/kernel_tiling/kernel_tiling.h"

/* ---- Function and address-space qualifiers ---------------------------------------------- */

#define __gm__
/* A kernel entry point: exported by name so the loader (and aclrtBinaryGetFunction) finds it. */
#define __global__ __attribute__((used, visibility("default")))
#define GM_ADDR __gm__ uint8_t *

/* Every layer and kernel function is inlined into its entry point, so a kernel's queues,
 * tensors and counters stay in registers across the NPU instructions. */
#define __aicore__ __attribute__((always_inline))
/* Kernel types. KERNEL_TYPE_MIX_AIC_1_1 / _1_2 split the kernel: each of the launch's blockDim
 * AI cores runs one cube block (ASCEND_IS_AIC) and one or two vector blocks (ASCEND_IS_AIV)
 * that meet through CrossCoreSetFlag / CrossCoreWaitFlag. Any other type runs every part of the
 * kernel in each block (the 910B preset's vector-only mapping is described in
 * docs/ascendc.md). The declaration leaves a marker the loader reads: a local object named
 * after the type inside the kernel. */
#define KERNEL_TYPE_AIV_ONLY 1
#define KERNEL_TYPE_AIC_ONLY 2
#define KERNEL_TYPE_MIX_AIC_1_2 3
#define KERNEL_TYPE_MIX_AIC_1_1 4
#define KERNEL_TYPE_MIX_AIV_1_0 5
#define KERNEL_TYPE_MIX_AIC_1_0 6
#define KERNEL_TASK_TYPE_DEFAULT(type)                                                         \
    static __attribute__((used)) const unsigned char npusim_kernel_type_##type = 1;            \
    (void)npusim_kernel_type_##type
#define KERNEL_TASK_TYPE(key, type) KERNEL_TASK_TYPE_DEFAULT(type)
/* Which part of a split mix kernel the block runs; both hold in a kernel that is not split. */
#define ASCEND_IS_AIC (npu_core_kind() != NPU_CORE_KIND_AIV)
#define ASCEND_IS_AIV (npu_core_kind() != NPU_CORE_KIND_AIC)
#define ASCEND_IS_NOT_AIC (npu_core_kind() == NPU_CORE_KIND_AIV)
#define ASCEND_IS_NOT_AIV (npu_core_kind() == NPU_CORE_KIND_AIC)

/* Software f32 -> f64 widening: `printf("%f", x)` promotes floats to double, and the core has
 * no double hardware. Only moves bits. */
extern "C" __attribute__((used, weak)) inline double __extendsfdf2(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    uint64_t sign = (uint64_t)(u >> 31) << 63;
    uint32_t exp = (u >> 23) & 0xff;
    uint64_t man = u & 0x7fffff;
    uint64_t bits;
    if (exp == 0xff) {
        bits = sign | 0x7ff0000000000000ULL | (man << 29);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            int e = -126;
            while ((man & 0x800000) == 0) {
                man <<= 1;
                e--;
            }
            bits = sign | ((uint64_t)(e + 1023) << 52) | ((man & 0x7fffff) << 29);
        }
    } else {
        bits = sign | ((uint64_t)(exp - 127 + 1023) << 52) | (man << 29);
    }
    double d;
    __builtin_memcpy(&d, &bits, 8);
    return d;
}

/* ---- half --------------------------------------------------------------------------------- */

namespace npusim_detail {
inline uint32_t f32_bits(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    return u;
}
inline float bits_f32(uint32_t u) {
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
/* IEEE binary16 <-> binary32, round to nearest even (as the vector unit's casts). */
inline uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) {
        return (uint16_t)(sign | 0x7c00 | (man ? (0x200 | (man >> 13)) : 0));
    }
    int32_t e = exp - 112;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00);
    }
    uint32_t kept, rest, half;
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        uint32_t m = man | 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        kept = m >> shift;
        rest = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        kept = ((uint32_t)e << 10) | (man >> 13);
        rest = man & 0x1fff;
        half = 0x1000;
    }
    uint32_t up = (rest > half || (rest == half && (kept & 1))) ? 1 : 0;
    return (uint16_t)(sign | (kept + up));
}
inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) {
            return bits_f32(sign);
        }
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) {
        return bits_f32(sign | 0x7f800000 | (man << 13));
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}
} // namespace npusim_detail

/* The vector and copy instructions without npusim_ext.h's "memory" clobber, so the
 * compiler keeps the layer's state (queue counters, addresses) in registers across them.
 * Their effects are only observable by scalar code after a flag wait, and every flag,
 * barrier, GetValue and SetValue keeps the clobber: scalar accesses stay ordered where the
 * synchronisation rules say they must be. */
namespace npusim_detail {
template <int F3, int F2>
inline void vop(const void *d, const void *a, uint64_t b, uint64_t count) {
    __asm__ volatile(".insn r4 0x0b, %4, %5, %0, %1, %2, %3"
                     :
                     : "r"(d), "r"(a), "r"(b), "r"(count), "i"(F3), "i"(F2));
}
template <int F3, int F2 = 0>
inline void move(const void *d, const void *s, uint32_t rows, uint32_t row_bytes,
                 uint32_t src_stride, uint32_t dst_stride) {
    __asm__ volatile(".insn r4 0x2b, %4, %5, %0, %1, %2, %3"
                     :
                     : "r"(d), "r"(s), "r"(((uint64_t)rows << 32) | row_bytes),
                       "r"(((uint64_t)src_stride << 32) | dst_stride), "i"(F3), "i"(F2));
}
/* The cube in its fractal layout (isa.md, "Cube"): F3 = 4 | f32 inputs << 1 | accumulate;
 * mmad_bias starts C from the bias row whose BT offset / 32 is in mnk's bits 48.. */
template <int F3> inline void mmad(void *c, const void *a, const void *b, uint64_t mnk) {
    __asm__ volatile(".insn r4 0x5b, %4, 0, %0, %1, %2, %3"
                     :
                     : "r"(c), "r"(a), "r"(b), "r"(mnk), "i"(F3));
}
template <int F3> inline void mmad_bias(void *c, const void *a, const void *b, uint64_t mnk) {
    __asm__ volatile(".insn r4 0x5b, %4, 1, %0, %1, %2, %3"
                     :
                     : "r"(c), "r"(a), "r"(b), "r"(mnk), "i"(F3));
}
#define NPUSIM_V3(name, f3, f2)                                                                \
    inline void name(void *d, const void *a, const void *b, uint64_t n, int t) {               \
        vop<f3, f2>(d, a, (uint64_t)b, NPU_COUNT(n, t));                                       \
    }
#define NPUSIM_VS(name, f3, f2)                                                                \
    inline void name(void *d, const void *a, uint64_t s, uint64_t n, int t) {                  \
        vop<f3, f2>(d, a, s, NPU_COUNT(n, t));                                                 \
    }
#define NPUSIM_V1(name, f3, f2)                                                                \
    inline void name(void *d, const void *a, uint64_t n, int t) {                              \
        vop<f3, f2>(d, a, 0, NPU_COUNT(n, t));                                                 \
    }
NPUSIM_V3(vadd, 0, 0)
NPUSIM_V3(vsub, 1, 0)
NPUSIM_V3(vmul, 2, 0)
NPUSIM_V3(vdiv, 3, 0)
NPUSIM_V3(vmax, 4, 0)
NPUSIM_V3(vmin, 5, 0)
NPUSIM_V3(vand, 6, 0)
NPUSIM_V3(vor, 7, 0)
NPUSIM_VS(vadds, 0, 1)
NPUSIM_VS(vmuls, 1, 1)
NPUSIM_VS(vmaxs, 2, 1)
NPUSIM_VS(vmins, 3, 1)
NPUSIM_VS(vlrelu, 5, 1)
NPUSIM_V1(vexp, 0, 2)
NPUSIM_V1(vln, 1, 2)
NPUSIM_V1(vsqrt, 2, 2)
NPUSIM_V1(vrelu, 3, 2)
NPUSIM_V1(vabs, 4, 2)
NPUSIM_V1(vrec, 5, 2)
NPUSIM_V1(vmov, 6, 2)
NPUSIM_V1(vnot, 7, 2)
NPUSIM_V1(vsum, 0, 3)
NPUSIM_V1(vrmax, 1, 3)
#undef NPUSIM_V3
#undef NPUSIM_VS
#undef NPUSIM_V1
inline void vdup(void *d, uint64_t s, uint64_t n, int t) { vop<4, 1>(d, nullptr, s, NPU_COUNT(n, t)); }
} // namespace npusim_detail

/* IEEE binary16. Arithmetic goes through float (convert, compute, convert back on
 * assignment); the vector unit computes half natively and exactly. */
struct half {
    uint16_t bits_;
    half() = default;
    __aicore__ inline half(float f) : bits_(npusim_detail::f32_to_f16(f)) {}
    __aicore__ inline half(double d) : half((float)d) {}
    __aicore__ inline half(int i) : half((float)i) {}
    __aicore__ inline half(unsigned int i) : half((float)i) {}
    __aicore__ inline operator float() const { return npusim_detail::f16_to_f32(bits_); }
    __aicore__ static inline half FromBits(uint16_t b) {
        half h;
        h.bits_ = b;
        return h;
    }
};

/* bfloat16: the top half of a float (round to nearest even from float). */
struct bfloat16_t {
    uint16_t bits_;
    bfloat16_t() = default;
    __aicore__ inline bfloat16_t(float f) {
        uint32_t u = npusim_detail::f32_bits(f);
        if ((u & 0x7fffffff) > 0x7f800000) {
            bits_ = (uint16_t)((u >> 16) | 0x40);
        } else {
            bits_ = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        }
    }
    __aicore__ inline bfloat16_t(double d) : bfloat16_t((float)d) {}
    __aicore__ inline bfloat16_t(int i) : bfloat16_t((float)i) {}
    __aicore__ inline operator float() const {
        return npusim_detail::bits_f32((uint32_t)bits_ << 16);
    }
};

namespace npusim_detail {
/* A scalar access that the compiler keeps where it is written (another block or a pipe may own
 * the bytes until then), for every element type: half and bfloat16_t move as their bits. */
template <typename T> __aicore__ inline T volatile_load(const T *p) {
    return *(const volatile T *)p;
}
template <typename T> __aicore__ inline void volatile_store(T *p, T v) { *(volatile T *)p = v; }
template <> __aicore__ inline half volatile_load(const half *p) {
    return half::FromBits(*(const volatile uint16_t *)p);
}
template <> __aicore__ inline void volatile_store(half *p, half v) {
    *(volatile uint16_t *)p = v.bits_;
}
template <> __aicore__ inline bfloat16_t volatile_load(const bfloat16_t *p) {
    bfloat16_t v;
    v.bits_ = *(const volatile uint16_t *)p;
    return v;
}
template <> __aicore__ inline void volatile_store(bfloat16_t *p, bfloat16_t v) {
    *(volatile uint16_t *)p = v.bits_;
}
} // namespace npusim_detail

/* ---- The low-level intrinsics (global, as CANN's compiler declares them) ------------------- */

enum pipe_t : uint8_t {
    PIPE_S = NPU_PIPE_S,
    PIPE_V = NPU_PIPE_V,
    PIPE_M = NPU_PIPE_M,
    PIPE_MTE1 = NPU_PIPE_MTE1,
    PIPE_MTE2 = NPU_PIPE_MTE2,
    PIPE_MTE3 = NPU_PIPE_MTE3,
    /* Ascend's fixpipe (L0C -> GM) is npusim's MTE3 mover. */
    PIPE_FIX = NPU_PIPE_MTE3,
    PIPE_ALL = NPU_PIPE_ALL,
};

enum event_t : uint8_t {
    EVENT_ID0,
    EVENT_ID1,
    EVENT_ID2,
    EVENT_ID3,
    EVENT_ID4,
    EVENT_ID5,
    EVENT_ID6,
    EVENT_ID7,
};

/* set_flag(src, dst, ev) / wait_flag(src, dst, ev): the flag from pipe src to pipe dst (isa.md,
 * "Synchronization"); the queues of a TPipe use ids 0..6 and the layer keeps 7 for its own
 * scalar synchronisation, so a kernel mixing both takes care as with CANN's reserved ids. */
__aicore__ inline void set_flag(pipe_t src, pipe_t dst, event_t ev) { npu_set_flag(src, dst, ev); }
__aicore__ inline void wait_flag(pipe_t src, pipe_t dst, event_t ev) { npu_wait_flag(src, dst, ev); }
__aicore__ inline void pipe_barrier(pipe_t pipe) { npu_pipe_barrier(pipe); }
__aicore__ inline int64_t get_block_idx() { return (int64_t)npu_block_idx(); }
__aicore__ inline int64_t get_block_num() { return (int64_t)npu_block_dim(); }
__aicore__ inline int64_t get_subblockid() { return 0; }
__aicore__ inline int64_t get_subblockdim() { return 1; }

/* dcci (data cache clean and invalidate): npusim's scalar unit reads and writes global memory
 * without a data cache, so there is nothing to clean; accepted in every CANN form. */
enum class cache_line_t : uint8_t { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum class dcci_dst_t : uint8_t { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
template <typename T> __aicore__ inline void dcci(__gm__ T *, cache_line_t) {}
template <typename T> __aicore__ inline void dcci(__gm__ T *, cache_line_t, dcci_dst_t) {}
__aicore__ inline void dcci(uint64_t, cache_line_t) {}
__aicore__ inline void dcci(uint64_t, cache_line_t, dcci_dst_t) {}

namespace AscendC {

/* ---- Positions, pipes, events -------------------------------------------------------------- */

enum class TPosition : uint8_t {
    GM,
    A1,
    A2,
    B1,
    B2,
    C1,
    C2,
    CO1,
    CO2,
    VECIN,
    VECOUT,
    VECCALC,
    LCM = VECCALC,
    SPM,
    SHM,
    TSCM,
    MAX,
};
using QuePosition = TPosition;

using ::event_t;
using ::pipe_t;
using TEventID = int8_t;

/* A flag between two pipes: the value is src << 4 | dst (npusim's pipe numbers). */
enum class HardEvent : uint8_t {
    MTE2_MTE1 = NPU_PIPE_MTE2 << 4 | NPU_PIPE_MTE1,
    MTE1_MTE2 = NPU_PIPE_MTE1 << 4 | NPU_PIPE_MTE2,
    MTE1_M = NPU_PIPE_MTE1 << 4 | NPU_PIPE_M,
    M_MTE1 = NPU_PIPE_M << 4 | NPU_PIPE_MTE1,
    MTE2_V = NPU_PIPE_MTE2 << 4 | NPU_PIPE_V,
    V_MTE2 = NPU_PIPE_V << 4 | NPU_PIPE_MTE2,
    MTE3_V = NPU_PIPE_MTE3 << 4 | NPU_PIPE_V,
    V_MTE3 = NPU_PIPE_V << 4 | NPU_PIPE_MTE3,
    M_V = NPU_PIPE_M << 4 | NPU_PIPE_V,
    V_M = NPU_PIPE_V << 4 | NPU_PIPE_M,
    MTE3_MTE1 = NPU_PIPE_MTE3 << 4 | NPU_PIPE_MTE1,
    MTE1_MTE3 = NPU_PIPE_MTE1 << 4 | NPU_PIPE_MTE3,
    MTE1_V = NPU_PIPE_MTE1 << 4 | NPU_PIPE_V,
    V_MTE1 = NPU_PIPE_V << 4 | NPU_PIPE_MTE1,
    MTE2_M = NPU_PIPE_MTE2 << 4 | NPU_PIPE_M,
    M_MTE2 = NPU_PIPE_M << 4 | NPU_PIPE_MTE2,
    MTE3_MTE2 = NPU_PIPE_MTE3 << 4 | NPU_PIPE_MTE2,
    MTE2_MTE3 = NPU_PIPE_MTE2 << 4 | NPU_PIPE_MTE3,
    S_V = NPU_PIPE_S << 4 | NPU_PIPE_V,
    V_S = NPU_PIPE_V << 4 | NPU_PIPE_S,
    S_MTE2 = NPU_PIPE_S << 4 | NPU_PIPE_MTE2,
    MTE2_S = NPU_PIPE_MTE2 << 4 | NPU_PIPE_S,
    S_MTE3 = NPU_PIPE_S << 4 | NPU_PIPE_MTE3,
    MTE3_S = NPU_PIPE_MTE3 << 4 | NPU_PIPE_S,
    M_S = NPU_PIPE_M << 4 | NPU_PIPE_S,
    S_M = NPU_PIPE_S << 4 | NPU_PIPE_M,
    S_MTE1 = NPU_PIPE_S << 4 | NPU_PIPE_MTE1,
    MTE1_S = NPU_PIPE_MTE1 << 4 | NPU_PIPE_S,
    /* The fixpipe (FIX) is npusim's MTE3 mover (PIPE_FIX). */
    M_FIX = NPU_PIPE_M << 4 | NPU_PIPE_MTE3,
    FIX_M = NPU_PIPE_MTE3 << 4 | NPU_PIPE_M,
    FIX_MTE2 = NPU_PIPE_MTE3 << 4 | NPU_PIPE_MTE2,
    MTE2_FIX = NPU_PIPE_MTE2 << 4 | NPU_PIPE_MTE3,
    FIX_MTE1 = NPU_PIPE_MTE3 << 4 | NPU_PIPE_MTE1,
    MTE1_FIX = NPU_PIPE_MTE1 << 4 | NPU_PIPE_MTE3,
    FIX_S = NPU_PIPE_MTE3 << 4 | NPU_PIPE_S,
    S_FIX = NPU_PIPE_S << 4 | NPU_PIPE_MTE3,
    M_MTE3 = NPU_PIPE_M << 4 | NPU_PIPE_MTE3,
    MTE3_M = NPU_PIPE_MTE3 << 4 | NPU_PIPE_M,
};

template <HardEvent e> __aicore__ inline void SetFlag(int32_t eventID) {
    npu_set_flag((int)e >> 4, (int)e & 0xf, eventID);
}
template <HardEvent e> __aicore__ inline void WaitFlag(int32_t eventID) {
    npu_wait_flag((int)e >> 4, (int)e & 0xf, eventID);
}
template <pipe_t pipe> __aicore__ inline void PipeBarrier() { npu_pipe_barrier(pipe); }
/* Cross-core flags between the blocks of a launch (flag ids 0..15, a counter each):
 * CrossCoreSetFlag<mode, pipe>(id) counts a set once `pipe`'s earlier work is done — mode 0 for
 * every block of the same kind (released once all of them have set it), 1 for the vector
 * blocks of this AI core (once both have), 2 from the cube block to its vector blocks or from
 * the vector blocks to the cube block (once both have) — and CrossCoreWaitFlag(id) holds the
 * block until a set is counted and consumes it. Split mix kernels (KERNEL_TYPE_MIX_AIC_1_*)
 * run cube and vector blocks apart; in a kernel that is not split, each block is both. A wait
 * no set can release fails the launch naming the block and flag (on hardware it hangs). */
template <uint8_t modeId, pipe_t pipe> __aicore__ inline void CrossCoreSetFlag(uint16_t flagId) {
    static_assert(modeId <= 2, "CrossCoreSetFlag: modeId is 0, 1 or 2");
    static_assert(pipe != PIPE_S && pipe != PIPE_ALL, "CrossCoreSetFlag: not on PIPE_S or PIPE_ALL");
    npu_cross_set(modeId, pipe, flagId);
}
__aicore__ inline void CrossCoreWaitFlag(uint16_t flagId) { npu_cross_wait(flagId); }
template <uint8_t modeId, pipe_t pipe> __aicore__ inline void CrossCoreWaitFlag(uint16_t flagId) {
    static_assert(modeId <= 2, "CrossCoreWaitFlag: modeId is 0, 1 or 2");
    npu_cross_wait(flagId);
}
/* Ascend C's older spelling, pipe_barrier(PIPE_ALL), is the global intrinsic above. */

/* The event id the layer keeps for its own scalar synchronisation (GetValue / SetValue). */
constexpr int32_t NPUSIM_SYNC_EVENT = 7;
namespace detail {
/* Waits until the vector unit and the copies into and out of UB issued so far are done, so the
 * scalar unit may read and write UB (what GetValue / SetValue wait for). */
__aicore__ inline void scalar_owns_ub() {
    npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
}
} // namespace detail

/* ---- Blocks -------------------------------------------------------------------------------- */

__aicore__ inline int64_t GetBlockIdx() { return (int64_t)npu_block_idx(); }
__aicore__ inline int64_t GetBlockNum() { return (int64_t)npu_block_dim(); }
/* Puts the AI core in its initial state before static tensor programming: on npusim every block
 * starts with its buffers zeroed, no flag set and every pipe idle, so there is nothing to do. */
__aicore__ inline void InitSocState() {}

/* AscendC::Std: the standard-library subset kernels call through Ascend C's own namespace. */
namespace Std {
template <typename T> __aicore__ constexpr const T &max(const T &a, const T &b) {
    return a < b ? b : a;
}
template <typename T> __aicore__ constexpr const T &min(const T &a, const T &b) {
    return b < a ? b : a;
}
} // namespace Std
/* A vector block's index within its AI core (0 on a cube block or when the kernel is not split),
 * and the vector blocks per AI core (1 unless split). GetTaskRation: vector blocks per cube
 * block on a vector block of a split kernel, else 1. */
__aicore__ inline int64_t GetSubBlockIdx() { return (int64_t)npu_sub_block_idx(); }
__aicore__ inline int64_t GetSubBlockNum() { return (int64_t)npu_sub_block_num(); }
__aicore__ inline int64_t GetTaskRation() {
    return npu_core_kind() == NPU_CORE_KIND_AIV ? (int64_t)npu_sub_block_num() : 1;
}
__aicore__ inline int64_t GetSystemCycle() { return (int64_t)npu_cycles(); }

/* ---- printf / ASSERT ----------------------------------------------------------------------- */

namespace detail {
struct Out {
    char buf[256];
    uint32_t n;
    __aicore__ inline void put(char c) {
        if (n < sizeof(buf)) {
            buf[n++] = c;
        }
    }
    __aicore__ inline void str(const char *s) {
        while (*s) {
            put(*s++);
        }
    }
    __aicore__ inline void num(uint64_t v, uint32_t base, bool upper, int width, char pad) {
        char tmp[24];
        int k = 0;
        do {
            uint32_t d = (uint32_t)(v % base);
            tmp[k++] = (char)(d < 10 ? '0' + d : (upper ? 'A' : 'a') + d - 10);
            v /= base;
        } while (v);
        for (int i = k; i < width; i++) {
            put(pad);
        }
        while (k) {
            put(tmp[--k]);
        }
    }
    __aicore__ inline void flt(uint64_t dbits, int prec) {
        /* double bits -> float, then fixed-point digits with float arithmetic. */
        uint32_t sign = (uint32_t)(dbits >> 63);
        int32_t e = (int32_t)((dbits >> 52) & 0x7ff);
        uint64_t man = dbits & 0xfffffffffffffULL;
        if (sign) {
            put('-');
        }
        if (e == 0x7ff) {
            str(man ? "nan" : "inf");
            return;
        }
        float f;
        if (e == 0 || e - 1023 < -126) {
            f = 0.0f;
        } else if (e - 1023 > 127) {
            str("inf");
            return;
        } else {
            f = npusim_detail::bits_f32((uint32_t)(e - 1023 + 127) << 23 | (uint32_t)(man >> 29));
        }
        if (prec < 0) {
            prec = 6;
        }
        float scale = 1.0f;
        for (int i = 0; i < prec; i++) {
            scale *= 10.0f;
        }
        if (f >= 1.8e19f) {
            str("inf");
            return;
        }
        uint64_t ip = (uint64_t)f;
        float frac = f - (float)ip;
        uint64_t fp = (uint64_t)(frac * scale + 0.5f);
        if ((float)fp >= scale) {
            ip += 1;
            fp = 0;
        }
        num(ip, 10, false, 0, '0');
        if (prec > 0) {
            put('.');
            num(fp, 10, false, prec, '0');
        }
    }
};

__aicore__ inline void vformat(Out &o, const char *fmt, va_list ap) {
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            o.put(*p);
            continue;
        }
        p++;
        char pad = ' ';
        int width = 0, prec = -1, longs = 0;
        if (*p == '0') {
            pad = '0';
            p++;
        }
        while (*p >= '0' && *p <= '9') {
            width = width * 10 + (*p++ - '0');
        }
        if (*p == '.') {
            p++;
            prec = 0;
            while (*p >= '0' && *p <= '9') {
                prec = prec * 10 + (*p++ - '0');
            }
        }
        while (*p == 'l' || *p == 'h' || *p == 'z') {
            longs += (*p == 'l' || *p == 'z');
            p++;
        }
        switch (*p) {
        case 'd':
        case 'i': {
            int64_t v = longs ? va_arg(ap, int64_t) : va_arg(ap, int);
            if (v < 0) {
                o.put('-');
                o.num((uint64_t)(-v), 10, false, width ? width - 1 : 0, pad);
            } else {
                o.num((uint64_t)v, 10, false, width, pad);
            }
            break;
        }
        case 'u':
        case 'x':
        case 'X': {
            uint64_t v = longs ? va_arg(ap, uint64_t) : va_arg(ap, unsigned int);
            o.num(v, *p == 'u' ? 10 : 16, *p == 'X', width, pad);
            break;
        }
        case 'p':
            o.str("0x");
            o.num((uint64_t)va_arg(ap, void *), 16, false, 0, '0');
            break;
        case 'c':
            o.put((char)va_arg(ap, int));
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            o.str(s ? s : "(null)");
            break;
        }
        case 'f':
        case 'F':
        case 'g':
        case 'e': {
            double d = va_arg(ap, double);
            uint64_t bits;
            __builtin_memcpy(&bits, &d, 8);
            o.flt(bits, prec);
            break;
        }
        case '%':
            o.put('%');
            break;
        case '\0':
            return;
        default:
            o.put('%');
            o.put(*p);
        }
    }
}

[[noreturn]] __aicore__ inline void assert_fail(const char *expr, const char *file, int line) {
    Out o;
    o.n = 0;
    o.str("[ASSERT] ");
    o.str(file);
    o.put(':');
    o.num((uint64_t)line, 10, false, 0, ' ');
    o.str(": Assertion `");
    o.str(expr);
    o.str("' failed.");
    npu_print_bytes(o.buf, o.n);
    npu_abort(134);
}

[[noreturn]] __aicore__ inline void fail(const char *what) {
    npu_print_str(what);
    npu_abort(135);
}
} // namespace detail

/* Prints to the host log (one line per call; a trailing newline is dropped). */
__aicore__ inline void printf(const char *fmt, ...) {
    detail::Out o;
    o.n = 0;
    va_list ap;
    va_start(ap, fmt);
    detail::vformat(o, fmt, ap);
    va_end(ap);
    if (o.n && o.buf[o.n - 1] == '\n') {
        o.n--;
    }
    npu_print_bytes(o.buf, o.n);
}
__aicore__ inline void PRINTF(const char *fmt, ...) {
    detail::Out o;
    o.n = 0;
    va_list ap;
    va_start(ap, fmt);
    detail::vformat(o, fmt, ap);
    va_end(ap);
    if (o.n && o.buf[o.n - 1] == '\n') {
        o.n--;
    }
    npu_print_bytes(o.buf, o.n);
}
namespace detail {
/* The message of a failed assert(cond, fmt, ...): one host-log line, printf's formats. */
__aicore__ inline void assert_message() {}
__aicore__ inline void assert_message(const char *fmt, ...) {
    Out o;
    o.n = 0;
    va_list ap;
    va_start(ap, fmt);
    vformat(o, fmt, ap);
    va_end(ap);
    if (o.n && o.buf[o.n - 1] == '\n') {
        o.n--;
    }
    npu_print_bytes(o.buf, o.n);
}
} // namespace detail

} // namespace AscendC

/* assert(cond[, fmt, args...]), Ascend C's kernel assert: when cond is false, prints the message
 * (printf's formats), then "[ASSERT] file:line: Assertion `cond' failed.", and aborts the block
 * with code 134. */
#define assert(expr, ...)                                                                      \
    ((expr) ? (void)0                                                                          \
            : (::AscendC::detail::assert_message(__VA_ARGS__),                                 \
               ::AscendC::detail::assert_fail(#expr, __FILE__, __LINE__)))

/* ASSERT(cond): prints "[ASSERT] file:line: Assertion `cond' failed." and aborts the block
 * with code 134. */
#define ASSERT(expr)                                                                           \
    ((expr) ? (void)0 : ::AscendC::detail::assert_fail(#expr, __FILE__, __LINE__))

namespace AscendC {

/* ---- Element types ------------------------------------------------------------------------- */

/* Ascend C's 4-bit integer (-8..7), two to a byte: element 2k in the low nibble of byte k,
 * 2k + 1 in the high one. A tensor of int4b_t counts elements (its bytes are half the count):
 * the data travels as int8_t and a ReinterpretCast<int4b_t>() of the tensor feeds Cast, as
 * Ascend C's Cast documents. Casts and copies only: no scalar access, no arithmetic. */
struct int4b_t {
    uint8_t bits_;
};

namespace detail {
template <typename T> struct Type;
template <> struct Type<float> {
    static constexpr int code = NPU_F32;
    static __aicore__ inline uint64_t bits(float v) { return npusim_detail::f32_bits(v); }
};
template <> struct Type<half> {
    static constexpr int code = NPU_F16;
    static __aicore__ inline uint64_t bits(half v) { return v.bits_; }
};
template <> struct Type<bfloat16_t> {
    static constexpr int code = NPU_BF16;
    static __aicore__ inline uint64_t bits(bfloat16_t v) { return v.bits_; }
};
template <> struct Type<int32_t> {
    static constexpr int code = NPU_I32;
    static __aicore__ inline uint64_t bits(int32_t v) { return (uint32_t)v; }
};
template <> struct Type<uint32_t> {
    static constexpr int code = NPU_I32;
    static __aicore__ inline uint64_t bits(uint32_t v) { return v; }
};
template <> struct Type<int16_t> {
    static constexpr int code = NPU_I16;
    static __aicore__ inline uint64_t bits(int16_t v) { return (uint16_t)v; }
};
template <> struct Type<uint16_t> {
    static constexpr int code = NPU_I16;
    static __aicore__ inline uint64_t bits(uint16_t v) { return v; }
};
/* 8-bit integers: Cast to and from them, Duplicate and copies; arithmetic on them faults at
 * the instruction (as Ascend C offers none). */
template <> struct Type<int8_t> {
    static constexpr int code = NPU_I8;
    static __aicore__ inline uint64_t bits(int8_t v) { return (uint8_t)v; }
};
template <> struct Type<uint8_t> {
    static constexpr int code = NPU_U8;
    static __aicore__ inline uint64_t bits(uint8_t v) { return v; }
};
template <> struct Type<int4b_t> {
    static constexpr int code = NPU_I4;
    static __aicore__ inline uint64_t bits(int4b_t v) { return v.bits_ & 0xf; }
};
/* Elements per byte of a packed element type (int4b_t: 2); 0 for the others. */
template <typename T> struct Packed {
    static constexpr uint32_t per_byte = 0;
};
template <> struct Packed<int4b_t> {
    static constexpr uint32_t per_byte = 2;
};
/* The bytes of n elements of T, and the elements of T in `bytes`. */
template <typename T> __aicore__ constexpr uint64_t bytes_of(uint64_t n) {
    return Packed<T>::per_byte ? n / Packed<T>::per_byte : n * sizeof(T);
}
template <typename T> __aicore__ constexpr uint32_t count_in(uint64_t bytes) {
    return (uint32_t)(Packed<T>::per_byte ? bytes * Packed<T>::per_byte : bytes / sizeof(T));
}
/* The address of element `offset` from p (int4b_t: offset / 2 bytes; an odd offset would
 * split a byte and is rounded down). */
template <typename T, typename P> __aicore__ inline P *advance(P *p, uint64_t offset) {
    if constexpr (Packed<T>::per_byte != 0) {
        return (P *)((uintptr_t)p + offset / Packed<T>::per_byte);
    } else {
        return p + offset;
    }
}
template <typename T> struct NotPacked {
    static constexpr bool value = Packed<T>::per_byte == 0;
};
template <typename T> struct Identity {
    using type = T;
};
template <typename T> using NoDeduce = typename Identity<T>::type;
} // namespace detail

/* ---- Tensors ------------------------------------------------------------------------------- */

template <typename T> class LocalTensor {
public:
    __aicore__ inline LocalTensor() : ptr_(nullptr), size_(0), pos_(TPosition::VECCALC) {}
    __aicore__ inline LocalTensor(T *ptr, uint32_t size, TPosition pos)
        : ptr_(ptr), size_(size), pos_(pos) {}
    /* Static tensor programming: `tileSize` elements at byte `addr` of the local buffer that
     * holds `pos` (UB for the vector positions, L1 for A1/B1/C1, L0A for A2 ...), with no TPipe;
     * the kernel orders the pipes itself (SetFlag / WaitFlag). The address is 32-byte aligned
     * for the vector and copy instructions; one past the buffer faults the instruction. */
    __aicore__ inline LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize);

    /* The tensor from element `offset` on (the address must stay 32-byte aligned for the
     * vector and copy instructions). */
    __aicore__ inline LocalTensor operator[](uint32_t offset) const {
        return LocalTensor(detail::advance<T>(ptr_, offset), size_ > offset ? size_ - offset : 0,
                           pos_);
    }
    /* Element i by reference, with no synchronisation. */
    __aicore__ inline T &operator()(uint32_t i) const {
        static_assert(detail::NotPacked<T>::value,
                      "LocalTensor<int4b_t>: an element is half a byte and has no reference; "
                      "read the bytes through ReinterpretCast<int8_t>()");
        return ptr_[i];
    }
    /* Element i, after the vector unit and the copies into UB issued so far have finished
     * (the synchronisation the compiler inserts before a scalar read). */
    __aicore__ inline T GetValue(uint32_t i) const {
        static_assert(detail::NotPacked<T>::value,
                      "LocalTensor<int4b_t>::GetValue is not offered by npusim's layer; read the "
                      "bytes through ReinterpretCast<int8_t>() (two elements to a byte)");
        npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        return npusim_detail::volatile_load(ptr_ + i);
    }
    /* Writes element i once every instruction that may still read or write UB is done. */
    __aicore__ inline void SetValue(uint32_t i, T v) const {
        static_assert(detail::NotPacked<T>::value,
                      "LocalTensor<int4b_t>::SetValue is not offered by npusim's layer; write the "
                      "bytes through ReinterpretCast<int8_t>() (two elements to a byte)");
        detail::scalar_owns_ub();
        npusim_detail::volatile_store(ptr_ + i, v);
    }
    __aicore__ inline uint32_t GetSize() const { return size_; }
    __aicore__ inline void SetSize(uint32_t size) { size_ = size; }
    __aicore__ inline uint32_t GetLength() const { return (uint32_t)detail::bytes_of<T>(size_); }
    __aicore__ inline uint64_t GetPhyAddr() const { return (uint64_t)ptr_; }
    __aicore__ inline TPosition GetPosition() const { return pos_; }
    template <typename U> __aicore__ inline LocalTensor<U> ReinterpretCast() const {
        return LocalTensor<U>((U *)ptr_, detail::count_in<U>(detail::bytes_of<T>(size_)), pos_);
    }
    __aicore__ inline T *Ptr() const { return ptr_; }

    /* The operator shorthand: `dst = a + b;`, `dst = a * b;`, `dst = t + beta;`, ... runs the
     * vector API the operator names (Add, Sub, Mul, Div; Adds, Muls) over dst's GetSize()
     * elements, as CANN's layer does. */
    template <typename E, bool = E::npusim_expression>
    __aicore__ inline LocalTensor &operator=(const E &e) {
        e.Run(*this);
        return *this;
    }
    LocalTensor &operator=(const LocalTensor &) = default;
    LocalTensor(const LocalTensor &) = default;

private:
    T *ptr_;
    uint32_t size_;
    TPosition pos_;
};

template <typename T> class GlobalTensor {
public:
    __aicore__ inline GlobalTensor() : ptr_(nullptr), size_(0) {}
    __aicore__ inline void SetGlobalBuffer(__gm__ T *buffer, uint64_t size) {
        ptr_ = buffer;
        size_ = size;
    }
    __aicore__ inline void SetGlobalBuffer(__gm__ T *buffer) {
        ptr_ = buffer;
        size_ = 0;
    }
    __aicore__ inline GlobalTensor operator[](uint64_t offset) const {
        GlobalTensor g;
        g.ptr_ = detail::advance<T>(ptr_, offset);
        g.size_ = size_ > offset ? size_ - offset : 0;
        return g;
    }
    /* Element i, once the copies out to GM issued so far have landed. */
    __aicore__ inline T GetValue(uint64_t i) const {
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        return npusim_detail::volatile_load(ptr_ + i);
    }
    /* Writes element i once the copies that may still read or write GM are done. */
    __aicore__ inline void SetValue(uint64_t i, T v) const {
        npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
        npusim_detail::volatile_store(ptr_ + i, v);
    }
    __aicore__ inline T &operator()(uint64_t i) const { return ptr_[i]; }
    __aicore__ inline uint64_t GetSize() const { return size_; }
    __aicore__ inline __gm__ T *GetPhyAddr() const { return ptr_; }
    __aicore__ inline __gm__ T *GetPhyAddr(uint64_t offset) const { return ptr_ + offset; }

private:
    __gm__ T *ptr_;
    uint64_t size_;
};

/* ---- TPipe, TQue, TBuf --------------------------------------------------------------------- */

class TPipe;

namespace detail {
/* The local buffer a position's storage is carved from. */
enum Storage : uint8_t { UB, L1, L0A, L0B, L0C, BT, STORAGES, NO_STORAGE = 0xff };
__aicore__ constexpr Storage storage(TPosition pos) {
    return pos == TPosition::VECIN || pos == TPosition::VECOUT || pos == TPosition::VECCALC ||
                   pos == TPosition::CO2
               ? UB
           : pos == TPosition::A1 || pos == TPosition::B1 || pos == TPosition::C1 ? L1
           : pos == TPosition::A2                                                ? L0A
           : pos == TPosition::B2                                                ? L0B
           : pos == TPosition::CO1                                               ? L0C
           : pos == TPosition::C2                                                ? BT
                                                                                 : NO_STORAGE;
}
/* A position TQue / TBuf can hold (the rest are not offered: GM, TSCM, SPM, SHM). */
__aicore__ constexpr bool position_offered(TPosition pos) { return storage(pos) != NO_STORAGE; }
/* A local buffer's base address, configured size and name. */
struct Buffer {
    uint64_t base;
    uint64_t bytes;
    const char *name;
};
__aicore__ inline Buffer buffer(Storage where) {
    switch (where) {
    case L1:
        return {NPU_L1_BASE, npu_l1_bytes(), "L1"};
    case L0A:
        return {NPU_L0A_BASE, npu_l0a_bytes(), "L0A"};
    case L0B:
        return {NPU_L0B_BASE, npu_l0b_bytes(), "L0B"};
    case L0C:
        return {NPU_L0C_BASE, npu_l0c_bytes(), "L0C"};
    case BT:
        return {NPU_BT_BASE, npu_bt_bytes(), "BT"};
    default:
        return {NPU_UB_BASE, npu_ub_bytes(), "UB"};
    }
}
/* Aborts the block (code 136) with "API: N bytes do not fit in WHERE (L of C left)" unless
 * `bytes` more fit in a region of `cap` bytes after the `used` bytes handed out already. */
__aicore__ inline void reserve_in(const char *api, const char *where, uint64_t cap, uint32_t used,
                                  uint32_t bytes) {
    if ((uint64_t)used + bytes <= cap) {
        return;
    }
    Out o;
    o.n = 0;
    o.str(api);
    o.str(": ");
    o.num(bytes, 10, false, 0, ' ');
    o.str(" bytes do not fit in ");
    o.str(where);
    o.str(" (");
    o.num(cap > used ? cap - used : 0, 10, false, 0, ' ');
    o.str(" of ");
    o.num(cap, 10, false, 0, ' ');
    o.str(" left)");
    npu_print_bytes(o.buf, o.n);
    npu_abort(136);
}
/* reserve_in for local buffer `where`. */
__aicore__ inline void reserve(const char *api, Storage where, uint32_t used, uint32_t bytes) {
    Buffer b = buffer(where);
    reserve_in(api, b.name, b.bytes, used, bytes);
}

} // namespace detail

template <typename T>
__aicore__ inline LocalTensor<T>::LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize)
    : ptr_((T *)(detail::buffer(detail::storage(pos)).base + addr)), size_(tileSize), pos_(pos) {}

namespace detail {
/* The pipe's bookkeeping (bytes handed out per local buffer, event ids taken per flag) lives
 * at the bottom of the block's own 64 KiB stack window (abi::LOCAL_BASE), zeroed at every
 * block start: per block, and never behind a pointer that escapes, so the compiler keeps the
 * kernel's queues and tensors in registers. A kernel has one TPipe (as Ascend C requires). */
struct PipeState {
    uint32_t used[8]; /* bytes carved so far, by Storage */
    uint64_t events[8]; /* event ids taken for flag (src, dst): byte dst of word src */
    uint32_t atomic; /* SetAtomicAdd's mode for UB -> GM copies: 0 none, else the mover's f2 */
};
__aicore__ inline PipeState *pipe_state() { return (PipeState *)0x20000000UL; }
__aicore__ inline uint32_t align32(uint32_t v) { return (v + 31u) & ~31u; }

/* The producer and consumer pipes of a queue position (-1: no synchronisation). */
__aicore__ constexpr int producer(TPosition pos) {
    return pos == TPosition::VECIN                                 ? NPU_PIPE_MTE2
           : pos == TPosition::VECOUT || pos == TPosition::CO2     ? NPU_PIPE_V
           : pos == TPosition::A1 || pos == TPosition::B1 || pos == TPosition::C1 ? NPU_PIPE_MTE2
           : pos == TPosition::A2 || pos == TPosition::B2          ? NPU_PIPE_MTE1
           : pos == TPosition::CO1                                 ? NPU_PIPE_M
           : pos == TPosition::C2                                  ? NPU_PIPE_MTE1
                                                                   : -1;
}
__aicore__ constexpr int consumer(TPosition pos) {
    return pos == TPosition::VECIN                                 ? NPU_PIPE_V
           : pos == TPosition::VECOUT || pos == TPosition::CO2     ? NPU_PIPE_MTE3
           : pos == TPosition::A1 || pos == TPosition::B1 || pos == TPosition::C1 ? NPU_PIPE_MTE1
           : pos == TPosition::A2 || pos == TPosition::B2          ? NPU_PIPE_M
           : pos == TPosition::CO1                                 ? NPU_PIPE_MTE3
           : pos == TPosition::C2                                  ? NPU_PIPE_M
                                                                   : -1;
}
} // namespace detail

/* The physical buffers, as LocalMemAllocator names them. */
enum class Hardware : uint8_t { GM, UB, L1, L0A, L0B, L0C, BIAS, FIXBUF, MAX };

namespace detail {
/* The position a tensor from buffer `hard` takes by default (the first one that lives there). */
__aicore__ constexpr TPosition default_position(Hardware hard) {
    return hard == Hardware::L1    ? TPosition::A1
           : hard == Hardware::L0A ? TPosition::A2
           : hard == Hardware::L0B ? TPosition::B2
           : hard == Hardware::L0C ? TPosition::CO1
           : hard == Hardware::BIAS ? TPosition::C2
                                    : TPosition::VECCALC;
}
} // namespace detail

/* Static tensor programming's allocator: tensors carved linearly from byte 0 of buffer `hard`
 * (32-byte aligned), with no TPipe (the two are not mixed, as in Ascend C). Running out aborts
 * the block with a message. */
template <Hardware hard = Hardware::UB> class LocalMemAllocator {
    static_assert(hard != Hardware::GM && hard != Hardware::FIXBUF && hard != Hardware::MAX,
                  "LocalMemAllocator: npusim offers UB, L1, L0A, L0B, L0C and BIAS");

public:
    __aicore__ inline LocalMemAllocator() : cur_(0) {}
    /* The byte offset the next tensor starts at. */
    __aicore__ inline uint32_t GetCurAddr() const { return cur_; }
    template <class DataType, uint32_t tileSize> __aicore__ inline LocalTensor<DataType> Alloc() {
        return Alloc<detail::default_position(hard), DataType>(tileSize);
    }
    template <TPosition pos, class DataType, uint32_t tileSize>
    __aicore__ inline LocalTensor<DataType> Alloc() {
        return Alloc<pos, DataType>(tileSize);
    }
    template <class DataType> __aicore__ inline LocalTensor<DataType> Alloc(uint32_t tileSize) {
        return Alloc<detail::default_position(hard), DataType>(tileSize);
    }
    template <TPosition pos, class DataType>
    __aicore__ inline LocalTensor<DataType> Alloc(uint32_t tileSize) {
        static_assert(detail::storage(pos) == detail::storage(detail::default_position(hard)),
                      "LocalMemAllocator::Alloc: the position is not in the allocator's buffer");
        uint32_t bytes = detail::align32(tileSize * (uint32_t)sizeof(DataType));
        detail::reserve("LocalMemAllocator::Alloc", detail::storage(pos), cur_, bytes);
        LocalTensor<DataType> t(pos, cur_, tileSize);
        cur_ += bytes;
        return t;
    }

private:
    uint32_t cur_;
};

class TPipe {
public:
    __aicore__ inline TPipe() { Clear(); }
    /* Carves num slots of len bytes (each rounded up to 32) for the queue from the local
     * buffer of its position: UB (VECIN, VECOUT, VECCALC, CO2), L1 (A1, B1, C1), L0A (A2), L0B
     * (B2), L0C (CO1), BT (C2). Each buffer is carved linearly from offset 0; running out
     * aborts. */
    template <class Q> __aicore__ inline bool InitBuffer(Q &que, uint8_t num, uint32_t len) {
        uint32_t l = detail::align32(len);
        que.Init(Carve(detail::storage(Q::kPosition), (uint32_t)num * l), num, l, *this);
        return true;
    }
    template <class B> __aicore__ inline bool InitBuffer(B &buf, uint32_t len) {
        uint32_t l = detail::align32(len);
        buf.Init(Carve(detail::storage(B::kPosition), l), l);
        return true;
    }
    /* Carves len bytes (rounded up to 32) of the pool's position's buffer for a TBufPool,
     * whose InitBuffer calls then carve from it; with `shareWith`, the pool takes the same
     * bytes as that pool instead (the two are used one after the other, Reset between). */
    template <class P> __aicore__ inline bool InitBufPool(P &pool, uint32_t len) {
        uint32_t l = detail::align32(len);
        pool.Attach(Carve(detail::storage(P::kPosition), l), l, this);
        return true;
    }
    template <class P, class S>
    __aicore__ inline bool InitBufPool(P &pool, uint32_t len, S &shareWith) {
        return pool.Share(len, shareWith, this);
    }
    /* Reserves the next free event id of flag (src, dst); the layer keeps id 7 for itself. */
    __aicore__ inline int32_t TakeEvent(int src, int dst) {
        uint32_t n = Taken(src, dst);
        if (n >= NPUSIM_SYNC_EVENT) {
            detail::fail("TPipe: more than 7 queues or events on one pair of pipes");
        }
        SetTaken(src, dst, n + 1);
        return (int32_t)n;
    }
    template <HardEvent e> __aicore__ inline TEventID AllocEventID() {
        return (TEventID)TakeEvent((int)e >> 4, (int)e & 0xf);
    }
    template <HardEvent e> __aicore__ inline void ReleaseEventID(TEventID id) {
        uint32_t n = Taken((int)e >> 4, (int)e & 0xf);
        if (n > 0 && (uint32_t)id == n - 1) {
            SetTaken((int)e >> 4, (int)e & 0xf, n - 1);
        }
    }
    /* An event id free for a set / wait pair issued back to back. */
    template <HardEvent e> __aicore__ inline TEventID FetchEventID() {
        return (TEventID)Taken((int)e >> 4, (int)e & 0xf);
    }
    __aicore__ inline TEventID FetchEventID(HardEvent e) {
        return (TEventID)Taken((int)e >> 4, (int)e & 0xf);
    }
    /* Drains every pipe. */
    __aicore__ inline void Destroy() { npu_pipe_barrier(NPU_PIPE_ALL); }
    __aicore__ inline void Reset() {
        npu_pipe_barrier(NPU_PIPE_ALL);
        Clear();
    }
    /* UB bytes handed out so far. */
    __aicore__ inline uint32_t Used() const { return detail::pipe_state()->used[detail::UB]; }

private:
    __aicore__ inline void Clear() {
        detail::PipeState *st = detail::pipe_state();
        for (int i = 0; i < 8; i++) {
            st->used[i] = 0;
            st->events[i] = 0;
        }
    }
    __aicore__ inline uint8_t *Carve(detail::Storage where, uint32_t bytes) {
        detail::PipeState *st = detail::pipe_state();
        uint32_t used = st->used[where];
        detail::reserve("TPipe::InitBuffer", where, used, bytes);
        st->used[where] = used + bytes;
        return (uint8_t *)(detail::buffer(where).base + used);
    }
    __aicore__ inline uint32_t Taken(int src, int dst) const {
        return (uint32_t)(detail::pipe_state()->events[src] >> (8 * dst)) & 0xff;
    }
    __aicore__ inline void SetTaken(int src, int dst, uint32_t n) {
        uint64_t &w = detail::pipe_state()->events[src];
        uint64_t shift = 8 * (uint64_t)dst;
        w = (w & ~(0xffULL << shift)) | ((uint64_t)n << shift);
    }
};

/* A pool of one position's buffer, carved from the TPipe (TPipe::InitBufPool) or from another
 * pool: its InitBuffer calls carve queues and buffers from the pool's bytes, InitBufPool
 * carves a sub-pool (or shares another pool's bytes), and Reset hands the bytes out again
 * from the start. Running out of the pool aborts the block with a message. */
template <TPosition pos, uint32_t bufIDSize = 4> class TBufPool {
public:
    static constexpr TPosition kPosition = pos;
    static_assert(detail::position_offered(pos), "TBufPool: npusim offers the VECIN, VECOUT, "
                                                 "VECCALC and cube positions");
    __aicore__ inline TBufPool() : base_(nullptr), len_(0), used_(0), pipe_(nullptr) {}
    template <class Q> __aicore__ inline bool InitBuffer(Q &que, uint8_t num, uint32_t len) {
        static_assert(detail::storage(Q::kPosition) == detail::storage(pos),
                      "TBufPool::InitBuffer: the queue's position is in another buffer");
        uint32_t l = detail::align32(len);
        que.Init(Take("TBufPool::InitBuffer", (uint32_t)num * l), num, l, *pipe_);
        return true;
    }
    template <class B> __aicore__ inline bool InitBuffer(B &buf, uint32_t len) {
        static_assert(detail::storage(B::kPosition) == detail::storage(pos),
                      "TBufPool::InitBuffer: the buffer's position is in another buffer");
        uint32_t l = detail::align32(len);
        buf.Init(Take("TBufPool::InitBuffer", l), l);
        return true;
    }
    template <class P> __aicore__ inline bool InitBufPool(P &sub, uint32_t len) {
        static_assert(detail::storage(P::kPosition) == detail::storage(pos),
                      "TBufPool::InitBufPool: the sub-pool's position is in another buffer");
        uint32_t l = detail::align32(len);
        sub.Attach(Take("TBufPool::InitBufPool", l), l, pipe_);
        return true;
    }
    template <class P, class S>
    __aicore__ inline bool InitBufPool(P &sub, uint32_t len, S &shareWith) {
        return sub.Share(len, shareWith, pipe_);
    }
    /* Hands the pool's bytes out again from its start (what was carved before is the
     * kernel's to stop using). */
    __aicore__ inline void Reset() { used_ = 0; }

    /* (The layer's) the pool takes `len` bytes at `base`. */
    __aicore__ inline void Attach(uint8_t *base, uint32_t len, TPipe *pipe) {
        base_ = base;
        len_ = len;
        used_ = 0;
        pipe_ = pipe;
    }
    /* (The layer's) the pool takes the first `len` bytes of `other`'s. */
    template <class S> __aicore__ inline bool Share(uint32_t len, S &other, TPipe *pipe) {
        static_assert(detail::storage(S::kPosition) == detail::storage(pos),
                      "InitBufPool: the shared pool's position is in another buffer");
        uint32_t l = detail::align32(len);
        detail::reserve_in("InitBufPool (shared)", "the shared pool", other.Length(), 0, l);
        Attach(other.Base(), l, pipe);
        return true;
    }
    __aicore__ inline uint8_t *Base() const { return base_; }
    __aicore__ inline uint32_t Length() const { return len_; }

private:
    __aicore__ inline uint8_t *Take(const char *api, uint32_t bytes) {
        if (base_ == nullptr) {
            detail::fail("TBufPool: the pool was not initialised (TPipe::InitBufPool)");
        }
        detail::reserve_in(api, "the TBufPool", len_, used_, bytes);
        uint8_t *p = base_ + used_;
        used_ += bytes;
        return p;
    }
    uint8_t *base_;
    uint32_t len_;
    uint32_t used_;
    TPipe *pipe_;
};

/* The kernel's pipe (its state is per block; see detail::PipeState). */
__aicore__ inline TPipe *GetTPipePtr() { return (TPipe *)detail::pipe_state(); }

/* DataCacheCleanAndInvalid: a no-op, as dcci (npusim's scalar unit has no data cache). */
enum class CacheLine : uint8_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint8_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
template <typename T, CacheLine entireType, DcciDst dcciDst = DcciDst::CACHELINE_ALL>
__aicore__ inline void DataCacheCleanAndInvalid(const GlobalTensor<T> &) {}
template <typename T, CacheLine entireType, DcciDst dcciDst = DcciDst::CACHELINE_ALL>
__aicore__ inline void DataCacheCleanAndInvalid(const LocalTensor<T> &) {}

/* A queue of `depth` slots between two pipes: VECIN MTE2 -> V, VECOUT and CO2 V -> MTE3,
 * A1 / B1 / C1 MTE2 -> MTE1, A2 / B2 / C2 MTE1 -> M, CO1 M -> MTE3 (npusim's fixpipe). */
template <TPosition pos, int32_t depth = 1> class TQue {
    static_assert(detail::position_offered(pos),
                  "TQue: this TPosition is not offered by npusim's layer (GM, TSCM, SPM and SHM "
                  "are not; see docs/ascendc.md)");

public:
    static constexpr TPosition kPosition = pos;
    __aicore__ inline TQue()
        : base_(nullptr), num_(0), len_(0), alloc_(0), deq_(0), alloc_slot_(0), deq_slot_(0) {}
    __aicore__ inline void Init(uint8_t *base, uint8_t num, uint32_t len, TPipe &pipe) {
        base_ = base;
        num_ = num ? num : 1;
        len_ = len;
        alloc_ = 0;
        deq_ = 0;
        alloc_slot_ = 0;
        deq_slot_ = 0;
        if (kSrc >= 0) {
            enq_event_ = pipe.TakeEvent(kSrc, kDst);
            free_event_ = pipe.TakeEvent(kDst, kSrc);
        }
    }
    /* The next slot; once every slot has been used, waits until the consumer freed it. */
    template <typename T> __aicore__ inline LocalTensor<T> AllocTensor() {
        if (base_ == nullptr) {
            detail::fail("TQue::AllocTensor before TPipe::InitBuffer");
        }
        uint32_t slot = alloc_slot_;
        alloc_slot_ = slot + 1 == num_ ? 0 : slot + 1;
        if (kSrc >= 0 && alloc_ >= num_) {
            npu_wait_flag(kDst, kSrc, free_event_);
        }
        alloc_++;
        return LocalTensor<T>((T *)(base_ + slot * len_), detail::count_in<T>(len_), pos);
    }
    /* Hands a filled tensor to the consumer pipe. */
    template <typename T> __aicore__ inline bool EnQue(const LocalTensor<T> &) {
        if (kSrc >= 0) {
            npu_set_flag(kSrc, kDst, enq_event_);
        }
        return true;
    }
    /* The oldest enqueued tensor; the consumer pipe waits until its producer is done. */
    template <typename T> __aicore__ inline LocalTensor<T> DeQue() {
        uint32_t slot = deq_slot_;
        deq_slot_ = slot + 1 == num_ ? 0 : slot + 1;
        if (kSrc >= 0) {
            npu_wait_flag(kSrc, kDst, enq_event_);
        }
        deq_++;
        return LocalTensor<T>((T *)(base_ + slot * len_), detail::count_in<T>(len_), pos);
    }
    /* Returns the slot: the producer may refill it once the consumer is done with it. */
    template <typename T> __aicore__ inline void FreeTensor(const LocalTensor<T> &) {
        if (kSrc >= 0) {
            npu_set_flag(kDst, kSrc, free_event_);
        }
    }
    __aicore__ inline bool VacantInQue() const { return alloc_ - deq_ < (uint32_t)num_; }
    __aicore__ inline bool HasTensorInQue() const { return alloc_ > deq_; }

private:
    static constexpr int kSrc = detail::producer(pos);
    static constexpr int kDst = detail::consumer(pos);
    uint8_t *base_;
    uint32_t num_;
    uint32_t len_;
    uint32_t alloc_;
    uint32_t deq_;
    uint32_t alloc_slot_;
    uint32_t deq_slot_;
    int32_t enq_event_;
    int32_t free_event_;
};

/* A plain buffer (no queue, no synchronisation) in its position's local buffer. */
template <TPosition pos = TPosition::VECCALC> class TBuf {
    static_assert(detail::position_offered(pos),
                  "TBuf: this TPosition is not offered by npusim's layer (GM, TSCM, SPM and SHM "
                  "are not; see docs/ascendc.md)");

public:
    static constexpr TPosition kPosition = pos;
    __aicore__ inline TBuf() : base_(nullptr), len_(0) {}
    __aicore__ inline void Init(uint8_t *base, uint32_t len) {
        base_ = base;
        len_ = len;
    }
    template <typename T> __aicore__ inline LocalTensor<T> Get() const {
        return LocalTensor<T>((T *)base_, detail::count_in<T>(len_), pos);
    }
    template <typename T> __aicore__ inline LocalTensor<T> Get(uint32_t count) const {
        return LocalTensor<T>((T *)base_, count, pos);
    }

private:
    uint8_t *base_;
    uint32_t len_;
};

/* ---- Data movement ------------------------------------------------------------------------- */

/* blockCount blocks of blockLen 32-byte units; the strides are the gaps between blocks, in
 * 32-byte units, on each side. */
struct DataCopyParams {
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    uint16_t srcStride = 0;
    uint16_t dstStride = 0;
    __aicore__ inline DataCopyParams() {}
    __aicore__ inline DataCopyParams(uint16_t count, uint16_t len, uint16_t src, uint16_t dst)
        : blockCount(count), blockLen(len), srcStride(src), dstStride(dst) {}
};

/* DataCopyPad: blockLen in bytes; the GM-side gap in bytes, the UB-side gap in 32-byte units
 * (each UB block starts on a 32-byte boundary). */
struct DataCopyExtParams {
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;
    uint32_t srcStride = 0;
    uint32_t dstStride = 0;
    uint32_t rsv = 0;
    __aicore__ inline DataCopyExtParams() {}
    __aicore__ inline DataCopyExtParams(uint16_t count, uint32_t len, uint32_t src, uint32_t dst,
                                        uint32_t r)
        : blockCount(count), blockLen(len), srcStride(src), dstStride(dst), rsv(r) {}
};
template <typename T> struct DataCopyPadExtParams {
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = T(0);
    __aicore__ inline DataCopyPadExtParams() {}
    __aicore__ inline DataCopyPadExtParams(bool pad, uint8_t l, uint8_t r, T v)
        : isPad(pad), leftPadding(l), rightPadding(r), paddingValue(v) {}
};

namespace detail {
__aicore__ inline bool in_l1(const void *p) { return ((uint64_t)p >> 24) == (NPU_L1_BASE >> 24); }
/* GM -> the local tensor's buffer (L1 for A1 / B1 / C1, else UB), on MTE2. */
__aicore__ inline void gm_to_local(void *dst, const void *src, uint32_t rows, uint32_t row_bytes,
                                   uint32_t src_stride, uint32_t dst_stride) {
    if (in_l1(dst)) {
        npusim_detail::move<1>(dst, src, rows, row_bytes, src_stride, dst_stride);
    } else {
        npusim_detail::move<0>(dst, src, rows, row_bytes, src_stride, dst_stride);
    }
}
/* UB -> GM (MTE3): overwriting, or adding into GM after SetAtomicAdd<T>() (the mover's
 * atomic-add modes 1 f32, 2 f16, 3 i32; docs/isa.md). */
__aicore__ inline void ub_to_gm(void *dst, const void *src, uint32_t rows, uint32_t row_bytes,
                                uint32_t src_stride, uint32_t dst_stride) {
    switch (pipe_state()->atomic) {
    case 1: npusim_detail::move<2, 1>(dst, src, rows, row_bytes, src_stride, dst_stride); break;
    case 2: npusim_detail::move<2, 2>(dst, src, rows, row_bytes, src_stride, dst_stride); break;
    case 3: npusim_detail::move<2, 3>(dst, src, rows, row_bytes, src_stride, dst_stride); break;
    default: npusim_detail::move<2>(dst, src, rows, row_bytes, src_stride, dst_stride); break;
    }
}
} // namespace detail

/* GM -> UB or L1 (A1 / B1 / C1), `count` contiguous elements (MTE2). */
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src,
                                uint32_t count) {
    uint32_t bytes = (uint32_t)detail::bytes_of<T>(count);
    detail::gm_to_local(dst.Ptr(), src.GetPhyAddr(), 1, bytes, bytes, bytes);
}
/* UB -> GM (MTE3). */
template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src,
                                uint32_t count) {
    uint32_t bytes = (uint32_t)detail::bytes_of<T>(count);
    detail::ub_to_gm(dst.GetPhyAddr(), src.Ptr(), 1, bytes, bytes, bytes);
}
/* UB -> UB (on the vector pipe). */
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                uint32_t count) {
    uint32_t bytes = (uint32_t)detail::bytes_of<T>(count);
    if (bytes % 4 == 0) {
        npusim_detail::vmov(dst.Ptr(), src.Ptr(), bytes / 4, NPU_F32);
    } else {
        npusim_detail::vmov(dst.Ptr(), src.Ptr(), bytes / 2, NPU_I16);
    }
}
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src,
                                const DataCopyParams &p) {
    uint32_t row = (uint32_t)p.blockLen * 32;
    detail::gm_to_local(dst.Ptr(), src.GetPhyAddr(), p.blockCount, row, row + p.srcStride * 32u,
                        row + p.dstStride * 32u);
}
template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src,
                                const DataCopyParams &p) {
    uint32_t row = (uint32_t)p.blockLen * 32;
    detail::ub_to_gm(dst.GetPhyAddr(), src.Ptr(), p.blockCount, row, row + p.srcStride * 32u,
                     row + p.dstStride * 32u);
}
/* GM -> UB with byte-granular blocks; padding values are not written (the UB tail of each
 * block keeps what it held). */
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src,
                                   const DataCopyExtParams &p, const DataCopyPadExtParams<T> &) {
    npusim_detail::move<0>(dst.Ptr(), src.GetPhyAddr(), p.blockCount, p.blockLen,
                      p.blockLen + p.srcStride, detail::align32(p.blockLen) + p.dstStride * 32u);
}
template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src,
                                   const DataCopyExtParams &p) {
    detail::ub_to_gm(dst.GetPhyAddr(), src.Ptr(), p.blockCount, p.blockLen,
                      detail::align32(p.blockLen) + p.srcStride * 32u, p.blockLen + p.dstStride);
}

/* ---- Atomic add on copies out, filling GM, cross-block barriers --------------------------- */

namespace detail {
template <typename... T> struct AlwaysFalse {
    static constexpr bool value = false;
};
template <typename T> struct AtomicMode {
    static constexpr uint32_t value = Type<T>::code == NPU_F32 && sizeof(T) == 4   ? 1
                                      : Type<T>::code == NPU_F16 && sizeof(T) == 2 ? 2
                                      : Type<T>::code == NPU_I32 && sizeof(T) == 4 ? 3
                                                                                    : 0;
};
} // namespace detail

/* Every UB -> GM DataCopy / DataCopyPad from here on adds its elements (as T) to what GM holds
 * instead of overwriting them, until SetAtomicNone. float, half and int32_t. */
template <typename T> __aicore__ inline void SetAtomicAdd() {
    static_assert(detail::AtomicMode<T>::value != 0,
                  "SetAtomicAdd: npusim's layer adds float, half and int32_t (int8_t, int16_t and "
                  "bfloat16_t atomic adds are not offered)");
    detail::pipe_state()->atomic = detail::AtomicMode<T>::value;
}
/* The type of the atomic add in force (SetAtomicAdd sets it too). */
template <typename T> __aicore__ inline void SetAtomicType() {
    static_assert(detail::AtomicMode<T>::value != 0,
                  "SetAtomicType: npusim's layer adds float, half and int32_t");
    if (detail::pipe_state()->atomic != 0) {
        detail::pipe_state()->atomic = detail::AtomicMode<T>::value;
    }
}
/* Copies out overwrite GM again. */
__aicore__ inline void SetAtomicNone() { detail::pipe_state()->atomic = 0; }
__aicore__ inline void DisableDmaAtomic() { SetAtomicNone(); }
template <typename T> __aicore__ inline void SetAtomicMax() {
    static_assert(detail::AlwaysFalse<T>::value, "SetAtomicMax is not offered by npusim's layer "
                                           "(SetAtomicAdd is)");
}
template <typename T> __aicore__ inline void SetAtomicMin() {
    static_assert(detail::AlwaysFalse<T>::value, "SetAtomicMin is not offered by npusim's layer "
                                           "(SetAtomicAdd is)");
}

/* size elements of gm from its start set to value, by the scalar unit once the copies that may
 * still read or write GM are done (so copies issued later see it). */
template <typename T>
__aicore__ inline void InitGlobalMemory(const GlobalTensor<T> &gm, const uint64_t size,
                                        const detail::NoDeduce<T> &value) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4,
                  "InitGlobalMemory: 16- and 32-bit element types (uint16_t, int16_t, half, "
                  "uint32_t, int32_t, float)");
    npu_set_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_wait_flag(NPU_PIPE_MTE2, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_set_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_wait_flag(NPU_PIPE_MTE3, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    T *p = (T *)gm.GetPhyAddr();
    for (uint64_t i = 0; i < size; i++) {
        npusim_detail::volatile_store(p + i, (T)value);
    }
}
/* Fill and InitOutput are InitGlobalMemory's earlier names. */
template <typename T>
__aicore__ inline void Fill(const GlobalTensor<T> &gm, const uint64_t size,
                            const detail::NoDeduce<T> &value) {
    InitGlobalMemory(gm, size, value);
}
template <typename T>
__aicore__ inline void InitOutput(const GlobalTensor<T> &gm, const uint64_t size,
                                  const detail::NoDeduce<T> &value) {
    InitGlobalMemory(gm, size, value);
}

/* SyncAll: a barrier across the blocks of the launch. Each block's pipes drain, then it waits
 * until every block (the software form: the first `usedCores`, when given) has reached it, and
 * all go on together, in simulated time from when the last one arrived plus a round trip
 * through GM. As on hardware, each block needs a core of its own: a launch of more blocks than
 * cores, or a block that returns without the barrier the others wait at, fails with a message
 * naming them (on hardware it hangs). The software form's workspaces are accepted as CANN
 * specifies them (gmWorkspace zeroed, both at least cores * 32 bytes) and left untouched. */
template <bool isAIVOnly = true>
__aicore__ inline void SyncAll(const GlobalTensor<int32_t> &gmWorkspace,
                               const LocalTensor<int32_t> &ubWorkspace,
                               const int32_t usedCores = 0) {
    (void)gmWorkspace;
    (void)ubWorkspace;
    npu_sync_all(usedCores);
}
template <bool isAIVOnly = true> __aicore__ inline void SyncAll() { npu_sync_all(0); }

/* ---- Vector: tensor-count form ------------------------------------------------------------- */

#define NPUSIM_BINARY(Name, fn)                                                                \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src0,         \
                                const LocalTensor<T> &src1, const int32_t &count) {            \
        fn(dst.Ptr(), src0.Ptr(), src1.Ptr(), (uint64_t)count, detail::Type<T>::code);         \
    }
NPUSIM_BINARY(Add, npusim_detail::vadd)
NPUSIM_BINARY(Sub, npusim_detail::vsub)
NPUSIM_BINARY(Mul, npusim_detail::vmul)
NPUSIM_BINARY(Div, npusim_detail::vdiv)
NPUSIM_BINARY(Max, npusim_detail::vmax)
NPUSIM_BINARY(Min, npusim_detail::vmin)
/* Bitwise on int16_t / uint16_t (and int32_t / uint32_t): a float type stops the compile. */
#define NPUSIM_BITWISE(Name, fn)                                                               \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src0,         \
                                const LocalTensor<T> &src1, const int32_t &count) {            \
        static_assert(detail::Type<T>::code == NPU_I16 || detail::Type<T>::code == NPU_I32,    \
                      #Name ": integer tensors only (int16_t, uint16_t, int32_t, uint32_t)");  \
        fn(dst.Ptr(), src0.Ptr(), src1.Ptr(), (uint64_t)count, detail::Type<T>::code);         \
    }
NPUSIM_BITWISE(And, npusim_detail::vand)
NPUSIM_BITWISE(Or, npusim_detail::vor)
#undef NPUSIM_BITWISE
template <typename T, bool isSetMask = true>
__aicore__ inline void Not(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count) {
    static_assert(detail::Type<T>::code == NPU_I16 || detail::Type<T>::code == NPU_I32,
                  "Not: integer tensors only (int16_t, uint16_t, int32_t, uint32_t)");
    npusim_detail::vnot(dst.Ptr(), src.Ptr(), (uint64_t)count, detail::Type<T>::code);
}

#define NPUSIM_SCALAR(Name, fn)                                                                \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const detail::NoDeduce<T> &scalar, const int32_t &count) {     \
        fn(dst.Ptr(), src.Ptr(), detail::Type<T>::bits(scalar), (uint64_t)count,               \
           detail::Type<T>::code);                                                             \
    }
NPUSIM_SCALAR(Adds, npusim_detail::vadds)
NPUSIM_SCALAR(Muls, npusim_detail::vmuls)
NPUSIM_SCALAR(Maxs, npusim_detail::vmaxs)
NPUSIM_SCALAR(Mins, npusim_detail::vmins)
NPUSIM_SCALAR(LeakyRelu, npusim_detail::vlrelu)

#define NPUSIM_UNARY(Name, fn)                                                                 \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const int32_t &count) {                                        \
        fn(dst.Ptr(), src.Ptr(), (uint64_t)count, detail::Type<T>::code);                      \
    }
NPUSIM_UNARY(Exp, npusim_detail::vexp)
NPUSIM_UNARY(Ln, npusim_detail::vln)
NPUSIM_UNARY(Sqrt, npusim_detail::vsqrt)
NPUSIM_UNARY(Relu, npusim_detail::vrelu)
NPUSIM_UNARY(Abs, npusim_detail::vabs)
NPUSIM_UNARY(Reciprocal, npusim_detail::vrec)

template <typename T, bool isSetMask = true>
__aicore__ inline void Duplicate(const LocalTensor<T> &dst, const detail::NoDeduce<T> &scalar,
                                 const int32_t &count) {
    npusim_detail::vdup(dst.Ptr(), detail::Type<T>::bits(scalar), (uint64_t)count, detail::Type<T>::code);
}

/* ---- LocalTensor operators ----------------------------------------------------------------- */

namespace detail {
enum class ExprOp : uint8_t { Add, Sub, Mul, Div };
/* `a op b` on two tensors, run when assigned to a LocalTensor. */
template <typename T, ExprOp op> struct TensorExpr {
    static constexpr bool npusim_expression = true;
    LocalTensor<T> a, b;
    __aicore__ inline void Run(const LocalTensor<T> &dst) const {
        const int32_t n = (int32_t)dst.GetSize();
        if constexpr (op == ExprOp::Add) {
            Add(dst, a, b, n);
        } else if constexpr (op == ExprOp::Sub) {
            Sub(dst, a, b, n);
        } else if constexpr (op == ExprOp::Mul) {
            Mul(dst, a, b, n);
        } else {
            Div(dst, a, b, n);
        }
    }
};
/* `t + s`, `t - s`, `t * s` with a scalar s (Adds; Adds of -s, exact; Muls). */
template <typename T, ExprOp op> struct ScalarExpr {
    static constexpr bool npusim_expression = true;
    LocalTensor<T> a;
    T s;
    __aicore__ inline void Run(const LocalTensor<T> &dst) const {
        const int32_t n = (int32_t)dst.GetSize();
        if constexpr (op == ExprOp::Add) {
            Adds(dst, a, s, n);
        } else if constexpr (op == ExprOp::Sub) {
            Adds(dst, a, (T)(-(float)s), n);
        } else {
            Muls(dst, a, s, n);
        }
    }
};
} // namespace detail

#define NPUSIM_TENSOR_OPERATOR(sym, op)                                                        \
    template <typename T>                                                                      \
    __aicore__ inline detail::TensorExpr<T, detail::ExprOp::op> operator sym(                  \
        const LocalTensor<T> &a, const LocalTensor<T> &b) {                                    \
        return {a, b};                                                                         \
    }
NPUSIM_TENSOR_OPERATOR(+, Add)
NPUSIM_TENSOR_OPERATOR(-, Sub)
NPUSIM_TENSOR_OPERATOR(*, Mul)
NPUSIM_TENSOR_OPERATOR(/, Div)
#undef NPUSIM_TENSOR_OPERATOR
template <typename T>
__aicore__ inline detail::ScalarExpr<T, detail::ExprOp::Add> operator+(const LocalTensor<T> &a,
                                                                       const detail::NoDeduce<T> &s) {
    return {a, s};
}
template <typename T>
__aicore__ inline detail::ScalarExpr<T, detail::ExprOp::Add> operator+(const detail::NoDeduce<T> &s,
                                                                       const LocalTensor<T> &a) {
    return {a, s};
}
template <typename T>
__aicore__ inline detail::ScalarExpr<T, detail::ExprOp::Sub> operator-(const LocalTensor<T> &a,
                                                                       const detail::NoDeduce<T> &s) {
    return {a, s};
}
template <typename T>
__aicore__ inline detail::ScalarExpr<T, detail::ExprOp::Mul> operator*(const LocalTensor<T> &a,
                                                                       const detail::NoDeduce<T> &s) {
    return {a, s};
}
template <typename T>
__aicore__ inline detail::ScalarExpr<T, detail::ExprOp::Mul> operator*(const detail::NoDeduce<T> &s,
                                                                       const LocalTensor<T> &a) {
    return {a, s};
}

/* ---- Reductions ---------------------------------------------------------------------------- */

/* dst[0] = sum of src[0..count) (exact, rounded once to T). workLocal is not used. */
template <typename T, bool isSetMask = true>
__aicore__ inline void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                 const LocalTensor<T> &, const int32_t count) {
    npusim_detail::vsum(dst.Ptr(), src.Ptr(), (uint64_t)count, detail::Type<T>::code);
}
/* dst[0] = max of src[0..count). calIndex (the position of the maximum) is not supported and
 * aborts the block. */
template <typename T, bool isSetMask = true>
__aicore__ inline void ReduceMax(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                 const LocalTensor<T> &, const int32_t count,
                                 bool calIndex = false) {
    if (calIndex) {
        detail::fail("ReduceMax: calIndex is not supported by npusim's layer");
    }
    npusim_detail::vrmax(dst.Ptr(), src.Ptr(), (uint64_t)count, detail::Type<T>::code);
}
/* dst[0] = min of src[0..count), through workLocal (count elements): -max(-src). */
template <typename T, bool isSetMask = true>
__aicore__ inline void ReduceMin(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                 const LocalTensor<T> &work, const int32_t count,
                                 bool calIndex = false) {
    if (calIndex) {
        detail::fail("ReduceMin: calIndex is not supported by npusim's layer");
    }
    const int c = detail::Type<T>::code;
    npusim_detail::vmuls(work.Ptr(), src.Ptr(), detail::Type<T>::bits(T(-1)), (uint64_t)count, c);
    npusim_detail::vrmax(dst.Ptr(), work.Ptr(), (uint64_t)count, c);
    npusim_detail::vmuls(dst.Ptr(), dst.Ptr(), detail::Type<T>::bits(T(-1)), 1, c);
}

/* ---- Casts, compare, select ---------------------------------------------------------------- */

enum class RoundMode : uint8_t {
    CAST_NONE = NPU_ROUND_NONE,
    CAST_RINT = NPU_ROUND_RINT,
    CAST_FLOOR = NPU_ROUND_FLOOR,
    CAST_CEIL = NPU_ROUND_CEIL,
    CAST_ROUND = NPU_ROUND_ROUND,
    CAST_TRUNC = NPU_ROUND_TRUNC,
    CAST_ODD = NPU_ROUND_ODD,
};

namespace detail {
/* Ascend C's Cast table for the 910B (Atlas A2): the round modes each source -> destination
 * pair takes, as bits over RoundMode (0: the pair is not offered). */
constexpr uint32_t CAST_NONE_ONLY = 1u << (int)RoundMode::CAST_NONE;
constexpr uint32_t CAST_ROUNDING = (1u << (int)RoundMode::CAST_RINT) |
                                   (1u << (int)RoundMode::CAST_FLOOR) |
                                   (1u << (int)RoundMode::CAST_CEIL) |
                                   (1u << (int)RoundMode::CAST_ROUND) |
                                   (1u << (int)RoundMode::CAST_TRUNC);
constexpr uint32_t CAST_ROUNDING_OR_NONE = CAST_ROUNDING | CAST_NONE_ONLY;
template <typename D, typename S> struct CastModes {
    static constexpr uint32_t value = 0;
};
#define NPUSIM_CAST_PAIR(S, D, MODES)                                                          \
    template <> struct CastModes<D, S> {                                                       \
        static constexpr uint32_t value = MODES;                                               \
    };
NPUSIM_CAST_PAIR(int4b_t, half, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(int8_t, half, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(uint8_t, half, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(int16_t, half, CAST_ROUNDING_OR_NONE)
NPUSIM_CAST_PAIR(int16_t, float, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(half, int4b_t, CAST_ROUNDING_OR_NONE)
NPUSIM_CAST_PAIR(half, int8_t, CAST_ROUNDING_OR_NONE)
NPUSIM_CAST_PAIR(half, uint8_t, CAST_ROUNDING_OR_NONE)
NPUSIM_CAST_PAIR(half, int16_t, CAST_ROUNDING)
NPUSIM_CAST_PAIR(half, int32_t, CAST_ROUNDING)
NPUSIM_CAST_PAIR(half, float, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(bfloat16_t, int32_t, CAST_ROUNDING)
NPUSIM_CAST_PAIR(bfloat16_t, float, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(int32_t, int16_t, CAST_NONE_ONLY)
NPUSIM_CAST_PAIR(int32_t, float, CAST_ROUNDING_OR_NONE)
NPUSIM_CAST_PAIR(float, int16_t, CAST_ROUNDING)
NPUSIM_CAST_PAIR(float, half, CAST_ROUNDING_OR_NONE | (1u << (int)RoundMode::CAST_ODD))
NPUSIM_CAST_PAIR(float, bfloat16_t, CAST_ROUNDING)
NPUSIM_CAST_PAIR(float, int32_t, CAST_ROUNDING)
NPUSIM_CAST_PAIR(float, float, CAST_ROUNDING)
#undef NPUSIM_CAST_PAIR
template <typename D, typename S> __aicore__ constexpr bool cast_mode_ok(RoundMode m) {
    return CastModes<D, S>::value == 0 || (CastModes<D, S>::value >> (int)m & 1) != 0;
}
template <typename T> struct TypeName {
    static constexpr const char *name = "this type";
};
#define NPUSIM_TYPE_NAME(T)                                                                     \
    template <> struct TypeName<T> {                                                            \
        static constexpr const char *name = #T;                                                 \
    };
NPUSIM_TYPE_NAME(float)
NPUSIM_TYPE_NAME(half)
NPUSIM_TYPE_NAME(bfloat16_t)
NPUSIM_TYPE_NAME(int32_t)
NPUSIM_TYPE_NAME(uint32_t)
NPUSIM_TYPE_NAME(int16_t)
NPUSIM_TYPE_NAME(uint16_t)
NPUSIM_TYPE_NAME(int8_t)
NPUSIM_TYPE_NAME(uint8_t)
NPUSIM_TYPE_NAME(int4b_t)
#undef NPUSIM_TYPE_NAME
constexpr const char *ROUND_MODE_NAMES[] = {"CAST_NONE",  "CAST_RINT",  "CAST_FLOOR", "CAST_CEIL",
                                            "CAST_ROUND", "CAST_TRUNC", "CAST_ODD"};
/* A round mode known only at run time that the pair does not take: the block stops naming
 * both (a constant one stops the compile, below). */
template <typename D, typename S> [[noreturn]] __aicore__ inline void cast_mode_refused(RoundMode m) {
    Out o;
    o.n = 0;
    o.str("Cast: RoundMode::");
    o.str((uint32_t)m < 7 ? ROUND_MODE_NAMES[(uint32_t)m] : "(not a RoundMode)");
    o.str(" is not in Ascend C's Cast table for ");
    o.str(TypeName<S>::name);
    o.str(" -> ");
    o.str(TypeName<D>::name);
    o.str(" on the 910B");
    npu_print_bytes(o.buf, o.n);
    npu_abort(135);
}
template <typename T, typename U> struct Same {
    static constexpr bool value = false;
};
template <typename T> struct Same<T, T> {
    static constexpr bool value = true;
};
} // namespace detail

namespace detail {
/* The pair's checks (Ascend C's Cast table for the 910B): a pair outside it stops the compile
 * naming its source type and the destinations it has. True when the pair is offered. */
template <typename D, typename S> __aicore__ constexpr bool cast_pair_offered() {
    using detail::Same;
    constexpr bool ok = detail::CastModes<D, S>::value != 0;
    static_assert(!Same<S, int32_t>::value || !Same<D, half>::value,
                  "Cast int32_t -> half: Ascend C scales by SetDeqScale(half), which npusim's "
                  "layer does not offer; cast to float, Muls, then cast to half");
    static_assert(ok || !Same<S, float>::value,
                  "Cast from float: Ascend C's Cast table for the 910B goes to half, "
                  "bfloat16_t, int16_t, int32_t and float (int64_t: npusim's vector unit has no "
                  "64-bit integers)");
    static_assert(ok || !Same<S, half>::value,
                  "Cast from half: Ascend C's Cast table for the 910B goes to float, int32_t, "
                  "int16_t, int8_t, uint8_t and int4b_t");
    static_assert(ok || !Same<S, bfloat16_t>::value,
                  "Cast from bfloat16_t: Ascend C's Cast table for the 910B goes to float and "
                  "int32_t");
    static_assert(ok || !Same<S, int32_t>::value || Same<D, half>::value,
                  "Cast from int32_t: Ascend C's Cast table for the 910B goes to float, int16_t "
                  "and half (int64_t: npusim's vector unit has no 64-bit integers)");
    static_assert(ok || !Same<S, int16_t>::value,
                  "Cast from int16_t: Ascend C's Cast table for the 910B goes to half and float");
    static_assert(ok || !(Same<S, int8_t>::value || Same<S, uint8_t>::value ||
                          Same<S, int4b_t>::value),
                  "Cast from int8_t / uint8_t / int4b_t: Ascend C's Cast table for the 910B "
                  "goes to half only");
    static_assert(ok || Same<S, float>::value || Same<S, half>::value ||
                      Same<S, bfloat16_t>::value || Same<S, int32_t>::value ||
                      Same<S, int16_t>::value || Same<S, int8_t>::value ||
                      Same<S, uint8_t>::value || Same<S, int4b_t>::value,
                  "Cast: this source type is not in Ascend C's Cast table for the 910B (float, "
                  "half, bfloat16_t, int32_t, int16_t, int8_t, uint8_t, int4b_t)");
    return ok;
}
/* A round mode known only at run time, and the int4b_t counts, checked at run time. */
template <typename D, typename S> __aicore__ inline void cast_checks(RoundMode mode, uint32_t n) {
    if (!cast_mode_ok<D, S>(mode)) {
        cast_mode_refused<D, S>(mode);
    }
    if ((Packed<D>::per_byte || Packed<S>::per_byte) && n % 2 != 0) {
        fail("Cast: an int4b_t count must be even (two elements to a byte)");
    }
}
} // namespace detail

/* A constant round mode the pair does not take stops the compile. */
#define NPUSIM_CAST_MODE_CHECK(mode)                                                            \
    __attribute__((diagnose_if(!detail::cast_mode_ok<D, S>(mode),                                  \
                               "Cast: this RoundMode is not in Ascend C's Cast table for this "    \
                               "source -> destination pair on the 910B (CAST_ODD: float -> half "  \
                               "only; no CAST_NONE for half / float -> int16_t / int32_t, "        \
                               "bfloat16_t -> int32_t, float -> bfloat16_t / float; the "          \
                               "widening casts take CAST_NONE only)",                              \
                               "error")))

/* Cast(dst, src, roundMode, count): count elements of src converted to dst's type, rounded once
 * with roundMode; on exactly the pairs and modes of Ascend C's Cast table for the 910B. An
 * integer destination saturates at its range (NaN -> 0); float -> half saturates a finite
 * value past half's range at +-65504 in every mode (the table: overflow saturates), +-inf and
 * NaN staying. Another pair stops the compile naming its source type and the destinations it
 * has; a constant round mode the pair does not take stops the compile, one known only at run
 * time aborts the block naming both. int4b_t counts must be even (two elements to a byte). */
template <typename D, typename S, bool isSetMask = true>
__aicore__ inline void Cast(const LocalTensor<D> &dst, const LocalTensor<S> &src,
                            const RoundMode &mode, const uint32_t count)
    NPUSIM_CAST_MODE_CHECK(mode) {
    if constexpr (detail::cast_pair_offered<D, S>()) {
        detail::cast_checks<D, S>(mode, count);
        npu_vcvt(dst.Ptr(), detail::Type<D>::code, src.Ptr(), detail::Type<S>::code, (int)mode,
                 count);
    }
}

enum class CMPMODE : uint8_t {
    LT = NPU_CMP_LT,
    GT = NPU_CMP_GT,
    EQ = NPU_CMP_EQ,
    LE = NPU_CMP_LE,
    GE = NPU_CMP_GE,
    NE = NPU_CMP_NE,
};
enum class SELMODE : uint8_t {
    VSEL_CMPMASK_SPR = 0,
    VSEL_TENSOR_SCALAR_MODE = 1,
    VSEL_TENSOR_TENSOR_MODE = 2,
};

/* Bit i of dst (a byte mask, ceil(count / 8) bytes) = src0[i] cmp src1[i]. */
template <typename T, typename U>
__aicore__ inline void Compare(const LocalTensor<U> &dst, const LocalTensor<T> &src0,
                               const LocalTensor<T> &src1, CMPMODE mode, uint32_t count) {
    npu_vcmp(dst.Ptr(), src0.Ptr(), src1.Ptr(), count, detail::Type<T>::code, (int)mode);
}
/* dst[i] = mask bit i ? src0[i] : src1[i]. */
template <typename T, typename U>
__aicore__ inline void Select(const LocalTensor<T> &dst, const LocalTensor<U> &selMask,
                              const LocalTensor<T> &src0, const LocalTensor<T> &src1, SELMODE,
                              uint32_t count) {
    npu_vsel(dst.Ptr(), selMask.Ptr(), src0.Ptr(), src1.Ptr(), count, detail::Type<T>::code);
}
/* dst[i] = mask bit i ? src0[i] : scalar. */
template <typename T, typename U>
__aicore__ inline void Select(const LocalTensor<T> &dst, const LocalTensor<U> &selMask,
                              const LocalTensor<T> &src0, detail::NoDeduce<T> scalar, SELMODE,
                              uint32_t count) {
    npu_vsels(dst.Ptr(), selMask.Ptr(), src0.Ptr(), detail::Type<T>::bits(scalar), count,
              detail::Type<T>::code);
}

/* ---- Vector: mask / repeat form ------------------------------------------------------------ */
/*
 * Each repeat processes up to 256 bytes: `mask` consecutive elements (continuous mask mode)
 * in 32-byte blocks `blkStride` blocks apart; repeats are `repStride` blocks apart. npusim
 * issues one instruction per repeat when the blocks are contiguous, one per block otherwise.
 */
struct BinaryRepeatParams {
    uint8_t dstBlkStride = 1, src0BlkStride = 1, src1BlkStride = 1;
    uint8_t dstRepStride = 8, src0RepStride = 8, src1RepStride = 8;
    __aicore__ inline BinaryRepeatParams() {}
    __aicore__ inline BinaryRepeatParams(uint8_t db, uint8_t s0b, uint8_t s1b, uint8_t dr,
                                         uint8_t s0r, uint8_t s1r)
        : dstBlkStride(db), src0BlkStride(s0b), src1BlkStride(s1b), dstRepStride(dr),
          src0RepStride(s0r), src1RepStride(s1r) {}
};
struct UnaryRepeatParams {
    uint8_t dstBlkStride = 1, srcBlkStride = 1;
    uint8_t dstRepStride = 8, srcRepStride = 8;
    __aicore__ inline UnaryRepeatParams() {}
    __aicore__ inline UnaryRepeatParams(uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr)
        : dstBlkStride((uint8_t)db), srcBlkStride((uint8_t)sb), dstRepStride(dr),
          srcRepStride(sr) {}
};

constexpr int32_t ONE_BLK_SIZE = 32;
constexpr int32_t ONE_REPEAT_BYTE_SIZE = 256;
constexpr int32_t DEFAULT_BLK_NUM = 8;
constexpr int32_t DEFAULT_REPEAT_STRIDE = 8;
constexpr int32_t MAX_REPEAT_TIMES = 255;

namespace detail {
/* Calls f(dst_off, a_off, b_off, n) (byte offsets, n elements) for every run of elements the
 * repeat form touches. */
template <typename T, typename F>
__aicore__ inline void repeats(uint64_t mask, uint8_t repeat, uint8_t db, uint8_t ab, uint8_t bb,
                               uint8_t dr, uint8_t ar, uint8_t br, F f) {
    const uint32_t per_block = 32 / sizeof(T);
    for (uint32_t r = 0; r < repeat; r++) {
        uint32_t d = r * dr * 32u, a = r * ar * 32u, b = r * br * 32u;
        if (db == 1 && ab == 1 && bb == 1) {
            f(d, a, b, (uint32_t)mask);
            continue;
        }
        for (uint32_t k = 0; k * per_block < mask; k++) {
            uint32_t n = (uint32_t)mask - k * per_block;
            f(d + k * db * 32u, a + k * ab * 32u, b + k * bb * 32u, n < per_block ? n : per_block);
        }
    }
}
} // namespace detail

#define NPUSIM_BINARY_REPEAT(Name, fn)                                                         \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src0,         \
                                const LocalTensor<T> &src1, uint64_t mask, const uint8_t repeat,\
                                const BinaryRepeatParams &p) {                                 \
        uint8_t *d0 = (uint8_t *)dst.Ptr();                                                    \
        uint8_t *a0 = (uint8_t *)src0.Ptr();                                                   \
        uint8_t *b0 = (uint8_t *)src1.Ptr();                                                   \
        detail::repeats<T>(mask, repeat, p.dstBlkStride, p.src0BlkStride, p.src1BlkStride,    \
                           p.dstRepStride, p.src0RepStride, p.src1RepStride,                   \
                           [&](uint32_t d, uint32_t a, uint32_t b, uint32_t n) {               \
                               fn(d0 + d, a0 + a, b0 + b, n, detail::Type<T>::code);           \
                           });                                                                 \
    }
NPUSIM_BINARY_REPEAT(Add, npusim_detail::vadd)
NPUSIM_BINARY_REPEAT(Sub, npusim_detail::vsub)
NPUSIM_BINARY_REPEAT(Mul, npusim_detail::vmul)
NPUSIM_BINARY_REPEAT(Div, npusim_detail::vdiv)
NPUSIM_BINARY_REPEAT(Max, npusim_detail::vmax)
NPUSIM_BINARY_REPEAT(Min, npusim_detail::vmin)

#define NPUSIM_SCALAR_REPEAT(Name, fn)                                                         \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const detail::NoDeduce<T> &scalar, uint64_t mask,              \
                                const uint8_t repeat, const UnaryRepeatParams &p) {            \
        uint8_t *d0 = (uint8_t *)dst.Ptr();                                                    \
        uint8_t *a0 = (uint8_t *)src.Ptr();                                                    \
        uint64_t s = detail::Type<T>::bits(scalar);                                            \
        detail::repeats<T>(mask, repeat, p.dstBlkStride, p.srcBlkStride, 1, p.dstRepStride,    \
                           p.srcRepStride, 0, [&](uint32_t d, uint32_t a, uint32_t, uint32_t n) { \
                               fn(d0 + d, a0 + a, s, n, detail::Type<T>::code);                \
                           });                                                                 \
    }
NPUSIM_SCALAR_REPEAT(Adds, npusim_detail::vadds)
NPUSIM_SCALAR_REPEAT(Muls, npusim_detail::vmuls)
NPUSIM_SCALAR_REPEAT(Maxs, npusim_detail::vmaxs)
NPUSIM_SCALAR_REPEAT(Mins, npusim_detail::vmins)
NPUSIM_SCALAR_REPEAT(LeakyRelu, npusim_detail::vlrelu)

#define NPUSIM_UNARY_REPEAT(Name, fn)                                                          \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                uint64_t mask, const uint8_t repeat,                           \
                                const UnaryRepeatParams &p) {                                  \
        uint8_t *d0 = (uint8_t *)dst.Ptr();                                                    \
        uint8_t *a0 = (uint8_t *)src.Ptr();                                                    \
        detail::repeats<T>(mask, repeat, p.dstBlkStride, p.srcBlkStride, 1, p.dstRepStride,    \
                           p.srcRepStride, 0, [&](uint32_t d, uint32_t a, uint32_t, uint32_t n) { \
                               fn(d0 + d, a0 + a, n, detail::Type<T>::code);                   \
                           });                                                                 \
    }
NPUSIM_UNARY_REPEAT(Exp, npusim_detail::vexp)
NPUSIM_UNARY_REPEAT(Ln, npusim_detail::vln)
NPUSIM_UNARY_REPEAT(Sqrt, npusim_detail::vsqrt)
NPUSIM_UNARY_REPEAT(Relu, npusim_detail::vrelu)
NPUSIM_UNARY_REPEAT(Abs, npusim_detail::vabs)
NPUSIM_UNARY_REPEAT(Reciprocal, npusim_detail::vrec)

namespace detail {
/* Bits of one element of T (int4b_t: 4). */
template <typename T> __aicore__ constexpr uint32_t element_bits() {
    return Packed<T>::per_byte ? 8 / Packed<T>::per_byte : 8 * (uint32_t)sizeof(T);
}
/* The repeat form of Cast. A repeat is 256 bytes of the wider of the two types (Ascend C: the
 * mask counts elements of the wider type): 8 blocks of per_block = 32 bytes / its size
 * elements; block k of repeat r of an operand starts r * repStride * 32 + k * blkStride *
 * (per_block elements of the operand's type) bytes in, so the narrower operand's blocks are
 * its share of a block and a block stride of 1 is contiguous on both sides (the reference's
 * float -> half repeat strides, dst 4 and src 8). selected(p) says whether element p of a
 * repeat takes part. One vcvt per repeat when both block strides are 1, else one per block:
 * the selected run from the start of the repeat (block) is converted; when other elements are
 * selected after a gap, the whole span up to the last of them is converted and the scalar unit
 * first saves, then puts back, the destination elements the mask leaves out. */
template <typename D, typename S, typename Sel>
__aicore__ inline void cast_repeats(const LocalTensor<D> &dst, const LocalTensor<S> &src,
                                    RoundMode mode, uint8_t repeatTimes,
                                    const UnaryRepeatParams &p, Sel selected) {
    constexpr uint32_t db = element_bits<D>(), sb = element_bits<S>();
    constexpr uint32_t per_block = 256 / (db > sb ? db : sb);
    constexpr bool packed = Packed<D>::per_byte || Packed<S>::per_byte;
    if (!cast_mode_ok<D, S>(mode)) {
        cast_mode_refused<D, S>(mode);
    }
    uint8_t *d0 = (uint8_t *)dst.Ptr();
    const uint8_t *s0 = (const uint8_t *)src.Ptr();
    const bool whole = p.dstBlkStride == 1 && p.srcBlkStride == 1;
    const uint32_t runs = whole ? 1 : 8, run_len = whole ? 8 * per_block : per_block;
    for (uint32_t r = 0; r < repeatTimes; r++) {
        for (uint32_t k = 0; k < runs; k++) {
            uint32_t first = k * run_len, lead = 0, last = 0;
            while (lead < run_len && selected(first + lead)) {
                lead++;
            }
            for (uint32_t j = lead; j < run_len; j++) {
                if (selected(first + j)) {
                    last = j + 1;
                }
            }
            uint32_t n = last > lead ? last : lead;
            if (n == 0) {
                continue;
            }
            if (packed && n % 2 != 0) {
                n++; /* whole bytes of int4b_t: one more element, kept as it was */
                last = n;
            }
            uint8_t *d = d0 + r * p.dstRepStride * 32u + k * p.dstBlkStride * (per_block * db / 8);
            const uint8_t *a =
                s0 + r * p.srcRepStride * 32u + k * p.srcBlkStride * (per_block * sb / 8);
            if (last <= lead) {
                npu_vcvt(d, Type<D>::code, a, Type<S>::code, (int)mode, n);
                continue;
            }
            if constexpr (Packed<D>::per_byte) {
                fail("Cast: an int4b_t destination is written in whole bytes: the mask must "
                     "select an even run of elements from the start of each repeat (block)");
            } else {
                D saved[256 / sizeof(D)];
                D *e = (D *)d;
                scalar_owns_ub();
                for (uint32_t j = 0; j < n; j++) {
                    if (!selected(first + j)) {
                        saved[j] = npusim_detail::volatile_load(e + j);
                    }
                }
                npu_vcvt(d, Type<D>::code, a, Type<S>::code, (int)mode, n);
                scalar_owns_ub();
                for (uint32_t j = 0; j < n; j++) {
                    if (!selected(first + j)) {
                        npusim_detail::volatile_store(e + j, saved[j]);
                    }
                }
            }
        }
    }
}
} // namespace detail

/* Cast's mask / repeat forms. The continuous mask: the first `mask` elements of each repeat
 * (1 .. 256 bytes / the wider type's size). The bit-wise mask: bit p of mask[0] (p < 64), then
 * of mask[1], selects element p of each repeat (a 32-bit wider type reads mask[0] only); the
 * destination elements it leaves out keep their values. Semantics and issue: detail::
 * cast_repeats. */
template <typename D, typename S, bool isSetMask = true>
__aicore__ inline void Cast(const LocalTensor<D> &dst, const LocalTensor<S> &src,
                            const RoundMode &mode, const uint64_t mask, const uint8_t repeatTimes,
                            const UnaryRepeatParams &repeatParams) NPUSIM_CAST_MODE_CHECK(mode) {
    static_assert(isSetMask, "Cast: isSetMask = false (a mask set by SetVectorMask) is not "
                             "offered by npusim's layer");
    if constexpr (detail::cast_pair_offered<D, S>()) {
        constexpr uint32_t db = detail::element_bits<D>(), sb = detail::element_bits<S>();
        constexpr uint64_t per_repeat = 2048 / (db > sb ? db : sb);
        if (mask < 1 || mask > per_repeat) {
            detail::fail(per_repeat == 64 ? "Cast: a continuous mask is 1..64 elements per "
                                            "repeat (a 32-bit type)"
                                          : "Cast: a continuous mask is 1..128 elements per "
                                            "repeat (a 16-bit type)");
        }
        detail::cast_repeats(dst, src, mode, repeatTimes, repeatParams,
                             [&](uint32_t e) { return e < mask; });
    }
}
template <typename D, typename S, bool isSetMask = true>
__aicore__ inline void Cast(const LocalTensor<D> &dst, const LocalTensor<S> &src,
                            const RoundMode &mode, const uint64_t mask[],
                            const uint8_t repeatTimes, const UnaryRepeatParams &repeatParams)
    NPUSIM_CAST_MODE_CHECK(mode) {
    static_assert(isSetMask, "Cast: isSetMask = false (a mask set by SetVectorMask) is not "
                             "offered by npusim's layer");
    if constexpr (detail::cast_pair_offered<D, S>()) {
        constexpr uint32_t db = detail::element_bits<D>(), sb = detail::element_bits<S>();
        const uint64_t m[2] = {mask[0], (db > sb ? db : sb) == 32 ? 0 : mask[1]};
        detail::cast_repeats(dst, src, mode, repeatTimes, repeatParams,
                             [&](uint32_t e) { return e < 128 && (m[e / 64] >> (e % 64) & 1); });
    }
}

template <typename T, bool isSetMask = true>
__aicore__ inline void Duplicate(const LocalTensor<T> &dst, const detail::NoDeduce<T> &scalar,
                                 uint64_t mask, const uint8_t repeat, const uint16_t dstBlkStride,
                                 const uint8_t dstRepStride) {
    uint8_t *d0 = (uint8_t *)dst.Ptr();
    uint64_t s = detail::Type<T>::bits(scalar);
    detail::repeats<T>(mask, repeat, (uint8_t)dstBlkStride, 1, 1, dstRepStride, 0, 0,
                       [&](uint32_t d, uint32_t, uint32_t, uint32_t n) {
                           npusim_detail::vdup(d0 + d, s, n, detail::Type<T>::code);
                       });
}

namespace detail {
/* n copies of v at elements [start, start + n) of `base` (32-byte aligned): one vdup from the
 * first 32-byte boundary on, and the elements before it by the scalar unit (an NPU
 * instruction's UB address is 32-byte aligned). The caller has called scalar_owns_ub when
 * `start` is not on a boundary. */
template <typename T>
__aicore__ inline void fill_span(T *base, uint32_t start, uint32_t n, const T &v) {
    const uint32_t per_block = 32 / sizeof(T);
    uint32_t head = (per_block - start % per_block) % per_block;
    head = head < n ? head : n;
    for (uint32_t i = 0; i < head; i++) {
        npusim_detail::volatile_store(base + start + i, v);
    }
    if (n > head) {
        npusim_detail::vdup(base + start + head, Type<T>::bits(v), n - head, Type<T>::code);
    }
}
} // namespace detail

/* The bit-wise mask form: bit p of mask (mask[0] bits 0..63, then mask[1] for 16-bit types)
 * selects element p of every repeat; repeat r's block k is at dst + (r * dstRepeatStride +
 * k * dstBlockStride) * 32 bytes. Unselected elements keep their values. The selected run
 * that starts a 32-byte block is one vdup; selected elements after an unselected one in their
 * block are written by the scalar unit once the vector unit and the copies are done with UB
 * (vdup has no mask, and an NPU instruction's UB address is 32-byte aligned). */
template <typename T, bool isSetMask = true>
__aicore__ inline void Duplicate(const LocalTensor<T> &dst, const detail::NoDeduce<T> &scalar,
                                 const uint64_t mask[], const uint8_t repeatTimes,
                                 const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4,
                  "Duplicate: the bit-wise mask form takes 16- and 32-bit tensors (one mask bit "
                  "per element of a 256-byte repeat)");
    static_assert(isSetMask, "Duplicate: isSetMask = false (a mask set by SetVectorMask) is not "
                             "offered by npusim's layer");
    constexpr uint32_t per_block = 32 / sizeof(T);
    constexpr uint32_t block_bits = (1u << per_block) - 1;
    const uint64_t m[2] = {mask[0], sizeof(T) == 2 ? mask[1] : 0};
    uint8_t *d0 = (uint8_t *)dst.Ptr();
    const T v = scalar;
    const uint64_t s = detail::Type<T>::bits(v);
    auto block_mask = [&](uint32_t k) {
        uint32_t bit = k * per_block;
        return (uint32_t)(m[bit / 64] >> (bit % 64)) & block_bits;
    };
    auto block_at = [&](uint32_t r, uint32_t k) {
        return (T *)(d0 + (r * dstRepeatStride + k * (uint32_t)dstBlockStride) * 32u);
    };
    bool scattered = false;
    for (uint32_t r = 0; r < repeatTimes; r++) {
        for (uint32_t k = 0; k < 8; k++) {
            uint32_t bits = block_mask(k);
            uint32_t lead = (uint32_t)__builtin_ctz(~bits);
            if (lead != 0) {
                npusim_detail::vdup(block_at(r, k), s, lead, detail::Type<T>::code);
            }
            scattered |= (bits >> lead) != 0;
        }
    }
    if (!scattered) {
        return;
    }
    detail::scalar_owns_ub();
    for (uint32_t r = 0; r < repeatTimes; r++) {
        for (uint32_t k = 0; k < 8; k++) {
            uint32_t bits = block_mask(k);
            bits &= ~((1u << (uint32_t)__builtin_ctz(~bits)) - 1);
            T *b = block_at(r, k);
            for (uint32_t j = 0; j < per_block; j++) {
                if ((bits >> j) & 1) {
                    npusim_detail::volatile_store(b + j, v);
                }
            }
        }
    }
}

/* ---- Cube: GM -> L1 -> L0A / L0B -> Mmad -> L0C -> GM --------------------------------------- */
/*
 * Layouts (isa.md, "Cube"): a matrix in L1 is NZ (Nd2Nz below: column blocks of 32 bytes, each
 * block's rows 32 bytes apart); LoadData moves 512-byte fractals (16 rows x 32 bytes) to L0A
 * ("zZ": fractal rows of A one after another) and, with ifTranspose, to L0B ("zN": each 16 x 16
 * fractal transposed); Mmad runs one cube instruction in the fractal layout, writing C to L0C
 * as NZ fractals of 16 x 16 float; Fixpipe writes C to GM as ND rows (float, or half with
 * QuantMode_t::F322F16), one copy per 16-column block.
 */

namespace detail {
/* Parameter values the layer does not model stop the block with a message naming them. */
template <bool B> struct Unsupported {
    static constexpr bool value = B;
};
} // namespace detail

/* Bytes of one C0 block, the unit of DataCopyParams' lengths and strides. */
constexpr uint32_t DEFAULT_C0_SIZE = 32;

/* ND (row-major in GM) -> NZ (in L1, or UB): ndNum matrices of nValue rows x dValue elements;
 * srcNdMatrixStride, srcDValue and dstNzMatrixStride count elements, dstNzC0Stride and
 * dstNzNStride 32-byte blocks. The pad bytes of a row's last, partial 32-byte block are not
 * written (Mmad never reads them). */
struct Nd2NzParams {
    __aicore__ Nd2NzParams() {}
    __aicore__ Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint16_t dValueIn,
                           const uint16_t srcNdMatrixStrideIn, const uint16_t srcDValueIn,
                           const uint16_t dstNzC0StrideIn, const uint16_t dstNzNStrideIn,
                           const uint16_t dstNzMatrixStrideIn)
        : ndNum(ndNumIn), nValue(nValueIn), dValue(dValueIn),
          srcNdMatrixStride(srcNdMatrixStrideIn), srcDValue(srcDValueIn),
          dstNzC0Stride(dstNzC0StrideIn), dstNzNStride(dstNzNStrideIn),
          dstNzMatrixStride(dstNzMatrixStrideIn) {}
    uint16_t ndNum = 0;
    uint16_t nValue = 0;
    uint16_t dValue = 0;
    uint16_t srcNdMatrixStride = 0;
    uint16_t srcDValue = 0;
    uint16_t dstNzC0Stride = 0;
    uint16_t dstNzNStride = 0;
    uint16_t dstNzMatrixStride = 0;
};

/* GM -> A1 / B1 (or VECIN) with ND -> NZ: per matrix, one MTE2 instruction for its whole
 * 32-byte column blocks (each its nValue rows, srcDValue elements apart in GM, dstNzNStride
 * blocks apart in L1; the blocks 32 bytes apart in GM, dstNzC0Stride blocks apart in L1: the
 * mover's repeat register) and one for a partial last column block. */
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src,
                                const Nd2NzParams &p) {
    const uint32_t e = (uint32_t)sizeof(T);
    const uint32_t row_bytes = (uint32_t)p.dValue * e;
    const uint32_t full = row_bytes / 32, tail = row_bytes % 32;
    const uint32_t c0 = (uint32_t)p.dstNzC0Stride * 32;
    const uint32_t src_stride = (uint32_t)p.srcDValue * e, dst_stride = (uint32_t)p.dstNzNStride * 32;
    for (uint32_t nd = 0; nd < p.ndNum; nd++) {
        const uint8_t *s = (const uint8_t *)src.GetPhyAddr() + (uint64_t)nd * p.srcNdMatrixStride * e;
        uint8_t *d = (uint8_t *)dst.Ptr() + (uint64_t)nd * p.dstNzMatrixStride * e;
        if (full > 1 && c0 < (1u << 24)) {
            npu_move_repeat(full, 32, c0);
            detail::gm_to_local(d, s, p.nValue, 32, src_stride, dst_stride);
        } else {
            for (uint32_t j = 0; j < full; j++) {
                detail::gm_to_local(d + (uint64_t)j * c0, s + 32 * j, p.nValue, 32, src_stride,
                                    dst_stride);
            }
        }
        if (tail != 0) {
            detail::gm_to_local(d + (uint64_t)full * c0, s + 32 * full, p.nValue, tail,
                                src_stride, dst_stride);
        }
    }
}

/* L1 -> L0A / L0B: repeatTimes fractals of 512 bytes, the first startIndex fractals into src,
 * then srcStride fractals apart; in dst one after another with dstGap fractals between;
 * ifTranspose (16-bit types) transposes each fractal. */
struct LoadData2DParams {
    __aicore__ LoadData2DParams() {}
    __aicore__ LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn,
                                const uint16_t srcStrideIn, const uint8_t sidIn,
                                const uint16_t dstGapIn, const bool ifTransposeIn,
                                const uint8_t addrModeIn)
        : startIndex(startIndexIn), dstGap(dstGapIn), srcStride(srcStrideIn),
          ifTranspose(ifTransposeIn), repeatTimes(repeatTimesIn), sid(sidIn), addrMode(addrModeIn) {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};
using LoadData2dParams = LoadData2DParams;

namespace detail {
template <int F2>
__aicore__ inline void l1_to_l0(void *dst, const void *src, uint32_t rows, uint32_t src_stride,
                                uint32_t dst_stride) {
    if (((uint64_t)dst >> 24) == (NPU_L0B_BASE >> 24)) {
        npusim_detail::move<4, F2>(dst, src, rows, 512, src_stride, dst_stride);
    } else {
        npusim_detail::move<3, F2>(dst, src, rows, 512, src_stride, dst_stride);
    }
}
} // namespace detail

template <typename T>
__aicore__ inline void LoadData(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                const LoadData2DParams &p) {
    if (p.addrMode != 0) {
        detail::fail("LoadData: LoadData2DParams::addrMode (decrementing addresses) is not "
                     "supported by npusim's layer");
    }
    if (p.ifTranspose && sizeof(T) != 2) {
        detail::fail("LoadData: ifTranspose transposes 16-bit fractals only (as on Ascend)");
    }
    const uint8_t *s = (const uint8_t *)src.Ptr() + (uint32_t)p.startIndex * 512u;
    uint8_t *d = (uint8_t *)dst.Ptr();
    const uint32_t dst_stride = ((uint32_t)p.dstGap + 1) * 512u;
    /* srcStride 0 repeats one fractal: one copy per repeat (rows of a copy may not overlap). */
    const uint32_t rows = p.srcStride == 0 ? 1 : p.repeatTimes;
    const uint32_t issues = p.srcStride == 0 ? p.repeatTimes : (p.repeatTimes ? 1 : 0);
    for (uint32_t r = 0; r < issues; r++) {
        if (p.ifTranspose) {
            detail::l1_to_l0<1>(d + r * dst_stride, s, rows, (uint32_t)p.srcStride * 512u, dst_stride);
        } else {
            detail::l1_to_l0<0>(d + r * dst_stride, s, rows, (uint32_t)p.srcStride * 512u, dst_stride);
        }
    }
}
/* GM -> A2 / B2 directly is not offered (npusim's movers fill L0A / L0B from L1 only). */
template <typename T>
__aicore__ inline void LoadData(const LocalTensor<T> &, const GlobalTensor<T> &,
                                const LoadData2DParams &) {
    static_assert(detail::Unsupported<sizeof(T) == 0>::value,
                  "LoadData(LocalTensor, GlobalTensor, LoadData2DParams) (GM -> A2 / B2) is not "
                  "offered by npusim's layer: DataCopy to A1 / B1, then LoadData from there");
}
/* Load3D (im2col) and the transposing LoadData variants are not offered. */
template <typename T> struct LoadData3DParamsV1 {
    template <int N = 0> __aicore__ LoadData3DParamsV1() {
        static_assert(N != 0, "LoadData3DParamsV1 (LoadData Load3Dv1, im2col) is not offered by "
                              "npusim's layer");
    }
};
template <typename T> struct LoadData3DParamsV2 {
    template <int N = 0> __aicore__ LoadData3DParamsV2() {
        static_assert(N != 0, "LoadData3DParamsV2 (LoadData Load3Dv2, im2col) is not offered by "
                              "npusim's layer");
    }
};
struct LoadData2dTransposeParams {
    template <int N = 0> __aicore__ LoadData2dTransposeParams() {
        static_assert(N != 0, "LoadData2dTransposeParams (LoadDataWithTranspose) is not offered "
                              "by npusim's layer; LoadData2DParams::ifTranspose is (16-bit types)");
    }
};

/* Mmad's parameters, with Ascend C's fields and constructors. cmatrixInitVal: C starts at 0
 * (true) or accumulates on what L0C holds (false); isBias also accumulates. */
struct MmadParams {
    __aicore__ MmadParams() {}
    __aicore__ MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn,
                          const bool isBiasIn, const int32_t fmOffsetIn, const bool enSsparseIn,
                          const bool enWinogradAIn, const bool enWinogradBIn)
        : m(mIn), n(nIn), k(kIn), isBias(isBiasIn), fmOffset(fmOffsetIn), enSsparse(enSsparseIn),
          enWinogradA(enWinogradAIn), enWinogradB(enWinogradBIn) {}
    __aicore__ MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn,
                          const uint8_t unitFlagIn, const bool cmatrixSourceIn,
                          const bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn),
          cmatrixInitVal(cmatrixInitValIn) {}
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;
};

/* dst (CO1, float) [+]= fm (A2) x filter (B2), m x n over k: one cube instruction on the
 * fractal layouts. half x half and float x float. */
template <typename T, typename U, typename S>
__aicore__ inline void Mmad(const LocalTensor<T> &dst, const LocalTensor<U> &fm,
                            const LocalTensor<S> &filter, const MmadParams &p) {
    static_assert(sizeof(T) == 4 && detail::Type<T>::code == NPU_F32,
                  "Mmad: npusim's cube accumulates in float (dst must be LocalTensor<float>)");
    static_assert(detail::Type<U>::code == detail::Type<S>::code && sizeof(U) == sizeof(S),
                  "Mmad: fm and filter must have the same element type");
    static_assert(detail::Type<U>::code == NPU_F16 || detail::Type<U>::code == NPU_F32,
                  "Mmad: npusim's cube multiplies half x half or float x float (no int8, "
                  "bfloat16_t or int32 inputs)");
    if (p.cmatrixSource) {
        detail::fail("Mmad: cmatrixSource (C from the bias table, C2) needs the bias tensor: "
                     "Mmad(dst, fm, filter, bias, params)");
    }
    if (p.unitFlag != 0 || p.fmOffset != 0 || p.enSsparse || p.enWinogradA || p.enWinogradB) {
        detail::fail("Mmad: unitFlag, fmOffset, enSsparse and enWinogradA/B are not offered by "
                     "npusim's layer (leave them 0)");
    }
    const uint64_t mnk = (uint64_t)p.m | ((uint64_t)p.n << 16) | ((uint64_t)p.k << 32);
    const bool acc = !p.cmatrixInitVal || p.isBias;
    if (detail::Type<U>::code == NPU_F32) {
        if (acc) {
            npusim_detail::mmad<7>(dst.Ptr(), fm.Ptr(), filter.Ptr(), mnk);
        } else {
            npusim_detail::mmad<6>(dst.Ptr(), fm.Ptr(), filter.Ptr(), mnk);
        }
    } else if (acc) {
        npusim_detail::mmad<5>(dst.Ptr(), fm.Ptr(), filter.Ptr(), mnk);
    } else {
        npusim_detail::mmad<4>(dst.Ptr(), fm.Ptr(), filter.Ptr(), mnk);
    }
}
/* dst (CO1) = bias + fm x filter: C starts from the bias row (C2, the bias table, float; the
 * same n values for every row) — with cmatrixInitVal = false, as Ascend C's flags say. */
template <typename T, typename U, typename S, typename V>
__aicore__ inline void Mmad(const LocalTensor<T> &dst, const LocalTensor<U> &fm,
                            const LocalTensor<S> &filter, const LocalTensor<V> &bias,
                            const MmadParams &p) {
    static_assert(sizeof(T) == 4 && detail::Type<T>::code == NPU_F32,
                  "Mmad: npusim's cube accumulates in float (dst must be LocalTensor<float>)");
    static_assert(detail::Type<U>::code == detail::Type<S>::code && sizeof(U) == sizeof(S),
                  "Mmad: fm and filter must have the same element type");
    static_assert(detail::Type<U>::code == NPU_F16 || detail::Type<U>::code == NPU_F32,
                  "Mmad: npusim's cube multiplies half x half or float x float (no int8, "
                  "bfloat16_t or int32 inputs)");
    static_assert(detail::Type<V>::code == NPU_F32 && sizeof(V) == 4,
                  "Mmad: the bias table holds float (bias must be LocalTensor<float> in C2)");
    const uint64_t b = (uint64_t)bias.Ptr();
    if ((b >> 24) != (NPU_BT_BASE >> 24)) {
        detail::fail("Mmad: the bias tensor must be in TPosition::C2 (the bias table)");
    }
    if (p.cmatrixInitVal) {
        detail::fail("Mmad with a bias: set cmatrixInitVal = false (C starts from the bias)");
    }
    if (p.unitFlag != 0 || p.fmOffset != 0 || p.enSsparse || p.enWinogradA || p.enWinogradB) {
        detail::fail("Mmad: unitFlag, fmOffset, enSsparse and enWinogradA/B are not offered by "
                     "npusim's layer (leave them 0)");
    }
    const uint64_t mnk = (uint64_t)p.m | ((uint64_t)p.n << 16) | ((uint64_t)p.k << 32) |
                         ((b - NPU_BT_BASE) / 32) << 48;
    if (detail::Type<U>::code == NPU_F32) {
        npusim_detail::mmad_bias<6>(dst.Ptr(), fm.Ptr(), filter.Ptr(), mnk);
    } else {
        npusim_detail::mmad_bias<4>(dst.Ptr(), fm.Ptr(), filter.Ptr(), mnk);
    }
}

/* C1 -> C2 (L1 -> the bias table, MTE1): blockCount blocks of blockLen x 64 source bytes, the
 * gaps in the same units; half widens to float on the way (exactly). Between UB tensors of one
 * element size (VECIN -> VECOUT): blockLen x 32 bytes per block, gaps in 32-byte units, on V. */
template <typename T, typename U>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const LocalTensor<U> &src,
                                const DataCopyParams &p) {
    uint8_t *d = (uint8_t *)dst.Ptr();
    const uint8_t *s = (const uint8_t *)src.Ptr();
    const bool to_bt = ((uint64_t)d >> 24) == (NPU_BT_BASE >> 24);
    const uint32_t bt_row = (uint32_t)p.blockLen * 64;
    if constexpr (sizeof(T) != sizeof(U)) {
        static_assert(detail::Type<T>::code == NPU_F32 && detail::Type<U>::code == NPU_F16,
                      "DataCopy between local tensors of two types: only C1 (half) -> C2 "
                      "(float), the bias table");
        if (!to_bt) {
            detail::fail("DataCopy(LocalTensor<float>, LocalTensor<half>, ...): the destination "
                         "must be TPosition::C2 (the bias table)");
        }
        npusim_detail::move<6, 1>(d, s, p.blockCount, bt_row, bt_row + p.srcStride * 64u,
                                  2 * (bt_row + p.dstStride * 64u));
        return;
    } else if (to_bt) {
        if constexpr (detail::Type<T>::code == NPU_F32) {
            npusim_detail::move<6>(d, s, p.blockCount, bt_row, bt_row + p.srcStride * 64u,
                                   bt_row + p.dstStride * 64u);
        } else {
            detail::fail("DataCopy C1 -> C2: the bias table holds float (from half or float)");
        }
        return;
    }
    const uint32_t row = (uint32_t)p.blockLen * 32;
    for (uint32_t r = 0; r < p.blockCount; r++) {
        npusim_detail::vmov(d + r * (row + (uint32_t)p.dstStride * 32),
                            s + r * (row + (uint32_t)p.srcStride * 32), row / 4, NPU_F32);
    }
}

} // namespace AscendC

/* Fixpipe's quantisation modes (global, as CANN declares them). npusim's layer offers NoQuant
 * (float out) and F322F16 (float -> half, round to nearest even). */
enum QuantMode_t {
    NoQuant,
    F322F16,
    F322BF16,
    DEQF16,
    VDEQF16,
    QF322B8_PRE,
    VQF322B8_PRE,
    REQ8,
    VREQ8,
};

namespace AscendC {

enum class CO2Layout : uint8_t {
    NZ = 0,
    ROW_MAJOR,
    COLUMN_MAJOR,
};
struct FixpipeConfig {
    CO2Layout format;
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};

/* L0C (NZ) -> GM (ND): mSize rows x nSize columns; srcStride is the distance between C's
 * 16-column blocks in 16-element rows (mSize rounded up to 16 for Mmad's layout), dstStride the
 * GM row length in elements; ndNum matrices srcNdStride x 1024 bytes apart in L0C and
 * dstNdStride elements apart in GM. */
struct FixpipeParamsV220 {
    __aicore__ FixpipeParamsV220() {}
    __aicore__ FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn,
                                 const uint16_t srcStrideIn, const uint32_t dstStrideIn,
                                 const bool reluEnIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn),
          reluEn(reluEnIn) {}
    __aicore__ FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn,
                                 const uint16_t srcStrideIn, const uint32_t dstStrideIn,
                                 const bool reluEnIn, const QuantMode_t quantPreIn,
                                 const int64_t deqScalarIn, const uint16_t ndNumIn,
                                 const uint16_t srcNdStrideIn, const uint16_t dstNdStrideIn,
                                 const uint8_t unitFlagIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn),
          quantPre(quantPreIn), deqScalar((uint64_t)deqScalarIn), ndNum(ndNumIn),
          srcNdStride(srcNdStrideIn), dstNdStride(dstNdStrideIn), reluEn(reluEnIn),
          unitFlag(unitFlagIn) {}
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

/* CO1 -> GM through npusim's fixpipe (the MTE3 mover): NZ -> ND, float out, or half out with
 * QuantMode_t::F322F16. */
template <typename T, typename U, const FixpipeConfig &config = CFG_ROW_MAJOR>
__aicore__ inline void Fixpipe(const GlobalTensor<T> &dst, const LocalTensor<U> &src,
                               const FixpipeParamsV220 &p) {
    static_assert(config.format == CO2Layout::ROW_MAJOR,
                  "Fixpipe: only the ND (CFG_ROW_MAJOR) output is offered by npusim's layer");
    static_assert(detail::Type<U>::code == NPU_F32 && sizeof(U) == 4,
                  "Fixpipe: npusim's L0C holds float (src must be LocalTensor<float>)");
    static_assert(detail::Type<T>::code == NPU_F32 || detail::Type<T>::code == NPU_F16,
                  "Fixpipe: float or half output only");
    constexpr bool to_half = detail::Type<T>::code == NPU_F16;
    if (p.quantPre != (to_half ? QuantMode_t::F322F16 : QuantMode_t::NoQuant)) {
        detail::fail(to_half ? "Fixpipe: half output needs quantPre = QuantMode_t::F322F16 "
                               "(the only quantisation npusim's layer offers)"
                             : "Fixpipe: float output needs quantPre = QuantMode_t::NoQuant "
                               "(the only quantisation npusim's layer offers)");
    }
    // SetAtomicAdd<float> in force: C is added into GM (the fixpipe's atomic add).
    const uint32_t atomic = detail::pipe_state()->atomic;
    const bool add = atomic != 0;
    if (add && (to_half || atomic != detail::AtomicMode<float>::value)) {
        detail::fail("Fixpipe: the atomic add on L0C -> GM is offered for float output under "
                     "SetAtomicAdd<float>() only");
    }
    if (p.reluEn || p.unitFlag != 0 || p.isChannelSplit) {
        detail::fail("Fixpipe: reluEn, unitFlag and isChannelSplit are not offered by npusim's "
                     "layer (leave them 0)");
    }
    const uint32_t blocks = ((uint32_t)p.nSize + 15) / 16;
    for (uint32_t nd = 0; nd < p.ndNum; nd++) {
        const uint8_t *s = (const uint8_t *)src.Ptr() + (uint64_t)nd * p.srcNdStride * 1024u;
        uint8_t *d = (uint8_t *)dst.GetPhyAddr() + (uint64_t)nd * p.dstNdStride * sizeof(T);
        for (uint32_t j = 0; j < blocks; j++) {
            uint32_t cols = p.nSize - 16 * j < 16 ? p.nSize - 16 * j : 16;
            const uint8_t *sj = s + (uint64_t)j * p.srcStride * 64u;
            uint8_t *dj = d + (uint64_t)j * 16 * sizeof(T);
            if (to_half) {
                npusim_detail::move<5, 1>(dj, sj, p.mSize, cols * 4, 64, p.dstStride * 2);
            } else if (add) {
                npusim_detail::move<5, 2>(dj, sj, p.mSize, cols * 4, 64, p.dstStride * 4);
            } else {
                npusim_detail::move<5>(dj, sj, p.mSize, cols * 4, 64, p.dstStride * 4);
            }
        }
    }
}

/* DataCopy CO1 -> CO2 with DataCopyEnhancedParams (the Atlas inference path) is not offered. */
enum class BlockMode : uint8_t {
    BLOCK_MODE_NORMAL = 0,
    BLOCK_MODE_MATRIX,
    BLOCK_MODE_VECTOR,
    BLOCK_MODE_SMALL_CHANNEL,
    BLOCK_MODE_DEPTHWISE,
};
struct DataCopyEnhancedParams {
    template <int N = 0> __aicore__ DataCopyEnhancedParams() {
        static_assert(N != 0, "DataCopyEnhancedParams (DataCopy CO1 -> CO2, the Atlas inference "
                              "path) is not offered by npusim's layer: use Fixpipe (910B)");
    }
    BlockMode blockMode = BlockMode::BLOCK_MODE_NORMAL;
};

/* ---- Vector: mask-register families (WholeReduce, BlockReduce, Brcb, GatherMask, Gather) ---- */
/*
 * These take Ascend's mask in both forms: continuous (`int32_t mask`: the first `mask`
 * elements of each repeat, 1..128 for 16-bit types, 1..64 for 32-bit) and bit-wise
 * (`const uint64_t mask[]`: mask[0] bits 0..64, and for 16-bit types mask[1] bits 64..128).
 * Each call sets the vector mask register (vmask) and issues one vred / vperm instruction
 * (docs/isa.md): all repeats, strides and the mask in hardware, results at their strided
 * places. isSetMask = false (a mask set beforehand with SetVectorMask) is not offered.
 */
namespace detail {
inline void vmask(uint64_t lo, uint64_t hi) {
    __asm__ volatile(".insn r4 0x0b, 6, 1, x0, %0, %1, x0" : : "r"(lo), "r"(hi));
}
inline void vred(void *d, const void *s, uint64_t strides, uint64_t rs3) {
    ::npusim_detail::vop<7, 1>(d, s, strides, rs3);
}
inline void vperm(void *d, const void *s, uint64_t b, uint64_t rs3) {
    ::npusim_detail::vop<7, 3>(d, s, b, rs3);
}
} // namespace detail

enum class ReduceOrder : uint8_t {
    ORDER_VALUE_INDEX = 0,
    ORDER_INDEX_VALUE = 1,
    ORDER_ONLY_VALUE = 2,
    ORDER_ONLY_INDEX = 3,
};

namespace detail {
template <typename T> struct IsReduceType {
    static constexpr bool value = Type<T>::code == NPU_F32 || Type<T>::code == NPU_F16;
};
template <typename U> struct IsPattern {
    static constexpr bool value = false;
};
template <> struct IsPattern<uint16_t> {
    static constexpr bool value = true;
};
template <> struct IsPattern<uint32_t> {
    static constexpr bool value = true;
};
template <typename T> struct IsB16B32 {
    static constexpr bool value = (sizeof(T) == 2 || sizeof(T) == 4) && Type<T>::code != NPU_BF16;
};
/* vred's reduce codes. */
enum : uint64_t { RED_SUM = 0, RED_MAX = 1, RED_MIN = 2, RED_BLOCK = 4 };
template <typename T> __aicore__ constexpr uint32_t per_repeat() { return 256 / sizeof(T); }
/* The continuous mask: the first `mask` elements of a repeat. */
template <typename T> __aicore__ inline void set_mask(const char *api, int64_t mask) {
    if (mask < 1 || mask > (int64_t)per_repeat<T>()) {
        fail(api);
    }
    uint32_t m = (uint32_t)mask;
    uint64_t lo = m >= 64 ? ~0ull : (1ull << m) - 1;
    uint64_t hi = m >= 128 ? ~0ull : m > 64 ? (1ull << (m - 64)) - 1 : 0;
    detail::vmask(lo, hi);
}
/* The bit-wise mask: mask[1] only for 16-bit types. */
template <typename T> __aicore__ inline void set_mask(const char *, const uint64_t mask[]) {
    detail::vmask(mask[0], sizeof(T) == 2 ? mask[1] : 0);
}
__aicore__ inline void check_repeat(const char *api, int64_t repeat, int64_t a, int64_t b,
                                    int64_t c) {
    if (repeat < 0 || repeat > 255 || a < 0 || a > 0xffff || b < 0 || b > 0xffff || c < 0 ||
        c > 0xffff) {
        fail(api);
    }
}
template <typename T, typename M>
__aicore__ inline void reduce(const char *api, uint64_t red, uint64_t order, T *dst, const T *src,
                              const M &mask, int32_t repeat, int32_t dstRep, int32_t srcBlk,
                              int32_t srcRep) {
    check_repeat(api, repeat, dstRep, srcBlk, srcRep);
    set_mask<T>(api, mask);
    detail::vred(dst, src,
                        (uint64_t)dstRep | (uint64_t)srcBlk << 16 | (uint64_t)srcRep << 32,
                        (uint64_t)repeat | (uint64_t)Type<T>::code << 32 | red << 36 |
                            order << 40);
}
/* Reduces `n` contiguous values at `src` to `(n + E - 1) / E` values at `dst` (dst may be
 * src): full repeats, then the partial one. Returns how many values it wrote. */
template <typename T>
__aicore__ inline uint32_t reduce_flat(const char *api, uint64_t red, T *dst, const T *src,
                                       uint32_t n) {
    const uint32_t e = per_repeat<T>();
    uint32_t full = n / e, tail = n % e;
    if (full) {
        reduce(api, red, (uint64_t)ReduceOrder::ORDER_ONLY_VALUE * (red != RED_SUM), dst, src,
               (int32_t)e, (int32_t)full, 1, 1, 8);
    }
    if (tail) {
        reduce(api, red, (uint64_t)ReduceOrder::ORDER_ONLY_VALUE * (red != RED_SUM), dst + full,
               src + full * e, (int32_t)tail, 1, 1, 1, 8);
    }
    return full + (tail ? 1 : 0);
}
/* The mask / repeat form of ReduceSum / ReduceMax / ReduceMin: one value per repeat into
 * work, then those values reduced (repeat by repeat, the same vred) into dst[0]. */
template <typename T, typename M>
__aicore__ inline void reduce_all(const char *api, uint64_t red, const LocalTensor<T> &dst,
                                  const LocalTensor<T> &src, const LocalTensor<T> &work,
                                  const M &mask, int32_t repeat, int32_t srcRep, bool calIndex) {
    static_assert(IsReduceType<T>::value, "ReduceSum / ReduceMax / ReduceMin: half or float only");
    if (calIndex) {
        fail("ReduceMax / ReduceMin: calIndex is not supported by npusim's layer");
    }
    uint64_t order = red == RED_SUM ? 0 : (uint64_t)ReduceOrder::ORDER_ONLY_VALUE;
    if (repeat <= 1) {
        reduce(api, red, order, dst.Ptr(), src.Ptr(), mask, repeat, 1, 1, srcRep);
        return;
    }
    reduce(api, red, order, work.Ptr(), src.Ptr(), mask, repeat, 1, 1, srcRep);
    uint32_t n = (uint32_t)repeat;
    while (n > per_repeat<T>()) {
        n = reduce_flat(api, red, work.Ptr(), work.Ptr(), n);
    }
    reduce_flat(api, red, dst.Ptr(), work.Ptr(), n);
}
} // namespace detail

#define NPUSIM_WHOLE_REDUCE(Name, red)                                                         \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const uint64_t mask[], const int32_t repeatTimes,              \
                                const int32_t dstRepStride, const int32_t srcBlkStride,        \
                                const int32_t srcRepStride,                                    \
                                ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {          \
        static_assert(detail::IsReduceType<T>::value, #Name ": half or float tensors only");   \
        static_assert(isSetMask, #Name ": isSetMask = false is not supported by npusim");      \
        detail::reduce(#Name ": repeatTimes or a stride out of range", red, (uint64_t)order,   \
                       dst.Ptr(), src.Ptr(), mask, repeatTimes, dstRepStride, srcBlkStride,    \
                       srcRepStride);                                                          \
    }                                                                                          \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const int32_t mask, const int32_t repeatTimes,                 \
                                const int32_t dstRepStride, const int32_t srcBlkStride,        \
                                const int32_t srcRepStride,                                    \
                                ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {          \
        static_assert(detail::IsReduceType<T>::value, #Name ": half or float tensors only");   \
        static_assert(isSetMask, #Name ": isSetMask = false is not supported by npusim");      \
        detail::reduce(#Name ": mask, repeatTimes or a stride out of range", red,              \
                       (uint64_t)order, dst.Ptr(), src.Ptr(), (int64_t)mask, repeatTimes,      \
                       dstRepStride, srcBlkStride, srcRepStride);                              \
    }
/* dst[r] = the selected elements of repeat r added pairwise in a binary tree (the order
 * Ascend documents; an f16 sum past 65504 saturates there). */
template <typename T, bool isSetMask = true>
__aicore__ inline void WholeReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                      const uint64_t mask[], const int32_t repeatTimes,
                                      const int32_t dstRepStride, const int32_t srcBlkStride,
                                      const int32_t srcRepStride) {
    static_assert(detail::IsReduceType<T>::value, "WholeReduceSum: half or float tensors only");
    static_assert(isSetMask, "WholeReduceSum: isSetMask = false is not supported by npusim");
    detail::reduce("WholeReduceSum: repeatTimes or a stride out of range", detail::RED_SUM, 0,
                   dst.Ptr(), src.Ptr(), mask, repeatTimes, dstRepStride, srcBlkStride,
                   srcRepStride);
}
template <typename T, bool isSetMask = true>
__aicore__ inline void WholeReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                      const int32_t mask, const int32_t repeatTimes,
                                      const int32_t dstRepStride, const int32_t srcBlkStride,
                                      const int32_t srcRepStride) {
    static_assert(detail::IsReduceType<T>::value, "WholeReduceSum: half or float tensors only");
    static_assert(isSetMask, "WholeReduceSum: isSetMask = false is not supported by npusim");
    detail::reduce("WholeReduceSum: mask, repeatTimes or a stride out of range", detail::RED_SUM,
                   0, dst.Ptr(), src.Ptr(), (int64_t)mask, repeatTimes, dstRepStride,
                   srcBlkStride, srcRepStride);
}
/* The maximum / minimum of each repeat and its index in the repeat, laid out by `order`
 * (the index in the bits of a T-sized unsigned integer; ORDER_ONLY_INDEX: a uint32_t). */
NPUSIM_WHOLE_REDUCE(WholeReduceMax, detail::RED_MAX)
NPUSIM_WHOLE_REDUCE(WholeReduceMin, detail::RED_MIN)
#undef NPUSIM_WHOLE_REDUCE

/* One result per 32-byte block of each repeat (8 per repeat; dstRepStride in units of 8
 * elements); a block with no selected element is not written. Note the argument order:
 * repeatTimes before mask, as in Ascend C. */
#define NPUSIM_BLOCK_REDUCE(Name, red)                                                         \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const int32_t repeatTimes, const uint64_t mask[],              \
                                const int32_t dstRepStride, const int32_t srcBlkStride,        \
                                const int32_t srcRepStride) {                                  \
        static_assert(detail::IsReduceType<T>::value, #Name ": half or float tensors only");   \
        static_assert(isSetMask, #Name ": isSetMask = false is not supported by npusim");      \
        detail::reduce(#Name ": repeatTimes or a stride out of range", red | detail::RED_BLOCK, \
                       0, dst.Ptr(), src.Ptr(), mask, repeatTimes, dstRepStride, srcBlkStride, \
                       srcRepStride);                                                          \
    }                                                                                          \
    template <typename T, bool isSetMask = true>                                               \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const int32_t repeatTimes, const int32_t mask,                 \
                                const int32_t dstRepStride, const int32_t srcBlkStride,        \
                                const int32_t srcRepStride) {                                  \
        static_assert(detail::IsReduceType<T>::value, #Name ": half or float tensors only");   \
        static_assert(isSetMask, #Name ": isSetMask = false is not supported by npusim");      \
        detail::reduce(#Name ": mask, repeatTimes or a stride out of range",                   \
                       red | detail::RED_BLOCK, 0, dst.Ptr(), src.Ptr(), (int64_t)mask,        \
                       repeatTimes, dstRepStride, srcBlkStride, srcRepStride);                 \
    }
NPUSIM_BLOCK_REDUCE(BlockReduceSum, detail::RED_SUM)
NPUSIM_BLOCK_REDUCE(BlockReduceMax, detail::RED_MAX)
NPUSIM_BLOCK_REDUCE(BlockReduceMin, detail::RED_MIN)
#undef NPUSIM_BLOCK_REDUCE

/* ReduceSum / ReduceMax / ReduceMin, mask / repeat form: dst[0] = the reduction of the
 * selected elements of every repeat (per repeat as WholeReduce*, then over the repeats'
 * results in work, the same way). calIndex is not supported (aborts). */
#define NPUSIM_REDUCE_ALL(Name, red)                                                           \
    template <typename T>                                                                      \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const LocalTensor<T> &work, const uint64_t mask[],             \
                                const int32_t repeatTime, const int32_t srcRepStride,          \
                                bool calIndex = 0) {                                           \
        detail::reduce_all(#Name ": repeatTime or srcRepStride out of range", red, dst, src,   \
                           work, mask, repeatTime, srcRepStride, calIndex);                    \
    }                                                                                          \
    template <typename T>                                                                      \
    __aicore__ inline void Name(const LocalTensor<T> &dst, const LocalTensor<T> &src,          \
                                const LocalTensor<T> &work, const int32_t mask,                \
                                const int32_t repeatTime, const int32_t srcRepStride,          \
                                bool calIndex = 0) {                                           \
        detail::reduce_all(#Name ": mask, repeatTime or srcRepStride out of range", red, dst,  \
                           src, work, (int64_t)mask, repeatTime, srcRepStride, calIndex);      \
    }
NPUSIM_REDUCE_ALL(ReduceMax, detail::RED_MAX)
NPUSIM_REDUCE_ALL(ReduceMin, detail::RED_MIN)
#undef NPUSIM_REDUCE_ALL
template <typename T>
__aicore__ inline void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                 const LocalTensor<T> &work, const uint64_t mask[],
                                 const int32_t repeatTime, const int32_t srcRepStride) {
    detail::reduce_all("ReduceSum: repeatTime or srcRepStride out of range", detail::RED_SUM, dst,
                       src, work, mask, repeatTime, srcRepStride, false);
}
template <typename T>
__aicore__ inline void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                 const LocalTensor<T> &work, const int32_t mask,
                                 const int32_t repeatTime, const int32_t srcRepStride) {
    detail::reduce_all("ReduceSum: mask, repeatTime or srcRepStride out of range",
                       detail::RED_SUM, dst, src, work, (int64_t)mask, repeatTime, srcRepStride,
                       false);
}

/* Brcb: repeat r broadcasts src0[8r + j] over the 32-byte block at
 * (r * dstRepStride + j * dstBlkStride) blocks from dst. */
struct BrcbRepeatParams {
    uint16_t dstBlkStride = 1, dstRepStride = 8;
    __aicore__ inline BrcbRepeatParams() {}
    __aicore__ inline BrcbRepeatParams(uint16_t blk, uint16_t rep)
        : dstBlkStride(blk), dstRepStride(rep) {}
};
template <typename T>
__aicore__ inline void Brcb(const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                            const uint8_t repeatTime, const BrcbRepeatParams &p) {
    static_assert(detail::IsB16B32<T>::value, "Brcb: 16- or 32-bit tensors only");
    detail::vperm(dst.Ptr(), src0.Ptr(),
                         (uint64_t)p.dstBlkStride | (uint64_t)p.dstRepStride << 16,
                         (uint64_t)repeatTime | (uint64_t)detail::Type<T>::code << 32);
}

/* GatherMask: the elements a pattern selects, packed into dst; rsvdCnt = how many.
 * reduceMode false (normal): repeatTimes repeats of 256 bytes, mask ignored; true (counter):
 * `mask` elements in all, repeatTimes ignored (the 220 architecture's reading of the
 * docs' two configurations). */
enum class GatherMaskMode : uint8_t { VERSION_V1 = 0, VERSION_V2 = 1 };
constexpr GatherMaskMode defaultGatherMaskMode = GatherMaskMode::VERSION_V2;
constexpr GatherMaskMode defaultGahterMaskMode = GatherMaskMode::VERSION_V2;
struct GatherMaskParams {
    uint8_t src0BlockStride = 1;
    uint16_t repeatTimes = 0;
    uint16_t src0RepeatStride = 8;
    uint8_t src1RepeatStride = 8;
    __aicore__ inline GatherMaskParams() {}
    __aicore__ inline GatherMaskParams(uint8_t blk, uint16_t rep, uint16_t src0Rep,
                                       uint8_t src1Rep)
        : src0BlockStride(blk), repeatTimes(rep), src0RepeatStride(src0Rep),
          src1RepeatStride(src1Rep) {}
};
namespace detail {
template <typename T>
__aicore__ inline void gather_mask(const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                                   uint64_t pattern, uint64_t builtin, bool reduceMode,
                                   uint32_t mask, const GatherMaskParams &p, uint64_t &rsvdCnt) {
    static_assert(IsB16B32<T>::value, "GatherMask: 16- or 32-bit tensors only");
    uint64_t flags = builtin << 1;
    if (reduceMode) {
        detail::vmask(mask, 0);
        flags |= 1;
    }
    detail::vperm(dst.Ptr(), src0.Ptr(), pattern,
                         (uint64_t)p.repeatTimes | (uint64_t)p.src0BlockStride << 16 |
                             (uint64_t)p.src1RepeatStride << 24 |
                             (uint64_t)Type<T>::code << 32 | 1ull << 36 | flags << 40 |
                             (uint64_t)p.src0RepeatStride << 48);
    npu_set_flag(NPU_PIPE_V, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    npu_wait_flag(NPU_PIPE_V, NPU_PIPE_S, NPUSIM_SYNC_EVENT);
    uint64_t n;
    __asm__ volatile("csrr %0, 0xcca" : "=r"(n) : : "memory");
    rsvdCnt = n;
}
} // namespace detail
template <typename T, typename U, GatherMaskMode mode = defaultGatherMaskMode>
__aicore__ inline void GatherMask(const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                                  const LocalTensor<U> &src1Pattern, const bool reduceMode,
                                  const uint32_t mask, const GatherMaskParams &p,
                                  uint64_t &rsvdCnt) {
    static_assert(sizeof(U) == sizeof(T) && detail::IsPattern<U>::value,
                  "GatherMask: src1Pattern is uint16_t for 16-bit tensors, uint32_t for 32-bit");
    detail::gather_mask(dst, src0, (uint64_t)src1Pattern.Ptr(), 0, reduceMode, mask, p, rsvdCnt);
}
template <typename T, GatherMaskMode mode = defaultGatherMaskMode>
__aicore__ inline void GatherMask(const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                                  const uint8_t src1Pattern, const bool reduceMode,
                                  const uint32_t mask, const GatherMaskParams &p,
                                  uint64_t &rsvdCnt) {
    if (src1Pattern < 1 || src1Pattern > 7) {
        detail::fail("GatherMask: a built-in src1Pattern is 1..7");
    }
    detail::gather_mask(dst, src0, src1Pattern, 1, reduceMode, mask, p, rsvdCnt);
}

/* Gather: dst[i] = the element at byte offset srcOffset[i] from src (plus srcBaseAddr
 * bytes). Count form; mask / repeat form (each repeat 256 bytes of dst, dstRepStride in
 * blocks apart, offsets consumed 256 / sizeof(T) per repeat). */
template <typename T>
__aicore__ inline void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                              const LocalTensor<uint32_t> &srcOffset, const uint32_t srcBaseAddr,
                              const uint32_t count) {
    static_assert(detail::IsB16B32<T>::value, "Gather: 16- or 32-bit tensors only");
    const uint32_t e = detail::per_repeat<T>();
    const uint8_t *s = (const uint8_t *)src.Ptr() + srcBaseAddr;
    uint32_t done = 0;
    while (done < count) {
        uint32_t left = count - done;
        uint32_t reps = left / e > 255 ? 255 : left / e;
        uint32_t n = reps ? e : left;
        detail::set_mask<T>("Gather: count", (int64_t)n);
        reps = reps ? reps : 1;
        detail::vperm(dst.Ptr() + done, s, (uint64_t)(srcOffset.Ptr() + done),
                             (uint64_t)reps | 8ull << 8 | (uint64_t)detail::Type<T>::code << 32 |
                                 2ull << 36);
        done += reps * n;
    }
}
#define NPUSIM_GATHER(M, set)                                                                  \
    template <typename T>                                                                      \
    __aicore__ inline void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src,        \
                                  const LocalTensor<uint32_t> &srcOffset,                      \
                                  const uint32_t srcBaseAddr, M mask, const uint8_t repeatTime,\
                                  const uint16_t dstRepStride) {                               \
        static_assert(detail::IsB16B32<T>::value, "Gather: 16- or 32-bit tensors only");       \
        detail::set_mask<T>("Gather: mask out of range", set);                                 \
        detail::vperm(dst.Ptr(), (const uint8_t *)src.Ptr() + srcBaseAddr,              \
                             (uint64_t)srcOffset.Ptr(),                                        \
                             (uint64_t)repeatTime | (uint64_t)dstRepStride << 8 |              \
                                 (uint64_t)detail::Type<T>::code << 32 | 2ull << 36);          \
    }
NPUSIM_GATHER(const uint64_t, (int64_t)mask)
NPUSIM_GATHER(const uint64_t *, mask)
#undef NPUSIM_GATHER

/* ---- Tiling -------------------------------------------------------------------------------- */

namespace detail {
/* The storage GET_TILING_DATA copies a tiling struct into: left unset until the copy fills
 * every byte (the struct's default member initialisers would be stores the copy overwrites). */
template <typename T> struct TilingStorage {
    union {
        T value;
    };
    __aicore__ inline TilingStorage() {}
};
/* Copies a tiling struct from `gm` (a GM_ADDR kernel argument), or from the launch's tiling
 * words (CSR) when `gm` is null. Aborts when neither exists. */
template <typename T> __aicore__ inline void read_tiling(T *out, const void *gm) {
    const void *src = gm ? gm : npu_tiling();
    if (src == nullptr) {
        fail("GET_TILING_DATA: no tiling pointer and the launch carries no tiling words");
    }
    const volatile uint8_t *s = (const volatile uint8_t *)src;
    uint8_t *d = (uint8_t *)out;
    // Whole words when both sides are aligned for them (a scalar load each), then bytes.
    uint32_t i = 0;
    const uint64_t align = (uint64_t)src | (uint64_t)out;
    if (align % 8 == 0) {
        for (; i + 8 <= sizeof(T); i += 8) {
            *(uint64_t *)(d + i) = *(const volatile uint64_t *)(s + i);
        }
    } else if (align % 4 == 0) {
        for (; i + 4 <= sizeof(T); i += 4) {
            *(uint32_t *)(d + i) = *(const volatile uint32_t *)(s + i);
        }
    }
    for (; i < sizeof(T); i++) {
        d[i] = s[i];
    }
}
} // namespace detail

/* ---- DumpTensor ---------------------------------------------------------------------------- */

enum class DataFormat : uint8_t { ND = 0, NCHW, NHWC, HWCN, NC1HWC0, FRACTAL_Z, FRACTAL_NZ };

/* A tensor's shape for DumpTensor: the dump prints one line per row of the last dimension. */
struct ShapeInfo {
    uint8_t shapeDim;
    uint8_t originalShapeDim;
    uint32_t shape[8];
    uint32_t originalShape[8];
    DataFormat dataFormat;
    __aicore__ inline ShapeInfo() : shapeDim(0), originalShapeDim(0), dataFormat(DataFormat::ND) {}
    __aicore__ inline ShapeInfo(uint8_t dim, const uint32_t s[], DataFormat format = DataFormat::ND)
        : ShapeInfo(dim, s, dim, s, format) {}
    __aicore__ inline ShapeInfo(uint8_t dim, const uint32_t s[], uint8_t originalDim,
                                const uint32_t original[], DataFormat format = DataFormat::ND)
        : shapeDim(dim > 8 ? 8 : dim), originalShapeDim(originalDim > 8 ? 8 : originalDim),
          dataFormat(format) {
        for (uint32_t i = 0; i < shapeDim; i++) {
            shape[i] = s[i];
        }
        for (uint32_t i = 0; i < originalShapeDim; i++) {
            originalShape[i] = original[i];
        }
    }
};

namespace detail {
template <typename T> __aicore__ constexpr const char *type_name() {
    return __is_same(T, float)        ? "float32"
           : __is_same(T, half)       ? "float16"
           : __is_same(T, bfloat16_t) ? "bfloat16"
           : __is_same(T, int32_t)    ? "int32"
           : __is_same(T, uint32_t)   ? "uint32"
           : __is_same(T, int16_t)    ? "int16"
           : __is_same(T, uint16_t)   ? "uint16"
           : __is_same(T, int8_t)     ? "int8"
           : __is_same(T, uint8_t)    ? "uint8"
           : __is_same(T, int64_t)    ? "int64"
                                      : "uint64";
}
__aicore__ inline const char *position_name(TPosition pos) {
    switch (storage(pos)) {
    case UB:
        return "UB";
    case L1:
        return "L1";
    case L0A:
        return "L0A";
    case L0B:
        return "L0B";
    case L0C:
        return "L0C";
    case BT:
        return "BT";
    default:
        return "GM";
    }
}
/* The double bits of a float (for Out::flt). */
__aicore__ inline uint64_t f64_bits(float f) {
    uint32_t u = npusim_detail::f32_bits(f);
    uint64_t sign = (uint64_t)(u >> 31) << 63;
    uint32_t e = (u >> 23) & 0xff;
    uint64_t man = (uint64_t)(u & 0x7fffff) << 29;
    if (e == 0xff) {
        return sign | 0x7ff0000000000000ULL | man;
    }
    return e == 0 ? sign : sign | (uint64_t)(e - 127 + 1023) << 52 | man;
}
template <typename T> __aicore__ inline void put_value(Out &o, T v) {
    if constexpr (__is_same(T, float) || __is_same(T, half) || __is_same(T, bfloat16_t)) {
        o.flt(f64_bits((float)v), 6);
    } else if constexpr ((T)-1 < (T)0) {
        int64_t x = (int64_t)v;
        if (x < 0) {
            o.put('-');
        }
        o.num(x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x, 10, false, 0, ' ');
    } else {
        o.num((uint64_t)v, 10, false, 0, ' ');
    }
}
/* Prints `count` elements from `get(i)` as lines of values: one line per `row` elements (or 8
 * when `row` is 0), a long row cut where the line fills. */
template <typename T, typename Get>
__aicore__ inline void dump_values(uint32_t count, uint32_t row, Get get) {
    uint32_t per = row ? row : 8;
    Out o;
    o.n = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (o.n) {
            o.str(", ");
        }
        put_value<T>(o, get(i));
        if ((i + 1) % per == 0 || i + 1 == count || o.n > sizeof(o.buf) - 40) {
            npu_print_bytes(o.buf, o.n);
            o.n = 0;
        }
    }
}
/* The header line: "WHAT: desc=D, addr=0x.., data_type=T, position=P, dump_size=N". */
template <typename T>
__aicore__ inline void dump_header(const char *what, const char *key, uint32_t desc, uint64_t addr,
                                   const char *pos, uint32_t count) {
    Out o;
    o.n = 0;
    o.str(what);
    o.str(": ");
    o.str(key);
    o.put('=');
    o.num(desc, 10, false, 0, ' ');
    o.str(", addr=0x");
    o.num(addr, 16, false, 0, ' ');
    o.str(", data_type=");
    o.str(type_name<T>());
    o.str(", position=");
    o.str(pos);
    o.str(", dump_size=");
    o.num(count, 10, false, 0, ' ');
    npu_print_bytes(o.buf, o.n);
}
template <typename T>
__aicore__ inline void dump_local(const char *what, const char *key, const LocalTensor<T> &t,
                                  uint32_t desc, uint32_t count, uint32_t row) {
    TPosition pos = t.GetPosition();
    dump_header<T>(what, key, desc, t.GetPhyAddr(), position_name(pos), count);
    if (storage(pos) != UB) {
        /* The scalar unit cannot read L1 / L0A / L0B / L0C / BT (isa.md, "Local buffers"). */
        static const char msg[] =
            "  (not readable by the scalar unit: copy the tensor to UB or GM to dump it)";
        npu_print_bytes(msg, sizeof(msg) - 1);
        return;
    }
    dump_values<T>(count, row, [&](uint32_t i) { return t.GetValue(i); });
}
__aicore__ inline uint32_t last_dim(const ShapeInfo &s) {
    return s.shapeDim ? s.shape[s.shapeDim - 1] : 0;
}
} // namespace detail

/* DumpTensor(tensor, desc, dumpSize[, shapeInfo]): prints a header line (desc, address, data
 * type, position, size) and `dumpSize` elements to the host log — one line per row of the
 * shape's last dimension with a ShapeInfo, else 8 per line. UB and GM tensors are read (after
 * the pipes that may still write them); a tensor in L1 / L0A / L0B / L0C / BT is named but
 * its values are not printed (the scalar unit cannot read those buffers). */
template <typename T>
__aicore__ inline void DumpTensor(const LocalTensor<T> &t, uint32_t desc, uint32_t dumpSize) {
    detail::dump_local("DumpTensor", "desc", t, desc, dumpSize, 0);
}
template <typename T>
__aicore__ inline void DumpTensor(const LocalTensor<T> &t, uint32_t desc, uint32_t dumpSize,
                                  const ShapeInfo &shape) {
    detail::dump_local("DumpTensor", "desc", t, desc, dumpSize, detail::last_dim(shape));
}
template <typename T>
__aicore__ inline void DumpTensor(const GlobalTensor<T> &t, uint32_t desc, uint32_t dumpSize,
                                  const ShapeInfo &shape = ShapeInfo()) {
    detail::dump_header<T>("DumpTensor", "desc", desc, (uint64_t)t.GetPhyAddr(), "GM", dumpSize);
    detail::dump_values<T>(dumpSize, detail::last_dim(shape),
                           [&](uint32_t i) { return t.GetValue(i); });
}
/* DumpAccChkPoint(tensor, index, countOff, dumpSize): DumpTensor of the elements from
 * `countOff` on, the header naming the index and the offset. */
template <typename T>
__aicore__ inline void DumpAccChkPoint(const LocalTensor<T> &t, uint32_t index, uint32_t countOff,
                                       uint32_t dumpSize) {
    detail::dump_local("DumpAccChkPoint", "index", t[countOff], index, dumpSize, 0);
}
template <typename T>
__aicore__ inline void DumpAccChkPoint(const GlobalTensor<T> &t, uint32_t index, uint32_t countOff,
                                       uint32_t dumpSize) {
    detail::dump_header<T>("DumpAccChkPoint", "index", index, (uint64_t)t.GetPhyAddr(countOff), "GM",
                           dumpSize);
    detail::dump_values<T>(dumpSize, 0, [&](uint32_t i) { return t.GetValue(countOff + i); });
}

} // namespace AscendC

/* REGISTER_TILING_DEFAULT(Type) names the struct GET_TILING_DATA fills; declare it at namespace
 * scope before the kernel. GET_TILING_DATA_WITH_STRUCT names it explicitly. */
#define REGISTER_TILING_DEFAULT(Type)                                                          \
    namespace AscendC {                                                                        \
    namespace detail {                                                                         \
    using TilingDefault = Type;                                                                \
    }                                                                                          \
    }
#define GET_TILING_DATA(var, tiling)                                                           \
    GET_TILING_DATA_WITH_STRUCT(::AscendC::detail::TilingDefault, var, tiling)
#define GET_TILING_DATA_WITH_STRUCT(Type, var, tiling)                                         \
    ::AscendC::detail::TilingStorage<Type> var##_npusim_storage;                               \
    Type &var = var##_npusim_storage.value;                                                    \
    ::AscendC::detail::read_tiling(&var, (const void *)(tiling))

/* The advanced APIs a kernel reaches through this header alone, as with CANN's. */
#include "lib/broadcast.h"
#include "lib/pad.h"

#endif /* NPUSIM_ASCENDC_KERNEL_OPERATOR_H */
