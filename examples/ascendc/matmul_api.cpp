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
