/*
 * whole_reduce_custom.cpp — the mask-register reductions and rearrangements of Ascend C on
 * npusim: WholeReduceSum over ragged rows (the unaligned-wholereduces sample's shape),
 * WholeReduceMax / Min with bit masks and every ReduceOrder, BlockReduceSum / Max / Min with a
 * mask shorter than a repeat and non-default strides, the mask / repeat form of ReduceMin, Brcb
 * and Gather. tests/ascendc.rs checks each against a CPU reference in the same order.
 */
#include "kernel_operator.h"

using namespace AscendC;

/* y[r] = WholeReduceSum of row r (cols <= 128 halves), rows at a 32-byte aligned pitch. */
extern "C" __global__ __aicore__ void whole_reduce_sum_rows(GM_ADDR x, GM_ADDR y, uint32_t rows,
                                                            uint32_t cols) {
    TPipe pipe;
    TQue<TPosition::VECIN, 1> in;
    TQue<TPosition::VECOUT, 1> out;
    uint32_t pitch = (cols * 2 + 31) / 32 * 32;
    pipe.InitBuffer(in, 1, pitch * rows);
    pipe.InitBuffer(out, 1, rows * 2 + 32);
    GlobalTensor<half> xg, yg;
    xg.SetGlobalBuffer((__gm__ half *)x);
    yg.SetGlobalBuffer((__gm__ half *)y);
    LocalTensor<half> xl = in.AllocTensor<half>();
    DataCopyPad(xl, xg, DataCopyExtParams((uint16_t)rows, cols * 2, 0, 0, 0),
                DataCopyPadExtParams<half>(false, 0, 0, half(0.0f)));
    in.EnQue(xl);
    xl = in.DeQue<half>();
    LocalTensor<half> yl = out.AllocTensor<half>();
    WholeReduceSum<half, true>(yl, xl, (int32_t)cols, (int32_t)rows, 1, 1, (int32_t)(pitch / 32));
    out.EnQue(yl);
    in.FreeTensor(xl);
    yl = out.DeQue<half>();
    DataCopyPad(yg, yl, DataCopyExtParams(1, rows * 2, 0, 0, 0));
    out.FreeTensor(yl);
}

/* The float input x (5 repeats of 64 floats, 320) through WholeReduceMax (bit mask, value and
 * index, dstRepStride 3), WholeReduceMin (count mask 37, index then value; only the index),
 * BlockReduceSum / Max / Min (count mask 13 of 64, srcRepStride 10 over the same data) and
 * ReduceMin in its mask / repeat form. Output words (y, 1024 bytes): see tests/ascendc.rs. */
extern "C" __global__ __aicore__ void reduce_families(GM_ADDR x, GM_ADDR y) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, yb, wb;
    pipe.InitBuffer(xb, 2048 * 4);
    pipe.InitBuffer(yb, 1024);
    pipe.InitBuffer(wb, 1024);
    GlobalTensor<float> xg, yg;
    xg.SetGlobalBuffer((__gm__ float *)x);
    yg.SetGlobalBuffer((__gm__ float *)y);
    LocalTensor<float> xl = xb.Get<float>(), yl = yb.Get<float>(), wl = wb.Get<float>();
    Duplicate(yl, -1.0f, 256);
    DataCopy(xl, xg, 2048);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    uint64_t bits[2] = {0xf0f0f0f00f0f0f0fULL, 0};
    WholeReduceMax(yl, xl, bits, 5, 3, 1, 8);                               /* y[0..30) */
    WholeReduceMin(yl[32], xl, 37, 5, 1, 1, 8, ReduceOrder::ORDER_INDEX_VALUE); /* y[32..42) */
    WholeReduceMin(yl[48], xl, 37, 5, 1, 1, 8, ReduceOrder::ORDER_ONLY_INDEX);  /* y[48..53) */
    BlockReduceSum(yl[64], xl, 3, 13, 2, 1, 10);                            /* y[64..104) */
    BlockReduceMax(yl[112], xl, 3, 13, 1, 2, 10);                           /* y[112..136) */
    BlockReduceMin(yl[136], xl, 3, 13, 1, 1, 10);                           /* y[136..160) */
    ReduceMin(yl[160], xl, wl, bits, 30, 8);                                /* y[160] */
    ReduceSum(yl[168], xl, wl, 64, 9, 8);                                   /* y[168] */
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(yg, yl, 256);
}

/* Brcb of 16 halves (2 repeats, blocks 2 apart, repeats 20 blocks apart) and Gather of 200
 * floats (offsets from a tensor) plus its mask / repeat form. */
extern "C" __global__ __aicore__ void brcb_gather(GM_ADDR x, GM_ADDR offsets, GM_ADDR y) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, ob, yb;
    pipe.InitBuffer(xb, 1024);
    pipe.InitBuffer(ob, 1024);
    pipe.InitBuffer(yb, 4096);
    GlobalTensor<uint8_t> xg, og, yg;
    xg.SetGlobalBuffer((__gm__ uint8_t *)x);
    og.SetGlobalBuffer((__gm__ uint8_t *)offsets);
    yg.SetGlobalBuffer((__gm__ uint8_t *)y);
    LocalTensor<uint8_t> x8 = xb.Get<uint8_t>(), o8 = ob.Get<uint8_t>(), y8 = yb.Get<uint8_t>();
    Duplicate(y8.ReinterpretCast<uint16_t>(), (uint16_t)0xeeee, 2048);
    DataCopy(x8, xg, 1024);
    DataCopy(o8, og, 1024);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    Brcb(y8.ReinterpretCast<half>(), x8.ReinterpretCast<half>(), 2, BrcbRepeatParams(2, 20));
    LocalTensor<float> yf = y8.ReinterpretCast<float>();
    Gather(yf[384], x8.ReinterpretCast<float>(), o8.ReinterpretCast<uint32_t>(), 0, 200);
    uint64_t bits[2] = {0x5555555555555555ULL, 0};
    Gather(yf[640], x8.ReinterpretCast<float>(), o8.ReinterpretCast<uint32_t>(), 4, bits, 2, 10);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(yg, y8, 4096);
}

/* y[i] = x[offsets[i] / 4] for `count` floats (Gather, count form): offsets come from the
 * caller, so a bad one shows how the layer reports it. */
extern "C" __global__ __aicore__ void gather_custom(GM_ADDR x, GM_ADDR offsets, GM_ADDR y,
                                                    uint32_t count) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, ob, yb;
    pipe.InitBuffer(xb, 1024);
    pipe.InitBuffer(ob, 4 * count);
    pipe.InitBuffer(yb, 4 * count);
    GlobalTensor<float> xg, yg;
    GlobalTensor<uint32_t> og;
    xg.SetGlobalBuffer((__gm__ float *)x);
    og.SetGlobalBuffer((__gm__ uint32_t *)offsets);
    yg.SetGlobalBuffer((__gm__ float *)y);
    LocalTensor<float> xl = xb.Get<float>(), yl = yb.Get<float>();
    LocalTensor<uint32_t> ol = ob.Get<uint32_t>();
    DataCopy(xl, xg, 256);
    DataCopy(ol, og, count);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    Gather(yl, xl, ol, 0, count);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(yg, yl, count);
}
