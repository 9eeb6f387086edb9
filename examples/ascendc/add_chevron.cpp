/*
 * add_chevron.cpp — z = x + y (float), in the shape of CANN's kernel-invocation samples: the
 * kernel, then, for the host program, a wrapper that launches it with the triple-chevron
 * syntax inside `#ifndef __CCE_KT_TEST__`. The device compile skips the wrapper; the host
 * program (examples/c/ascendc_chevron.cpp) calls add_chevron_do, which scripts/npusim-ascendc.sh
 * compiles for the host with `<<<blockDim, l2ctrl, stream>>>` as a launch on npusim.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr int32_t TILE = 256; // floats per tile

extern "C" __global__ __aicore__ void add_chevron(GM_ADDR x, GM_ADDR y, GM_ADDR z,
                                                  uint32_t n) {
    uint32_t per = n / GetBlockNum();
    uint32_t base = GetBlockIdx() * per;
    GlobalTensor<float> gx, gy, gz;
    gx.SetGlobalBuffer((__gm__ float *)x + base, per);
    gy.SetGlobalBuffer((__gm__ float *)y + base, per);
    gz.SetGlobalBuffer((__gm__ float *)z + base, per);
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> qx, qy;
    TQue<QuePosition::VECOUT, 1> qz;
    pipe.InitBuffer(qx, 1, TILE * sizeof(float));
    pipe.InitBuffer(qy, 1, TILE * sizeof(float));
    pipe.InitBuffer(qz, 1, TILE * sizeof(float));
    for (uint32_t off = 0; off < per; off += TILE) {
        LocalTensor<float> lx = qx.AllocTensor<float>();
        LocalTensor<float> ly = qy.AllocTensor<float>();
        DataCopy(lx, gx[off], TILE);
        DataCopy(ly, gy[off], TILE);
        qx.EnQue(lx);
        qy.EnQue(ly);
        lx = qx.DeQue<float>();
        ly = qy.DeQue<float>();
        LocalTensor<float> lz = qz.AllocTensor<float>();
        Add(lz, lx, ly, TILE);
        qz.EnQue(lz);
        qx.FreeTensor(lx);
        qy.FreeTensor(ly);
        lz = qz.DeQue<float>();
        DataCopy(gz[off], lz, TILE);
        qz.FreeTensor(lz);
    }
}

#ifndef __CCE_KT_TEST__
// call of kernel function
void add_chevron_do(uint32_t blockDim, void *l2ctrl, void *stream, uint8_t *x, uint8_t *y,
                    uint8_t *z, uint32_t n) {
    add_chevron<<<blockDim, l2ctrl, stream>>>(x, y, z, n);
}
#endif
