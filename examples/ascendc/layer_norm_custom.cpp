/*
 * layer_norm_custom.cpp — layer normalisation of each row of a float matrix:
 * y = (x - mean) / sqrt(var + eps) * gamma + beta (biased variance). Blocks take contiguous
 * runs of rows; gamma and beta stay in UB; mean and variance come back to the scalar unit
 * with GetValue.
 *
 *   layer_norm_custom(GM_ADDR x, GM_ADDR gamma, GM_ADDR beta, GM_ADDR y, GM_ADDR tiling)
 * tiling: LayerNormTiling {rows, cols, eps}; cols a multiple of 8, at most 8192.
 */
#include "kernel_operator.h"

using namespace AscendC;

struct LayerNormTiling {
    uint32_t rows;
    uint32_t cols;
    float eps;
};
REGISTER_TILING_DEFAULT(LayerNormTiling);

constexpr int32_t BUFFER_NUM = 2;

__aicore__ inline float InvSqrt(float v) {
    float r;
    __asm__("fsqrt.s %0, %1" : "=f"(r) : "f"(v));
    return 1.0f / r;
}

extern "C" __global__ __aicore__ void layer_norm_custom(GM_ADDR x, GM_ADDR gamma, GM_ADDR beta,
                                                        GM_ADDR y, GM_ADDR tiling) {
    GET_TILING_DATA(t, tiling);
    ASSERT(t.cols % 8 == 0 && t.cols <= 8192);
    const uint32_t n = t.cols;
    uint32_t per = t.rows / GetBlockNum(), extra = t.rows % GetBlockNum();
    uint32_t idx = GetBlockIdx();
    uint32_t first = idx * per + (idx < extra ? idx : extra);
    uint32_t count = per + (idx < extra ? 1 : 0);
    GlobalTensor<float> xGm, yGm, gGm, bGm;
    xGm.SetGlobalBuffer((__gm__ float *)x + (uint64_t)first * n);
    yGm.SetGlobalBuffer((__gm__ float *)y + (uint64_t)first * n);
    gGm.SetGlobalBuffer((__gm__ float *)gamma, n);
    bGm.SetGlobalBuffer((__gm__ float *)beta, n);

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue;
    TBuf<QuePosition::VECCALC> gBuf, bBuf, sqBuf, scalarBuf;
    pipe.InitBuffer(inQueue, BUFFER_NUM, n * sizeof(float));
    pipe.InitBuffer(outQueue, BUFFER_NUM, n * sizeof(float));
    pipe.InitBuffer(gBuf, n * sizeof(float));
    pipe.InitBuffer(bBuf, n * sizeof(float));
    pipe.InitBuffer(sqBuf, n * sizeof(float));
    pipe.InitBuffer(scalarBuf, 64);
    LocalTensor<float> g = gBuf.Get<float>(), b = bBuf.Get<float>(), sq = sqBuf.Get<float>();
    LocalTensor<float> red = scalarBuf.Get<float>();
    DataCopy(g, gGm, n);
    DataCopy(b, bGm, n);
    int32_t ev = GetTPipePtr()->FetchEventID<HardEvent::MTE2_V>();
    SetFlag<HardEvent::MTE2_V>(ev);
    WaitFlag<HardEvent::MTE2_V>(ev);

    const float inv_n = 1.0f / (float)n;
    for (uint32_t r = 0; r < count; r++) {
        LocalTensor<float> in = inQueue.AllocTensor<float>();
        DataCopy(in, xGm[(uint64_t)r * n], n);
        inQueue.EnQue(in);
        in = inQueue.DeQue<float>();
        LocalTensor<float> out = outQueue.AllocTensor<float>();
        ReduceSum(red, in, red, n);
        float mean = red.GetValue(0) * inv_n;
        Adds(out, in, -mean, n);
        inQueue.FreeTensor(in);
        Mul(sq, out, out, n);
        ReduceSum(red, sq, red, n);
        float rstd = InvSqrt(red.GetValue(0) * inv_n + t.eps);
        Muls(out, out, rstd, n);
        Mul(out, out, g, n);
        Add(out, out, b, n);
        outQueue.EnQue(out);
        out = outQueue.DeQue<float>();
        DataCopy(yGm[(uint64_t)r * n], out, n);
        outQueue.FreeTensor(out);
    }
}
