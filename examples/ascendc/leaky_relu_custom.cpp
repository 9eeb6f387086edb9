/*
 * leaky_relu_custom.cpp — y = x > 0 ? x : slope * x (half), double buffered; the slope is a
 * float kernel argument, the length a scalar one.
 *
 *   leaky_relu_custom(GM_ADDR x, GM_ADDR y, uint32_t totalLength, float slope)
 * Blocks take contiguous runs of whole 16-element (32-byte) groups; the tile is 4096 halves
 * and the last one of a block may be shorter.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr int32_t BUFFER_NUM = 2;
constexpr uint32_t TILE = 4096;

extern "C" __global__ __aicore__ void leaky_relu_custom(GM_ADDR x, GM_ADDR y,
                                                        uint32_t totalLength, float slope) {
    // Split whole 16-element groups over the blocks.
    uint32_t groups = (totalLength + 15) / 16;
    uint32_t per = groups / GetBlockNum(), extra = groups % GetBlockNum();
    uint32_t idx = GetBlockIdx();
    uint32_t begin = (idx * per + (idx < extra ? idx : extra)) * 16;
    uint32_t end = begin + (per + (idx < extra ? 1 : 0)) * 16;
    if (end > totalLength) {
        end = totalLength;
    }
    if (begin >= end) {
        return;
    }
    GlobalTensor<half> xGm, yGm;
    xGm.SetGlobalBuffer((__gm__ half *)x + begin, end - begin);
    yGm.SetGlobalBuffer((__gm__ half *)y + begin, end - begin);
    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue;
    pipe.InitBuffer(inQueue, BUFFER_NUM, TILE * sizeof(half));
    pipe.InitBuffer(outQueue, BUFFER_NUM, TILE * sizeof(half));
    half s = slope;
    for (uint32_t off = 0; off < end - begin; off += TILE) {
        uint32_t n = end - begin - off < TILE ? end - begin - off : TILE;
        LocalTensor<half> in = inQueue.AllocTensor<half>();
        DataCopy(in, xGm[off], n);
        inQueue.EnQue(in);
        in = inQueue.DeQue<half>();
        LocalTensor<half> out = outQueue.AllocTensor<half>();
        LeakyRelu(out, in, s, n);
        outQueue.EnQue(out);
        inQueue.FreeTensor(in);
        out = outQueue.DeQue<half>();
        DataCopy(yGm[off], out, n);
        outQueue.FreeTensor(out);
    }
}
