/*
 * sub_custom.cpp — z = x - y (half), double buffered, with the vector op in Ascend C's
 * mask / repeat form (128 halves per repeat, contiguous blocks) and the tiling read from a
 * device pointer with GET_TILING_DATA.
 *
 *   sub_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling)   tiling: SubTiling
 * totalLength must split into blockDim * tileNum * 2 tiles of whole 256-byte repeats.
 */
#include "kernel_operator.h"

using namespace AscendC;

struct SubTiling {
    uint32_t totalLength;
    uint32_t tileNum;
};
REGISTER_TILING_DEFAULT(SubTiling);

constexpr int32_t BUFFER_NUM = 2;

class KernelSub {
public:
    __aicore__ inline KernelSub() {}
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t totalLength,
                                uint32_t tileNum) {
        blockLength = totalLength / GetBlockNum();
        this->tileNum = tileNum;
        tileLength = blockLength / tileNum / BUFFER_NUM;
        ASSERT(tileLength * tileNum * BUFFER_NUM * GetBlockNum() == totalLength);
        ASSERT(tileLength % 128 == 0);
        xGm.SetGlobalBuffer((__gm__ half *)x + blockLength * GetBlockIdx(), blockLength);
        yGm.SetGlobalBuffer((__gm__ half *)y + blockLength * GetBlockIdx(), blockLength);
        zGm.SetGlobalBuffer((__gm__ half *)z + blockLength * GetBlockIdx(), blockLength);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, tileLength * sizeof(half));
        pipe.InitBuffer(inQueueY, BUFFER_NUM, tileLength * sizeof(half));
        pipe.InitBuffer(outQueueZ, BUFFER_NUM, tileLength * sizeof(half));
    }
    __aicore__ inline void Process() {
        for (uint32_t i = 0; i < tileNum * BUFFER_NUM; i++) {
            LocalTensor<half> xLocal = inQueueX.AllocTensor<half>();
            LocalTensor<half> yLocal = inQueueY.AllocTensor<half>();
            DataCopy(xLocal, xGm[i * tileLength], tileLength);
            DataCopy(yLocal, yGm[i * tileLength], tileLength);
            inQueueX.EnQue(xLocal);
            inQueueY.EnQue(yLocal);

            xLocal = inQueueX.DeQue<half>();
            yLocal = inQueueY.DeQue<half>();
            LocalTensor<half> zLocal = outQueueZ.AllocTensor<half>();
            // 128 halves (256 bytes) per repeat, blocks and repeats contiguous.
            Sub(zLocal, xLocal, yLocal, 128, (uint8_t)(tileLength / 128), {1, 1, 1, 8, 8, 8});
            outQueueZ.EnQue(zLocal);
            inQueueX.FreeTensor(xLocal);
            inQueueY.FreeTensor(yLocal);

            zLocal = outQueueZ.DeQue<half>();
            DataCopy(zGm[i * tileLength], zLocal, tileLength);
            outQueueZ.FreeTensor(zLocal);
        }
    }

private:
    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX, inQueueY;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueZ;
    GlobalTensor<half> xGm, yGm, zGm;
    uint32_t blockLength, tileNum, tileLength;
};

extern "C" __global__ __aicore__ void sub_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z,
                                                 GM_ADDR tiling) {
    GET_TILING_DATA(t, tiling);
    KernelSub op;
    op.Init(x, y, z, t.totalLength, t.tileNum);
    op.Process();
}
