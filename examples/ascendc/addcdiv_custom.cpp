/*
 * addcdiv_custom.cpp — y = input + value * x1 / x2 (torch.addcdiv) on half tensors, computed
 * in float: Cast half -> float into TBuf scratch, Div, Muls, Add, Cast back (CAST_RINT).
 *
 *   addcdiv_custom(GM_ADDR input, GM_ADDR x1, GM_ADDR x2, GM_ADDR y, GM_ADDR tiling)
 * tiling: AddcdivTiling {totalLength, tileLength, value}; totalLength a multiple of
 * blockDim * tileLength, tileLength a multiple of 16.
 */
#include "kernel_operator.h"

using namespace AscendC;

struct AddcdivTiling {
    uint32_t totalLength;
    uint32_t tileLength;
    float value;
};
REGISTER_TILING_DEFAULT(AddcdivTiling);

constexpr int32_t BUFFER_NUM = 2;

extern "C" __global__ __aicore__ void addcdiv_custom(GM_ADDR input, GM_ADDR x1, GM_ADDR x2,
                                                     GM_ADDR y, GM_ADDR tiling) {
    GET_TILING_DATA(t, tiling);
    uint32_t blockLength = t.totalLength / GetBlockNum();
    uint32_t tile = t.tileLength;
    ASSERT(blockLength * GetBlockNum() == t.totalLength && tile % 16 == 0 &&
           blockLength % tile == 0);
    uint64_t base = (uint64_t)blockLength * GetBlockIdx();
    GlobalTensor<half> inGm, aGm, bGm, yGm;
    inGm.SetGlobalBuffer((__gm__ half *)input + base, blockLength);
    aGm.SetGlobalBuffer((__gm__ half *)x1 + base, blockLength);
    bGm.SetGlobalBuffer((__gm__ half *)x2 + base, blockLength);
    yGm.SetGlobalBuffer((__gm__ half *)y + base, blockLength);

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> qIn, qA, qB;
    TQue<QuePosition::VECOUT, BUFFER_NUM> qOut;
    TBuf<QuePosition::VECCALC> f0, f1, f2;
    pipe.InitBuffer(qIn, BUFFER_NUM, tile * sizeof(half));
    pipe.InitBuffer(qA, BUFFER_NUM, tile * sizeof(half));
    pipe.InitBuffer(qB, BUFFER_NUM, tile * sizeof(half));
    pipe.InitBuffer(qOut, BUFFER_NUM, tile * sizeof(half));
    pipe.InitBuffer(f0, tile * sizeof(float));
    pipe.InitBuffer(f1, tile * sizeof(float));
    pipe.InitBuffer(f2, tile * sizeof(float));
    LocalTensor<float> fin = f0.Get<float>(), fa = f1.Get<float>(), fb = f2.Get<float>();

    for (uint32_t off = 0; off < blockLength; off += tile) {
        LocalTensor<half> in = qIn.AllocTensor<half>();
        LocalTensor<half> a = qA.AllocTensor<half>();
        LocalTensor<half> b = qB.AllocTensor<half>();
        DataCopy(in, inGm[off], tile);
        DataCopy(a, aGm[off], tile);
        DataCopy(b, bGm[off], tile);
        qIn.EnQue(in);
        qA.EnQue(a);
        qB.EnQue(b);

        in = qIn.DeQue<half>();
        a = qA.DeQue<half>();
        b = qB.DeQue<half>();
        Cast(fin, in, RoundMode::CAST_NONE, tile);
        Cast(fa, a, RoundMode::CAST_NONE, tile);
        Cast(fb, b, RoundMode::CAST_NONE, tile);
        qIn.FreeTensor(in);
        qA.FreeTensor(a);
        qB.FreeTensor(b);
        Div(fa, fa, fb, tile);
        Muls(fa, fa, t.value, tile);
        Add(fa, fin, fa, tile);
        LocalTensor<half> out = qOut.AllocTensor<half>();
        Cast(out, fa, RoundMode::CAST_RINT, tile);
        qOut.EnQue(out);

        out = qOut.DeQue<half>();
        DataCopy(yGm[off], out, tile);
        qOut.FreeTensor(out);
    }
}
