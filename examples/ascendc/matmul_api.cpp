/*
 * matmul_api.cpp — C = A x B with Ascend C's high-level Matmul API (lib/matmul_intf.h): the
 * host's tiling (tiling/tiling_api.h, a TCubeTiling in device memory) splits C into
 * singleCoreM x singleCoreN blocks, one per AIV block; each block finds its offsets and its
 * tail sizes from its block index, points a Matmul object at its part of A, B and C and lets
 * it walk the cube steps. A is M x K, B K x N, C M x N, all row-major (ND) in GM.
 *
 * Entry points ((GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling); half A and B):
 *   matmul_api          float C, IterateAll
 *   matmul_api_iterate  half C (rounded to nearest even), one Iterate / GetTensorC per base block
 * A tiling with Ka != Kb fails the kernel's assert(cond, fmt, ...) (abort code 134).
 *
 * With a bias of N ((GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tiling); one block,
 * singleCore = the whole problem, tails on every side):
 *   matmul_bias          float bias, float C to GM, IterateAll
 *   matmul_bias_half     half bias, half C to GM, Iterate / GetTensorC
 *   matmul_ub_lrelu      float bias, C into UB (VECIN) per base block, LeakyRelu(0.125) on the
 *                        vector unit, then UB -> GM (the MatmulLeakyRelu samples' shape)
 *   matmul_ub_async      the same through Iterate<false> and one GetTensorC<false> per block
 *   matmul_ub_all        the same, no bias, half C: IterateAll into one UB tensor, then Muls(2)
 *   matmul_bias_untiled  SetBias with a tiling made without a bias (deliberate mistake)
 *   matmul_two_objects   two Matmul objects of one REGIST_MATMUL_OBJ: bias + A x B, then A x B
 *                        added into it (enAtomic = 1)
 * The host program examples/c/ascendc_matmul.cpp builds the tiling and checks both against a
 * CPU loop in the cube's order (acl/tests/c_programs.rs runs it on two shapes).
 */
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

/* Where this block's part of A, B and C starts, and its M and N (the last blocks' are short). */
struct BlockPart {
    uint32_t a, b, c;
    int32_t m, n;
};

__aicore__ inline BlockPart Part(const TCubeTiling &t, uint32_t block) {
    uint32_t mBlocks = (t.M + t.singleCoreM - 1) / t.singleCoreM;
    uint32_t mi = block % mBlocks, ni = block / mBlocks;
    BlockPart p;
    p.a = mi * t.singleCoreM * t.Ka;
    p.b = ni * t.singleCoreN;
    p.c = mi * t.singleCoreM * t.N + ni * t.singleCoreN;
    p.m = Std::min<int32_t>(t.singleCoreM, t.M - (int32_t)(mi * t.singleCoreM));
    p.n = Std::min<int32_t>(t.singleCoreN, t.N - (int32_t)(ni * t.singleCoreN));
    return p;
}

template <typename C_T> __aicore__ inline void Run(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tilingGm, bool iterate) {
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, tiling, tilingGm);
    // Ascend C's kernel assert, with a message (tests/ascendc.rs breaks it).
    assert(tiling.Ka == tiling.Kb, "matmul_api: Ka %d != Kb %d\n", tiling.Ka, tiling.Kb);
    if (GetBlockIdx() >= tiling.usedCoreNum) {
        return;
    }
    BlockPart part = Part(tiling, GetBlockIdx());
    GlobalTensor<half> aGM;
    GlobalTensor<half> bGM;
    GlobalTensor<C_T> cGM;
    aGM.SetGlobalBuffer((__gm__ half *)a, tiling.M * tiling.Ka);
    bGM.SetGlobalBuffer((__gm__ half *)b, tiling.Kb * tiling.N);
    cGM.SetGlobalBuffer((__gm__ C_T *)c, tiling.M * tiling.N);

    TPipe pipe;
    Matmul<MatmulType<TPosition::GM, CubeFormat::ND, half>, MatmulType<TPosition::GM, CubeFormat::ND, half>,
           MatmulType<TPosition::GM, CubeFormat::ND, C_T>>
        mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(aGM[part.a]);
    mm.SetTensorB(bGM[part.b]);
    mm.SetTail(part.m, part.n);
    if (iterate) {
        while (mm.Iterate()) {
            mm.GetTensorC(cGM[part.c]);
        }
    } else {
        mm.IterateAll(cGM[part.c]);
    }
    mm.End();
}

extern "C" __global__ __aicore__ void matmul_api(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling) {
    Run<float>(a, b, c, tiling, false);
}

