/*
 * add_custom.cpp — z = x + y in Ascend C, the introductory vector sample's structure: each
 * block takes a contiguous share of the vectors, walks it in tiles through a copy-in /
 * compute / copy-out pipeline of queues, single or double buffered.
 *
 * Entry points (all `(GM_ADDR x, GM_ADDR y, GM_ADDR z, ...)`):
 *   add_custom             half,  double buffered, fixed 8 x 2048 elements on 8 blocks
 *   add_custom_single      half,  single buffered, same fixed shape
 *   add_custom_f32         float, double buffered, same fixed shape
 *   add_custom_tiling      half,  double buffered, AddTiling read with GET_TILING_DATA from
 *                          the `tiling` argument (a device pointer)
 *   add_custom_tiling_f32  float, double buffered, AddTiling passed by value
 *   add_custom_big_tiling  as add_custom_tiling_f32 with a 48-byte tiling struct by value
 *   add_custom_unsynced    add_custom without EnQue / DeQue of the inputs (a deliberate bug:
 *                          the sum of stale UB bytes, as on hardware)
 * With tiling, totalLength must split into blockDim * tileNum * BUFFER_NUM tiles of whole
 * 32-byte blocks (ASSERT otherwise).
 */
#include "kernel_operator.h"

using namespace AscendC;

struct AddTiling {
    uint32_t totalLength;
    uint32_t tileNum;
};
REGISTER_TILING_DEFAULT(AddTiling);

constexpr uint32_t TOTAL_LENGTH = 8 * 2048;
// Launched on 8 blocks (USE_CORE_NUM in the sample); any block count that divides the work works.
constexpr uint32_t TILE_NUM = 8;

// SYNC_INPUTS = false is a deliberate bug (add_custom_unsynced): the inputs are never enqueued
// and dequeued, so the vector unit does not wait for their copies and adds stale UB bytes.
template <typename T, int32_t BUFFER_NUM, bool SYNC_INPUTS = true> class KernelAdd {
public:
    __aicore__ inline KernelAdd() {}
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t totalLength,
                                uint32_t tileNum) {
        ASSERT(GetBlockNum() != 0 && tileNum != 0);
        blockLength = totalLength / GetBlockNum();
        this->tileNum = tileNum;
        tileLength = blockLength / tileNum / BUFFER_NUM;
        ASSERT(tileLength * tileNum * BUFFER_NUM * GetBlockNum() == totalLength);
        ASSERT(tileLength * sizeof(T) % 32 == 0);
        xGm.SetGlobalBuffer((__gm__ T *)x + blockLength * GetBlockIdx(), blockLength);
        yGm.SetGlobalBuffer((__gm__ T *)y + blockLength * GetBlockIdx(), blockLength);
        zGm.SetGlobalBuffer((__gm__ T *)z + blockLength * GetBlockIdx(), blockLength);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, tileLength * sizeof(T));
        pipe.InitBuffer(inQueueY, BUFFER_NUM, tileLength * sizeof(T));
        pipe.InitBuffer(outQueueZ, BUFFER_NUM, tileLength * sizeof(T));
    }
    __aicore__ inline void Process() {
        int32_t loopCount = tileNum * BUFFER_NUM;
        for (int32_t i = 0; i < loopCount; i++) {
            CopyIn(i);
            Compute(i);
            CopyOut(i);
        }
    }

