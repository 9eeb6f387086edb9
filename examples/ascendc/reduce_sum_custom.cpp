/*
 * reduce_sum_custom.cpp — the sum of each row of a float matrix (rows x cols), one float per
 * row. Blocks take contiguous runs of rows; a row is loaded in tiles of up to 8192 elements,
 * each tile reduced on the vector unit, the tile sums accumulated on the scalar unit; the
 * row sums of a block are gathered in UB and written out with one copy per 8 rows... or
 * fewer at the end (DataCopyPad, byte-granular).
 *
 *   reduce_sum_custom(GM_ADDR x, GM_ADDR y, GM_ADDR tiling)   tiling: ReduceTiling {rows, cols}
 * cols a multiple of 8.
 */
#include "kernel_operator.h"

using namespace AscendC;

struct ReduceTiling {
    uint32_t rows;
    uint32_t cols;
};
REGISTER_TILING_DEFAULT(ReduceTiling);

constexpr int32_t BUFFER_NUM = 2;
constexpr uint32_t TILE = 8192;

extern "C" __global__ __aicore__ void reduce_sum_custom(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
    GET_TILING_DATA(t, tiling);
    ASSERT(t.cols % 8 == 0);
    uint32_t per = t.rows / GetBlockNum(), extra = t.rows % GetBlockNum();
    uint32_t idx = GetBlockIdx();
    uint32_t first = idx * per + (idx < extra ? idx : extra);
    uint32_t count = per + (idx < extra ? 1 : 0);
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer((__gm__ float *)x + (uint64_t)first * t.cols);
    yGm.SetGlobalBuffer((__gm__ float *)y + first, count);

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue;
    TQue<QuePosition::VECOUT, 1> outQueue;
    TBuf<QuePosition::VECCALC> scalarBuf;
    pipe.InitBuffer(inQueue, BUFFER_NUM, TILE * sizeof(float));
    pipe.InitBuffer(outQueue, 1, 8 * sizeof(float));
    pipe.InitBuffer(scalarBuf, 64);
    LocalTensor<float> red = scalarBuf.Get<float>();

    for (uint32_t r0 = 0; r0 < count; r0 += 8) {
        LocalTensor<float> out = outQueue.AllocTensor<float>();
        uint32_t group = count - r0 < 8 ? count - r0 : 8;
        for (uint32_t r = r0; r < r0 + group; r++) {
            float acc = 0.0f;
            for (uint32_t c = 0; c < t.cols; c += TILE) {
                uint32_t n = t.cols - c < TILE ? t.cols - c : TILE;
                LocalTensor<float> in = inQueue.AllocTensor<float>();
                DataCopy(in, xGm[(uint64_t)r * t.cols + c], n);
                inQueue.EnQue(in);
                in = inQueue.DeQue<float>();
                ReduceSum(red, in, red, n);
                inQueue.FreeTensor(in);
                acc += red.GetValue(0);
            }
            out.SetValue(r - r0, acc);
        }
        outQueue.EnQue(out);
        out = outQueue.DeQue<float>();
        DataCopyPad(yGm[r0], out, DataCopyExtParams(1, group * sizeof(float), 0, 0, 0));
        outQueue.FreeTensor(out);
    }
}