extern "C" __global__ __aicore__ void matmul_api_iterate(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling) {
    Run<half>(a, b, c, tiling, true);
}

/* ---- Bias and C in UB ------------------------------------------------------------------ */

template <typename C_T, typename BIAS_T>
using BiasMatmul = Matmul<MatmulType<TPosition::GM, CubeFormat::ND, half>,
                          MatmulType<TPosition::GM, CubeFormat::ND, half>,
                          MatmulType<TPosition::GM, CubeFormat::ND, C_T>,
                          MatmulType<TPosition::GM, CubeFormat::ND, BIAS_T>>;
template <typename C_T, typename BIAS_T>
using UbMatmul = Matmul<MatmulType<TPosition::GM, CubeFormat::ND, half>,
                        MatmulType<TPosition::GM, CubeFormat::ND, half>,
                        MatmulType<TPosition::VECIN, CubeFormat::ND, C_T>,
                        MatmulType<TPosition::GM, CubeFormat::ND, BIAS_T>>;

/* The four GM operands of the (a, b, bias, c, tiling) kernels: half A and B, the bias and C of
 * the kernel's types, sized by the tiling. */
template <typename BIAS_T, typename C_T> struct Operands {
    GlobalTensor<half> a, b;
    GlobalTensor<BIAS_T> bias;
    GlobalTensor<C_T> c;
    __aicore__ inline Operands(GM_ADDR pa, GM_ADDR pb, GM_ADDR pbias, GM_ADDR pc,
                               const TCubeTiling &t) {
        a.SetGlobalBuffer((__gm__ half *)pa, t.M * t.Ka);
        b.SetGlobalBuffer((__gm__ half *)pb, t.Kb * t.N);
        bias.SetGlobalBuffer((__gm__ BIAS_T *)pbias, t.N);
        c.SetGlobalBuffer((__gm__ C_T *)pc, t.M * t.N);
    }
};

template <typename C_T, typename BIAS_T>
__aicore__ inline void RunBias(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tilingGm,
                               bool iterate, uint8_t atomic = 0) {
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, tiling, tilingGm);
    Operands<BIAS_T, C_T> g(a, b, bias, c, tiling);
    TPipe pipe;
    BiasMatmul<C_T, BIAS_T> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(g.a);
    mm.SetTensorB(g.b);
    mm.SetBias(g.bias);
    if (iterate) {
        while (mm.Iterate()) {
            mm.GetTensorC(g.c);
        }
    } else {
        mm.IterateAll(g.c, atomic);
    }
    mm.End();
}

extern "C" __global__ __aicore__ void matmul_bias(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c,
                                                  GM_ADDR tiling) {
    RunBias<float, float>(a, b, bias, c, tiling, false);
}

extern "C" __global__ __aicore__ void matmul_bias_half(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                       GM_ADDR c, GM_ADDR tiling) {
    RunBias<half, half>(a, b, bias, c, tiling, true);
}

/* IterateAll with enAtomic = 1: C (plus the bias) is added into what c holds. */
extern "C" __global__ __aicore__ void matmul_bias_atomic(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                         GM_ADDR c, GM_ADDR tiling) {
    RunBias<float, float>(a, b, bias, c, tiling, false, 1);
}

/* Two Matmul objects in one kernel, both registered by one REGIST_MATMUL_OBJ: the first writes
 * bias + A x B to c, the second adds A x B into it (enAtomic = 1). */
extern "C" __global__ __aicore__ void matmul_two_objects(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                         GM_ADDR c, GM_ADDR tilingGm) {
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, tiling, tilingGm);
    Operands<float, float> g(a, b, bias, c, tiling);
    TPipe pipe;
    using H = MatmulType<TPosition::GM, CubeFormat::ND, half>;
    using F = MatmulType<TPosition::GM, CubeFormat::ND, float>;
    Matmul<H, H, F, F> first;
    Matmul<H, H, F, F> second;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), first, &tiling, second, &tiling);
    first.SetTensorA(g.a);
    first.SetTensorB(g.b);
    first.SetBias(g.bias);
    first.IterateAll(g.c);
    first.End();
    second.SetTensorA(g.a);
    second.SetTensorB(g.b);
    second.IterateAll(g.c, 1);
    second.End();
}

extern "C" __global__ __aicore__ void matmul_bias_untiled(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                          GM_ADDR c, GM_ADDR tiling) {
    // The same kernel; the host's tiling has isBias = 0.
    RunBias<float, float>(a, b, bias, c, tiling, false);
}

