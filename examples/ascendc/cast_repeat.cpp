/*
 * cast_repeat.cpp — Cast's mask / repeat forms (a continuous mask and a bit-wise mask[2], with
 * UnaryRepeatParams) on a narrowing pair (float -> half), a widening one (half -> float) and
 * one whose mask spans both words (half -> int8_t), and the float -> half saturation. Built in
 * both of CANN's modes (tests/ascendc.rs runs the committed NPU build and a --cpu-debug build
 * of this file).
 *
 *   cast_f32_half_mask(x, y, mask, mode, shape)        y (half)  = Cast(x (float), mode, mask, ...)
 *   cast_f32_half_bits(x, y, mask0, mode, shape)       the same with mask[] = {mask0, 0}
 *   cast_half_f32_bits(x, y, mask0, shape)             y (float) = Cast(x (half), CAST_NONE, mask[])
 *   cast_half_int8_bits(x, y, mask0, mask1, mode, shape) y (int8_t) = Cast(x (half), mode, mask[])
 *   cast_f32_half_count(x, y, n, mode)                 y (half)  = Cast(x (float), mode, n)
 *
 * x and y are 8 KiB each, copied into UB whole, so y's elements the cast leaves out come back as
 * they were. shape packs the repeat parameters, a byte each from the lowest: repeatTimes,
 * dstBlkStride, srcBlkStride, dstRepStride, srcRepStride.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t BYTES = 8192;

__aicore__ inline UnaryRepeatParams params(uint64_t shape) {
    return UnaryRepeatParams((uint16_t)(shape >> 8 & 0xff), (uint16_t)(shape >> 16 & 0xff),
                             (uint8_t)(shape >> 24), (uint8_t)(shape >> 32));
}

/* x and y GM -> UB, `cast` from x's tile into y's, y -> GM. */
template <typename F> __aicore__ inline void cast_tiles(GM_ADDR x, GM_ADDR y, F cast) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> qx, qy;
    pipe.InitBuffer(qx, 1, BYTES);
    pipe.InitBuffer(qy, 1, BYTES);
    GlobalTensor<int8_t> gx, gy;
    gx.SetGlobalBuffer((__gm__ int8_t *)x, BYTES);
    gy.SetGlobalBuffer((__gm__ int8_t *)y, BYTES);
    LocalTensor<int8_t> in = qx.AllocTensor<int8_t>();
    LocalTensor<int8_t> out = qy.AllocTensor<int8_t>();
    DataCopy(in, gx, BYTES);
    DataCopy(out, gy, BYTES);
    qx.EnQue(in);
    qy.EnQue(out);
    in = qx.DeQue<int8_t>();
    out = qy.DeQue<int8_t>();
    cast(out, in);
    SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
    DataCopy(gy, out, BYTES);
    qx.FreeTensor(in);
    qy.FreeTensor(out);
}

extern "C" __global__ __aicore__ void cast_f32_half_mask(GM_ADDR x, GM_ADDR y, uint64_t mask,
                                                         uint32_t mode, uint64_t shape) {
    cast_tiles(x, y, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        Cast(out.ReinterpretCast<half>(), in.ReinterpretCast<float>(), (RoundMode)mode, mask,
             (uint8_t)shape, params(shape));
    });
}

extern "C" __global__ __aicore__ void cast_f32_half_bits(GM_ADDR x, GM_ADDR y, uint64_t mask0,
                                                         uint32_t mode, uint64_t shape) {
    cast_tiles(x, y, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        uint64_t mask[2] = {mask0, 0};
        Cast(out.ReinterpretCast<half>(), in.ReinterpretCast<float>(), (RoundMode)mode, mask,
             (uint8_t)shape, params(shape));
    });
}

extern "C" __global__ __aicore__ void cast_half_f32_bits(GM_ADDR x, GM_ADDR y, uint64_t mask0,
                                                         uint64_t shape) {
    cast_tiles(x, y, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        uint64_t mask[2] = {mask0, ~0ull}; /* a 32-bit wider type reads mask[0] only */
        Cast(out.ReinterpretCast<float>(), in.ReinterpretCast<half>(), RoundMode::CAST_NONE, mask,
             (uint8_t)shape, params(shape));
    });
}

extern "C" __global__ __aicore__ void cast_half_int8_bits(GM_ADDR x, GM_ADDR y, uint64_t mask0,
                                                          uint64_t mask1, uint32_t mode,
                                                          uint64_t shape) {
    cast_tiles(x, y, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        uint64_t mask[2] = {mask0, mask1};
        Cast(out, in.ReinterpretCast<half>(), (RoundMode)mode, mask, (uint8_t)shape,
             params(shape));
    });
}

extern "C" __global__ __aicore__ void cast_f32_half_count(GM_ADDR x, GM_ADDR y, uint32_t n,
                                                          uint32_t mode) {
    cast_tiles(x, y, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        LocalTensor<half> h = out.ReinterpretCast<half>();
        Cast(h, in.ReinterpretCast<float>(), (RoundMode)mode, n);
    });
}
