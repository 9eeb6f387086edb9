/*
 * pad_custom.cpp — the width-padding APIs on npusim: Duplicate's bit-wise and counter mask
 * forms over caller-chosen masks, repeats and strides; Pad (a 32-byte-aligned width padded on
 * the right, and an unaligned width padded on both sides) and UnPad from a PadTiling /
 * UnPadTiling copied word by word from GM, as Huawei's samples do; Broadcast along either
 * axis of 2-D tensors (aligned and unaligned rows) and of a 1-D one. Each kernel copies its
 * input into UB over a sentinel, runs the API, and copies the whole buffer out, so
 * tests/ascendc.rs checks the written values and the untouched ones against the CPU.
 */
#include "kernel_operator.h"

using namespace AscendC;

namespace {
constexpr uint32_t kBytes = 8192; /* each UB buffer */

/* UB buffers a and b, b holding the sentinel bits 0x77 in every byte; `in_bytes` of x into a. */
template <typename T> struct Stage {
    TPipe pipe;
    TBuf<TPosition::VECCALC> ab, bb;
    LocalTensor<T> a, b;
    __aicore__ inline Stage(GM_ADDR x, uint32_t in_bytes) {
        pipe.InitBuffer(ab, kBytes);
        pipe.InitBuffer(bb, kBytes);
        a = ab.Get<T>();
        b = bb.Get<T>();
        LocalTensor<uint8_t> raw = bb.Get<uint8_t>();
        Duplicate(raw.ReinterpretCast<uint16_t>(), (uint16_t)0x7777, kBytes / 2);
        GlobalTensor<T> xg;
        xg.SetGlobalBuffer((__gm__ T *)x);
        DataCopy(a, xg, (in_bytes + 31) / 32 * 32 / sizeof(T));
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
    }
    /* The whole of buffer t to y. */
    __aicore__ inline void Out(GM_ADDR y, const LocalTensor<T> &t) {
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        GlobalTensor<T> yg;
        yg.SetGlobalBuffer((__gm__ T *)y);
        DataCopy(yg, t, kBytes / sizeof(T));
    }
};

template <typename Tiling> __aicore__ inline void CopyTiling(Tiling *t, GM_ADDR gm) {
    uint32_t *p = reinterpret_cast<uint32_t *>(t);
    auto words = reinterpret_cast<__gm__ uint32_t *>(gm);
    for (uint32_t i = 0; i < sizeof(Tiling) / sizeof(uint32_t); i++) {
        p[i] = words[i];
    }
}

/* shape = repeat | dstBlkStride << 8 | dstRepStride << 16; value is the scalar's bits. */
template <typename T, bool bitwise>
__aicore__ inline void dup_mask(GM_ADDR x, GM_ADDR y, uint64_t lo, uint64_t hi, uint32_t shape,
                                T value) {
    Stage<T> st(x, kBytes);
    uint64_t mask[2] = {lo, hi};
    uint8_t repeat = shape & 0xff, rep = (shape >> 16) & 0xff;
    uint16_t blk = (shape >> 8) & 0xff;
    if (bitwise) {
        Duplicate<T>(st.a, value, mask, repeat, blk, rep);
    } else {
        Duplicate<T>(st.a, value, lo, repeat, blk, rep);
    }
    st.Out(y, st.a);
}
} // namespace

extern "C" __global__ __aicore__ void dup_mask_half(GM_ADDR x, GM_ADDR y, uint64_t lo, uint64_t hi,
                                                    uint32_t shape) {
    dup_mask<half, true>(x, y, lo, hi, shape, half(-3.5f));
}
extern "C" __global__ __aicore__ void dup_mask_f32(GM_ADDR x, GM_ADDR y, uint64_t lo, uint64_t hi,
                                                   uint32_t shape) {
    dup_mask<float, true>(x, y, lo, hi, shape, 2.25f);
}
extern "C" __global__ __aicore__ void dup_count_half(GM_ADDR x, GM_ADDR y, uint64_t count,
                                                     uint64_t unused, uint32_t shape) {
    dup_mask<half, false>(x, y, count, unused, shape, half(-3.5f));
}