private:
    __aicore__ inline void CopyIn(int32_t progress) {
        LocalTensor<T> xLocal = inQueueX.template AllocTensor<T>();
        LocalTensor<T> yLocal = inQueueY.template AllocTensor<T>();
        DataCopy(xLocal, xGm[progress * tileLength], tileLength);
        DataCopy(yLocal, yGm[progress * tileLength], tileLength);
        if (SYNC_INPUTS) {
            inQueueX.EnQue(xLocal);
            inQueueY.EnQue(yLocal);
        }
        xStale = xLocal;
        yStale = yLocal;
    }
    __aicore__ inline void Compute(int32_t) {
        LocalTensor<T> xLocal = SYNC_INPUTS ? inQueueX.template DeQue<T>() : xStale;
        LocalTensor<T> yLocal = SYNC_INPUTS ? inQueueY.template DeQue<T>() : yStale;
        LocalTensor<T> zLocal = outQueueZ.template AllocTensor<T>();
        Add(zLocal, xLocal, yLocal, tileLength);
        outQueueZ.EnQue(zLocal);
        inQueueX.FreeTensor(xLocal);
        inQueueY.FreeTensor(yLocal);
    }
    __aicore__ inline void CopyOut(int32_t progress) {
        LocalTensor<T> zLocal = outQueueZ.template DeQue<T>();
        DataCopy(zGm[progress * tileLength], zLocal, tileLength);
        outQueueZ.FreeTensor(zLocal);
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX, inQueueY;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueZ;
    GlobalTensor<T> xGm;
    GlobalTensor<T> yGm;
    GlobalTensor<T> zGm;
    LocalTensor<T> xStale, yStale;
    uint32_t blockLength;
    uint32_t tileNum;
    uint32_t tileLength;
};

extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z) {
    KernelAdd<half, 2> op;
    op.Init(x, y, z, TOTAL_LENGTH, TILE_NUM);
    op.Process();
}

extern "C" __global__ __aicore__ void add_custom_single(GM_ADDR x, GM_ADDR y, GM_ADDR z) {
    KernelAdd<half, 1> op;
    op.Init(x, y, z, TOTAL_LENGTH, TILE_NUM);
    op.Process();
}

extern "C" __global__ __aicore__ void add_custom_f32(GM_ADDR x, GM_ADDR y, GM_ADDR z) {
    KernelAdd<float, 2> op;
    op.Init(x, y, z, TOTAL_LENGTH, TILE_NUM);
    op.Process();
}

extern "C" __global__ __aicore__ void add_custom_tiling(GM_ADDR x, GM_ADDR y, GM_ADDR z,
                                                        GM_ADDR tiling) {
    GET_TILING_DATA(tilingData, tiling);
    KernelAdd<half, 2> op;
    op.Init(x, y, z, tilingData.totalLength, tilingData.tileNum);
    op.Process();
}

extern "C" __global__ __aicore__ void add_custom_tiling_f32(GM_ADDR x, GM_ADDR y, GM_ADDR z,
                                                            AddTiling tiling) {
    KernelAdd<float, 2> op;
    op.Init(x, y, z, tiling.totalLength, tiling.tileNum);
    op.Process();
}

// A tiling struct of 48 bytes (a float and a 64-bit field among them): LP64F passes it by
// reference to a copy, which the launcher places in device memory for each launch.
struct AddBigTiling {
    uint32_t totalLength;
    uint32_t tileNum;
    uint32_t reserved[6];
    float scale;
    uint64_t magic;
};

extern "C" __global__ __aicore__ void add_custom_big_tiling(GM_ADDR x, GM_ADDR y, GM_ADDR z,
                                                            AddBigTiling tiling) {
    ASSERT(tiling.magic == 0x5eed5eed5eed5eedULL && tiling.scale == 1.0f);
    KernelAdd<float, 2> op;
    op.Init(x, y, z, tiling.totalLength, tiling.tileNum);
    op.Process();
}

extern "C" __global__ __aicore__ void add_custom_unsynced(GM_ADDR x, GM_ADDR y, GM_ADDR z) {
    KernelAdd<half, 2, false> op;
    op.Init(x, y, z, TOTAL_LENGTH, TILE_NUM);
    op.Process();
}

#ifndef __CCE_KT_TEST__
// The launch as the Ascend toolchain compiles it for the host; skipped on the device side.
void add_custom_do(uint32_t blockDim, void *l2ctrl, void *stream, uint8_t *x, uint8_t *y,
                   uint8_t *z) {
    add_custom<<<blockDim, l2ctrl, stream>>>(x, y, z);
}
#endif
