/*
 * buf_pool.cpp — TBufPool: a kernel that splits UB into pools and reuses one region for two
 * phases (TPipe::InitBufPool, TBufPool::InitBufPool sharing another pool's bytes, Reset).
 *
 *   buf_pool(x, y, sum, prod, n)   n floats (a multiple of 256): phase 1 writes sum = x + y
 *                                  through queues of pool 1, phase 2 prod = x * y through
 *                                  queues of pool 2, which shares pool 1's bytes
 *   buf_pool_overflow(x)           carves more from a pool than it holds (the block aborts)
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t TILE = 256;

template <class In, class Out>
__aicore__ inline void binary_pass(In &qx, In &qy, Out &qz, GlobalTensor<float> &x,
                                   GlobalTensor<float> &y, GlobalTensor<float> &z, uint32_t n,
                                   bool add) {
    for (uint32_t t = 0; t < n / TILE; t++) {
        LocalTensor<float> a = qx.template AllocTensor<float>();
        LocalTensor<float> b = qy.template AllocTensor<float>();
        DataCopy(a, x[t * TILE], TILE);
        DataCopy(b, y[t * TILE], TILE);
        qx.EnQue(a);
        qy.EnQue(b);
        a = qx.template DeQue<float>();
        b = qy.template DeQue<float>();
        LocalTensor<float> c = qz.template AllocTensor<float>();
        if (add) {
            Add(c, a, b, TILE);
        } else {
            Mul(c, a, b, TILE);
        }
        qz.EnQue(c);
        qx.FreeTensor(a);
        qy.FreeTensor(b);
        c = qz.template DeQue<float>();
        DataCopy(z[t * TILE], c, TILE);
        qz.FreeTensor(c);
    }
}

extern "C" __global__ __aicore__ void buf_pool(GM_ADDR x, GM_ADDR y, GM_ADDR sum, GM_ADDR prod,
                                               uint32_t n) {
    GlobalTensor<float> xg, yg, sg, pg;
    xg.SetGlobalBuffer((__gm__ float *)x, n);
    yg.SetGlobalBuffer((__gm__ float *)y, n);
    sg.SetGlobalBuffer((__gm__ float *)sum, n);
    pg.SetGlobalBuffer((__gm__ float *)prod, n);
    TPipe pipe;
    TBufPool<TPosition::VECCALC> all, first, second;
    TQue<TPosition::VECIN, 2> ax, ay;
    TQue<TPosition::VECOUT, 2> az;
    TQue<TPosition::VECIN, 1> bx, by;
    TQue<TPosition::VECOUT, 1> bz;
    pipe.InitBufPool(all, 6 * TILE * sizeof(float));
    all.InitBufPool(first, 6 * TILE * sizeof(float));
    all.InitBufPool(second, 3 * TILE * sizeof(float), first);
    first.InitBuffer(ax, 2, TILE * sizeof(float));
    first.InitBuffer(ay, 2, TILE * sizeof(float));
    first.InitBuffer(az, 2, TILE * sizeof(float));
    binary_pass(ax, ay, az, xg, yg, sg, n, true);
    first.Reset();
    second.InitBuffer(bx, 1, TILE * sizeof(float));
    second.InitBuffer(by, 1, TILE * sizeof(float));
    second.InitBuffer(bz, 1, TILE * sizeof(float));
    binary_pass(bx, by, bz, xg, yg, pg, n, false);
    second.Reset();
    all.Reset();
}

extern "C" __global__ __aicore__ void buf_pool_overflow(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TBufPool<TPosition::VECCALC> pool;
    TQue<TPosition::VECIN, 2> q;
    pipe.InitBufPool(pool, 1024);
    pool.InitBuffer(q, 2, 1024);
}