/* C's base blocks into UB, LeakyRelu on the vector unit, each block's m x n out to its place in
 * C. Block i (M first) is M block i % mIter, N block i / mIter. */
template <bool ASYNC>
__aicore__ inline void RunUbLeakyRelu(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c,
                                      GM_ADDR tilingGm) {
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, tiling, tilingGm);
    Operands<float, float> g(a, b, bias, c, tiling);
    TPipe pipe;
    TQue<TPosition::VECIN, 1> inQ;
    TQue<TPosition::VECOUT, 1> outQ;
    const uint32_t bm = tiling.baseM, bn = tiling.baseN;
    pipe.InitBuffer(inQ, 1, bm * bn * sizeof(float));
    pipe.InitBuffer(outQ, 1, bm * bn * sizeof(float));
    UbMatmul<float, float> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(g.a);
    mm.SetTensorB(g.b);
    mm.SetBias(g.bias);
    const uint32_t mIter = (tiling.M + bm - 1) / bm, nIter = (tiling.N + bn - 1) / bn;
    if (ASYNC) {
        mm.template Iterate<false>();
    }
    for (uint32_t i = 0; i < mIter * nIter; i++) {
        if (!ASYNC && !mm.Iterate()) {
            break;
        }
        LocalTensor<float> x = inQ.AllocTensor<float>();
        if (ASYNC) {
            mm.template GetTensorC<false>(x, 0, true);
        } else {
            mm.GetTensorC(x, 0, true);
        }
        inQ.EnQue(x);
        x = inQ.DeQue<float>();
        LocalTensor<float> y = outQ.AllocTensor<float>();
        LeakyRelu(y, x, 0.125f, bm * bn);
        outQ.EnQue(y);
        inQ.FreeTensor(x);
        y = outQ.DeQue<float>();
        uint32_t mi = i % mIter, ni = i / mIter;
        uint32_t m = Std::min<uint32_t>(bm, tiling.M - mi * bm);
        uint32_t n = Std::min<uint32_t>(bn, tiling.N - ni * bn);
        DataCopyParams p((uint16_t)m, (uint16_t)(n * 4 / 32), (uint16_t)((bn - n) * 4 / 32),
                         (uint16_t)((tiling.N - n) * 4 / 32));
        DataCopy(g.c[mi * bm * tiling.N + ni * bn], y, p);
        outQ.FreeTensor(y);
    }
    mm.End();
}

extern "C" __global__ __aicore__ void matmul_ub_lrelu(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                      GM_ADDR c, GM_ADDR tiling) {
    RunUbLeakyRelu<false>(a, b, bias, c, tiling);
}

extern "C" __global__ __aicore__ void matmul_ub_async(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                      GM_ADDR c, GM_ADDR tiling) {
    RunUbLeakyRelu<true>(a, b, bias, c, tiling);
}

/* The whole C (M x N, half) into one UB tensor with IterateAll, doubled, and out. */
extern "C" __global__ __aicore__ void matmul_ub_all(GM_ADDR a, GM_ADDR b, GM_ADDR bias,
                                                    GM_ADDR c, GM_ADDR tilingGm) {
    (void)bias;
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, tiling, tilingGm);
    GlobalTensor<half> aGM, bGM, cGM;
    aGM.SetGlobalBuffer((__gm__ half *)a, tiling.M * tiling.Ka);
    bGM.SetGlobalBuffer((__gm__ half *)b, tiling.Kb * tiling.N);
    cGM.SetGlobalBuffer((__gm__ half *)c, tiling.M * tiling.N);
    TPipe pipe;
    TQue<TPosition::VECIN, 1> inQ;
    TQue<TPosition::VECOUT, 1> outQ;
    const uint32_t all = tiling.M * tiling.N;
    pipe.InitBuffer(inQ, 1, all * sizeof(half));
    pipe.InitBuffer(outQ, 1, all * sizeof(half));
    UbMatmul<half, float> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(aGM);
    mm.SetTensorB(bGM);
    LocalTensor<half> x = inQ.AllocTensor<half>();
    mm.IterateAll(x);
    inQ.EnQue(x);
    x = inQ.DeQue<half>();
    LocalTensor<half> y = outQ.AllocTensor<half>();
    Muls(y, x, (half)2.0f, all);
    outQ.EnQue(y);
    inQ.FreeTensor(x);
    y = outQ.DeQue<half>();
    DataCopy(cGM, y, all);
    outQ.FreeTensor(y);
    mm.End();
}
