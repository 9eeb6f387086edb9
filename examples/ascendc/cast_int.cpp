/*
 * cast_int.cpp — Cast to and from the 8- and 4-bit integers (int8_t, and int4b_t two to a
 * byte through ReinterpretCast of an int8_t tensor, as Ascend C's Cast documents), with the
 * round mode chosen at launch. Built in both of CANN's modes (tests/ascendc.rs runs the
 * committed NPU build and a --cpu-debug build of this file).
 *
 *   cast_half_int8(GM_ADDR x, GM_ADDR y, n, mode)   y (int8_t) = Cast(x (half), mode)
 *   cast_half_int4(GM_ADDR x, GM_ADDR y, n, mode)   y (n / 2 bytes) = Cast(x (half), mode) as int4b_t
 *   cast_int4_half(GM_ADDR x, GM_ADDR y, n)         y (half) = Cast(x (n / 2 bytes of int4b_t), CAST_NONE)
 *   cast_int8_half(GM_ADDR x, GM_ADDR y, n)         y (half) = Cast(x (int8_t), CAST_NONE)
 *
 * n is a multiple of 64 and at most 4096.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t MAX_N = 4096;

/* x (n elements of S, sb bytes) GM -> UB, then `cast` into a UB tensor of db bytes, -> GM. */
template <typename F>
__aicore__ inline void cast_tile(GM_ADDR x, GM_ADDR y, uint32_t sb, uint32_t db, F cast) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> qin;
    TQue<QuePosition::VECOUT, 1> qout;
    pipe.InitBuffer(qin, 1, MAX_N * sizeof(half));
    pipe.InitBuffer(qout, 1, MAX_N * sizeof(half));
    GlobalTensor<int8_t> gx, gy;
    gx.SetGlobalBuffer((__gm__ int8_t *)x, sb);
    gy.SetGlobalBuffer((__gm__ int8_t *)y, db);
    LocalTensor<int8_t> in = qin.AllocTensor<int8_t>();
    DataCopy(in, gx, sb);
    qin.EnQue(in);
    in = qin.DeQue<int8_t>();
    LocalTensor<int8_t> out = qout.AllocTensor<int8_t>();
    cast(out, in);
    qout.EnQue(out);
    qin.FreeTensor(in);
    out = qout.DeQue<int8_t>();
    DataCopy(gy, out, db);
    qout.FreeTensor(out);
}

extern "C" __global__ __aicore__ void cast_half_int8(GM_ADDR x, GM_ADDR y, uint32_t n,
                                                     uint32_t mode) {
    cast_tile(x, y, n * 2, n, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        Cast(out, in.ReinterpretCast<half>(), (RoundMode)mode, n);
    });
}

extern "C" __global__ __aicore__ void cast_half_int4(GM_ADDR x, GM_ADDR y, uint32_t n,
                                                     uint32_t mode) {
    cast_tile(x, y, n * 2, n / 2, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        LocalTensor<int4b_t> packed = out.ReinterpretCast<int4b_t>();
        Cast(packed, in.ReinterpretCast<half>(), (RoundMode)mode, n);
    });
}

extern "C" __global__ __aicore__ void cast_int4_half(GM_ADDR x, GM_ADDR y, uint32_t n) {
    cast_tile(x, y, n / 2, n * 2, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        LocalTensor<half> h = out.ReinterpretCast<half>();
        Cast(h, in.ReinterpretCast<int4b_t>(), RoundMode::CAST_NONE, n);
    });
}

extern "C" __global__ __aicore__ void cast_int8_half(GM_ADDR x, GM_ADDR y, uint32_t n) {
    cast_tile(x, y, n, n * 2, [&](LocalTensor<int8_t> &out, LocalTensor<int8_t> &in) {
        LocalTensor<half> h = out.ReinterpretCast<half>();
        Cast(h, in, RoundMode::CAST_NONE, n);
    });
}
