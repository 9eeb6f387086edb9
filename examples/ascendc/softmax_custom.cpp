/*
 * softmax_custom.cpp — softmax over each row of a float matrix (rows x cols, row-major):
 * y = exp(x - max) / sum. Blocks take contiguous runs of rows; each row goes through the
 * queues, the max and the sum come back to the scalar unit with GetValue.
 *
 *   softmax_custom(GM_ADDR x, GM_ADDR y, GM_ADDR tiling)   tiling: SoftmaxTiling {rows, cols}
 * cols a multiple of 8 (whole 32-byte blocks), at most 12288.
 */
#include "kernel_operator.h"

using namespace AscendC;

struct SoftmaxTiling {
    uint32_t rows;
    uint32_t cols;
};
REGISTER_TILING_DEFAULT(SoftmaxTiling);

constexpr int32_t BUFFER_NUM = 2;

extern "C" __global__ __aicore__ void softmax_custom(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
    GET_TILING_DATA(t, tiling);
    ASSERT(t.cols % 8 == 0 && t.cols <= 12288);
    uint32_t per = t.rows / GetBlockNum(), extra = t.rows % GetBlockNum();
    uint32_t idx = GetBlockIdx();
    uint32_t first = idx * per + (idx < extra ? idx : extra);
    uint32_t count = per + (idx < extra ? 1 : 0);
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer((__gm__ float *)x + (uint64_t)first * t.cols);
    yGm.SetGlobalBuffer((__gm__ float *)y + (uint64_t)first * t.cols);

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue;
    TBuf<QuePosition::VECCALC> scalarBuf;
    pipe.InitBuffer(inQueue, BUFFER_NUM, t.cols * sizeof(float));
    pipe.InitBuffer(outQueue, BUFFER_NUM, t.cols * sizeof(float));
    pipe.InitBuffer(scalarBuf, 64);
    LocalTensor<float> red = scalarBuf.Get<float>();

    for (uint32_t r = 0; r < count; r++) {
        LocalTensor<float> in = inQueue.AllocTensor<float>();
        DataCopy(in, xGm[(uint64_t)r * t.cols], t.cols);
        inQueue.EnQue(in);
        in = inQueue.DeQue<float>();
        LocalTensor<float> out = outQueue.AllocTensor<float>();
        ReduceMax(red, in, red, t.cols);
        float m = red.GetValue(0);
        Adds(out, in, -m, t.cols);
        inQueue.FreeTensor(in);
        Exp(out, out, t.cols);
        ReduceSum(red, out, red, t.cols);
        float s = red.GetValue(0);
        Muls(out, out, 1.0f / s, t.cols);
        outQueue.EnQue(out);
        out = outQueue.DeQue<float>();
        DataCopy(yGm[(uint64_t)r * t.cols], out, t.cols);
        outQueue.FreeTensor(out);
    }
}