/* params = leftPad | rightPad << 16 | padValue << 32; dst starts as the sentinel. */
template <typename T> __aicore__ inline void pad_rows(GM_ADDR x, GM_ADDR y, GM_ADDR t, uint64_t params) {
    PadTiling tiling;
    CopyTiling(&tiling, t);
    Stage<T> st(x, tiling.srcHeight * tiling.srcWidth * sizeof(T));
    PadParams p((uint16_t)params, (uint16_t)(params >> 16), (int32_t)(params >> 32));
    Pad(st.b, st.a, p, tiling);
    st.Out(y, st.b);
}
extern "C" __global__ __aicore__ void pad_half(GM_ADDR x, GM_ADDR y, GM_ADDR t, uint64_t params) {
    pad_rows<half>(x, y, t, params);
}
extern "C" __global__ __aicore__ void pad_f32(GM_ADDR x, GM_ADDR y, GM_ADDR t, uint64_t params) {
    pad_rows<float>(x, y, t, params);
}
/* Pad in place (dst = src), with the sharedTmpBuffer form. */
extern "C" __global__ __aicore__ void pad_in_place_half(GM_ADDR x, GM_ADDR y, GM_ADDR t,
                                                        uint64_t params) {
    PadTiling tiling;
    CopyTiling(&tiling, t);
    Stage<half> st(x, tiling.srcHeight * tiling.srcWidth * sizeof(half));
    PadParams p((uint16_t)params, (uint16_t)(params >> 16), (int32_t)(params >> 32));
    Pad(st.a, st.a, p, st.b.ReinterpretCast<uint8_t>(), tiling);
    st.Out(y, st.a);
}

template <typename T>
__aicore__ inline void unpad_rows(GM_ADDR x, GM_ADDR y, GM_ADDR t, uint32_t rightPad) {
    UnPadTiling tiling;
    CopyTiling(&tiling, t);
    Stage<T> st(x, tiling.srcHeight * tiling.srcWidth * sizeof(T));
    UnPadParams p;
    p.rightPad = (uint16_t)rightPad;
    UnPad<T>(st.b, st.a, p, tiling);
    st.Out(y, st.b);
}
extern "C" __global__ __aicore__ void unpad_half(GM_ADDR x, GM_ADDR y, GM_ADDR t, uint32_t rightPad) {
    unpad_rows<half>(x, y, t, rightPad);
}
extern "C" __global__ __aicore__ void unpad_f32(GM_ADDR x, GM_ADDR y, GM_ADDR t, uint32_t rightPad) {
    unpad_rows<float>(x, y, t, rightPad);
}

/* [m, 1] -> [m, k] (axis 1) or [1, k] -> [m, k] (axis 0). */
template <typename T, int32_t axis>
__aicore__ inline void broadcast2(GM_ADDR x, GM_ADDR y, uint32_t m, uint32_t k) {
    Stage<T> st(x, (axis == 1 ? m : k) * sizeof(T));
    const uint32_t dstShape[2] = {m, k};
    const uint32_t srcShape[2] = {axis == 1 ? m : 1, axis == 1 ? 1 : k};
    Broadcast<T, 2, axis>(st.b, st.a, dstShape, srcShape);
    st.Out(y, st.b);
}
extern "C" __global__ __aicore__ void broadcast_i8_axis1(GM_ADDR x, GM_ADDR y, uint32_t m, uint32_t k) {
    broadcast2<int8_t, 1>(x, y, m, k);
}
extern "C" __global__ __aicore__ void broadcast_half_axis1(GM_ADDR x, GM_ADDR y, uint32_t m,
                                                           uint32_t k) {
    broadcast2<half, 1>(x, y, m, k);
}
extern "C" __global__ __aicore__ void broadcast_f32_axis0(GM_ADDR x, GM_ADDR y, uint32_t m, uint32_t k) {
    broadcast2<float, 0>(x, y, m, k);
}
/* [1] -> [n], through the sharedTmpBuffer form of the earlier name. */
extern "C" __global__ __aicore__ void broadcast_i16_dim1(GM_ADDR x, GM_ADDR y, uint32_t n) {
    Stage<int16_t> st(x, 32);
    const uint32_t dstShape[1] = {n};
    const uint32_t srcShape[1] = {1};
    LocalTensor<uint8_t> tmp = st.a[16].template ReinterpretCast<uint8_t>();
    BroadCast<int16_t, 1, 0>(st.b, st.a, dstShape, srcShape, tmp);
    st.Out(y, st.b);
}
