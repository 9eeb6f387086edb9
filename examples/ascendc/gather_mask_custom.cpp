/*
 * gather_mask_custom.cpp — Ascend C's GatherMask on npusim: a uint16_t pattern tensor in
 * normal mode over 2 repeats (the second pattern 1 block on), a built-in pattern in counter
 * mode over an odd count, and a uint32_t pattern on floats; each writes its rsvdCnt to GM.
 * tests/ascendc.rs compares with the CPU.
 */
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void gather_mask_custom(GM_ADDR x, GM_ADDR pattern, GM_ADDR y,
                                                         GM_ADDR counts, uint32_t count) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, pb, yb;
    pipe.InitBuffer(xb, 2048);
    pipe.InitBuffer(pb, 256);
    pipe.InitBuffer(yb, 3 * 1024);
    GlobalTensor<uint16_t> xg, pg, yg;
    GlobalTensor<uint64_t> cg;
    xg.SetGlobalBuffer((__gm__ uint16_t *)x);
    pg.SetGlobalBuffer((__gm__ uint16_t *)pattern);
    yg.SetGlobalBuffer((__gm__ uint16_t *)y);
    cg.SetGlobalBuffer((__gm__ uint64_t *)counts);
    LocalTensor<uint16_t> xl = xb.Get<uint16_t>(), pl = pb.Get<uint16_t>(), yl = yb.Get<uint16_t>();
    Duplicate(yl, (uint16_t)0xeeee, 3 * 512);
    DataCopy(xl, xg, 1024);
    DataCopy(pl, pg, 128);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    uint64_t n0 = 0, n1 = 0, n2 = 0;
    LocalTensor<half> xh = xl.ReinterpretCast<half>();
    GatherMask(yl.ReinterpretCast<half>(), xh, pl, false, 0, GatherMaskParams(1, 2, 8, 1), n0);
    GatherMask(yl[512], xl, (uint8_t)5, true, count, GatherMaskParams(2, 0, 16, 0), n1);
    LocalTensor<uint32_t> pl32 = pl.ReinterpretCast<uint32_t>();
    GatherMask(yl[1024].ReinterpretCast<float>(), xl.ReinterpretCast<float>(), pl32, true, 50,
               GatherMaskParams(1, 0, 8, 8), n2);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(yg, yl, 3 * 512);
    cg.SetValue(0, n0);
    cg.SetValue(1, n1);
    cg.SetValue(2, n2);
}
