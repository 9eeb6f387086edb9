/*
 * cross_core.cpp — split mix kernels (KERNEL_TYPE_MIX_AIC_1_2): each AI core of the launch runs
 * a cube block (ASCEND_IS_AIC) and two vector blocks (ASCEND_IS_AIV) that hand work to each
 * other through cross-core flags (CrossCoreSetFlag / CrossCoreWaitFlag).
 *
 * Every AI core g owns CC_N floats of each array, its vector block s the half at s * CC_N / 2.
 * Entry points ((GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR z, GM_ADDR info)):
 *   cross_core_pingpong  AIC: w = 2x (scalar stores), set mode 2 (flag 3) -> both AIVs wait,
 *                        y = w + 1 over their half, set mode 2 (flag 5) -> the AIC waits for
 *                        both, z = 3y (scalar). info[block] (AIV: 16 + 2g + s) holds
 *                        GetBlockIdx, GetBlockNum, GetSubBlockIdx, GetTaskRation of each block.
 *   cross_core_pair      the two AIVs of an AI core: each writes y = x + 1 over its half, set
 *                        mode 1 (flag 2), wait: each then copies the other's half of y into
 *                        its half of z.
 *   cross_core_all       mode 0 over every AIV of the launch: each writes y = x + 1 over its
 *                        half, then after the set / wait reads the half of the next AIV
 *                        (across AI cores) into its half of z.
 *   cross_core_never     an AIV waits for flag 7, which nothing sets: the launch fails.
 * Checked in tests/ascendc.rs.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t CC_N = 64;
constexpr uint32_t CC_HALF = CC_N / 2;

class CrossCore {
public:
    __aicore__ inline CrossCore(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR z, GM_ADDR info) {
        // AIC block g, or AIV block 2g + s.
        const uint32_t g = ASCEND_IS_AIV ? GetBlockIdx() / GetTaskRation() : GetBlockIdx();
        xg = (__gm__ float *)x + g * CC_N;
        wg = (__gm__ float *)w + g * CC_N;
        yg = (__gm__ float *)y + g * CC_N;
        zg = (__gm__ float *)z + g * CC_N;
        __gm__ int32_t *slot = (__gm__ int32_t *)info +
                               4 * (ASCEND_IS_AIV ? 16 + GetBlockIdx() : GetBlockIdx());
        slot[0] = (int32_t)GetBlockIdx();
        slot[1] = (int32_t)GetBlockNum();
        slot[2] = (int32_t)GetSubBlockIdx();
        slot[3] = (int32_t)GetTaskRation();
    }

    /* dst[half] = src[half] + add on the vector unit. */
    __aicore__ inline void AddsHalf(__gm__ float *dst, __gm__ float *src, float add) {
        const uint32_t off = GetSubBlockIdx() * CC_HALF;
        GlobalTensor<float> in, out;
        in.SetGlobalBuffer(src + off, CC_HALF);
        out.SetGlobalBuffer(dst + off, CC_HALF);
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, CC_HALF * sizeof(float));
        LocalTensor<float> t = buf.Get<float>();
        DataCopy(t, in, CC_HALF);
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
        Adds(t, t, add, CC_HALF);
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopy(out, t, CC_HALF);
        PipeBarrier<PIPE_ALL>();
    }

    __gm__ float *xg, *wg, *yg, *zg;
};

extern "C" __global__ __aicore__ void cross_core_pingpong(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR z,
                                                          GM_ADDR info) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    CrossCore k(x, w, y, z, info);
    if ASCEND_IS_AIC {
        for (uint32_t i = 0; i < CC_N; i++) {
            k.wg[i] = 2.0f * k.xg[i];
        }
        CrossCoreSetFlag<0x2, PIPE_FIX>(3);
        CrossCoreWaitFlag(5);
        for (uint32_t i = 0; i < CC_N; i++) {
            k.zg[i] = 3.0f * k.yg[i];
        }
    }
    if ASCEND_IS_AIV {
        CrossCoreWaitFlag(3);
        k.AddsHalf(k.yg, k.wg, 1.0f);
        CrossCoreSetFlag<0x2, PIPE_MTE3>(5);
    }
}

extern "C" __global__ __aicore__ void cross_core_pair(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR z,
                                                      GM_ADDR info) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    CrossCore k(x, w, y, z, info);
    if ASCEND_IS_AIV {
        k.AddsHalf(k.yg, k.xg, 1.0f);
        CrossCoreSetFlag<0x1, PIPE_MTE3>(2);
        CrossCoreWaitFlag(2);
        // The other vector block's half of y into this block's half of z.
        const uint32_t mine = GetSubBlockIdx() * CC_HALF, other = CC_HALF - mine;
        for (uint32_t i = 0; i < CC_HALF; i++) {
            k.zg[mine + i] = k.yg[other + i];
        }
    }
}

extern "C" __global__ __aicore__ void cross_core_all(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR z,
                                                     GM_ADDR info) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    CrossCore k(x, w, y, z, info);
    if ASCEND_IS_AIV {
        k.AddsHalf(k.yg, k.xg, 1.0f);
        CrossCoreSetFlag<0x0, PIPE_MTE3>(1);
        CrossCoreWaitFlag(1);
        // The next vector block of the launch: halves are laid out in AIV block order.
        const uint32_t aivs = GetBlockNum() * GetTaskRation();
        const uint32_t next = (GetBlockIdx() + 1) % aivs;
        __gm__ float *yAll = (__gm__ float *)y;
        __gm__ float *zAll = (__gm__ float *)z;
        for (uint32_t i = 0; i < CC_HALF; i++) {
            zAll[GetBlockIdx() * CC_HALF + i] = yAll[next * CC_HALF + i];
        }
    }
}

extern "C" __global__ __aicore__ void cross_core_never(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR z,
                                                       GM_ADDR info) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    CrossCore k(x, w, y, z, info);
    if ASCEND_IS_AIV {
        CrossCoreWaitFlag(7);
        k.AddsHalf(k.yg, k.xg, 1.0f);
    }
}
