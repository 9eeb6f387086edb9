/*
 * sync_all.cpp — SyncAll, the barrier across a launch's blocks, in both of its forms.
 *
 * Every block b doubles its SYNC_N floats of x into its slot of the GM scratch w, waits at
 * the barrier, then reads the slot of block (b + 1) % blocks, which another block wrote:
 * without the barrier that read would see what was there before.
 *
 * Entry points:
 *   sync_all_soft(x, w, y, sync)  the software form (SyncAll(syncGM, ubWorkspace)):
 *                                 y[b] = w[b] + w[b + 1], w = 2x
 *   sync_all_hard(x, w, y, sync)  the hardware form (SyncAll()), twice: after the first
 *                                 barrier y[b] = w[b] + w[b + 1], after the second
 *                                 w[b] = y[b + 1]
 *   sync_all_few(x, w, y, sync)   the software form among the first two blocks only
 *                                 (usedCores = 2); the other blocks copy x to y untouched
 *   sync_all_skew(x, w, y, sync)  sync_all_soft, with block 0 working longer before the barrier
 *   sync_all_skipped(x, w, y, sync) block 0 returns without the barrier the others wait at:
 *                                 the launch fails
 * Checked in tests/ascendc.rs against the CPU.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t SYNC_N = 40;
constexpr uint32_t SYNC_BYTES = SYNC_N * sizeof(float);

class SyncAllKernel {
public:
    __aicore__ inline SyncAllKernel(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR sync) {
        const uint32_t b = GetBlockIdx();
        const uint32_t next = (b + 1) % GetBlockNum();
        xGM.SetGlobalBuffer((__gm__ float *)x + b * SYNC_N, SYNC_N);
        wGM.SetGlobalBuffer((__gm__ float *)w + b * SYNC_N, SYNC_N);
        nextGM.SetGlobalBuffer((__gm__ float *)w + next * SYNC_N, SYNC_N);
        nextY.SetGlobalBuffer((__gm__ float *)y + next * SYNC_N, SYNC_N);
        yGM.SetGlobalBuffer((__gm__ float *)y + b * SYNC_N, SYNC_N);
        syncGM.SetGlobalBuffer((__gm__ int32_t *)sync, GetBlockNum() * 8);
        pipe.InitBuffer(mine, SYNC_BYTES);
        pipe.InitBuffer(theirs, SYNC_BYTES);
        pipe.InitBuffer(work, GetBlockNum() * 8 * sizeof(int32_t));
    }

    /* w[b] = 2 x[b], written out to GM. */
    __aicore__ inline void Double(uint32_t extra) {
        LocalTensor<float> t = mine.Get<float>();
        DataCopy(t, xGM, SYNC_N);
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
        Muls(t, t, 2.0f, SYNC_N);
        for (uint32_t i = 0; i < extra; i++) {
            Muls(t, t, 1.0f, SYNC_N);
        }
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopy(wGM, t, SYNC_N);
    }

    /* out = (withMine ? what `mine` holds : 0) + next (another block's slot). */
    __aicore__ inline void AddNext(const GlobalTensor<float> &out, const GlobalTensor<float> &next,
                                   bool withMine) {
        LocalTensor<float> t = mine.Get<float>();
        LocalTensor<float> u = theirs.Get<float>();
        DataCopy(u, next, SYNC_N);
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
        if (withMine) {
            Add(t, t, u, SYNC_N);
        } else {
            Adds(t, u, 0.0f, SYNC_N);
        }
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopy(out, t, SYNC_N);
        // The copy out reads `mine`; the next phase's vector work writes it.
        PipeBarrier<PIPE_ALL>();
    }

    __aicore__ inline void Soft(int32_t usedCores = 0) {
        LocalTensor<int32_t> ub = work.Get<int32_t>();
        SyncAll(syncGM, ub, usedCores);
    }

    /* y[b] = x[b], for the blocks that stay out of the barrier. */
    __aicore__ inline void Copy() {
        LocalTensor<float> t = mine.Get<float>();
        DataCopy(t, xGM, SYNC_N);
        SetFlag<HardEvent::MTE2_MTE3>(0);
        WaitFlag<HardEvent::MTE2_MTE3>(0);
        DataCopy(yGM, t, SYNC_N);
    }

    GlobalTensor<float> xGM, wGM, nextGM, yGM, nextY;
    GlobalTensor<int32_t> syncGM;
    TPipe pipe;
    TBuf<TPosition::VECCALC> mine, theirs, work;
};

extern "C" __global__ __aicore__ void sync_all_soft(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR sync) {
    SyncAllKernel k(x, w, y, sync);
    k.Double(0);
    k.Soft();
    k.AddNext(k.yGM, k.nextGM, true);
}

extern "C" __global__ __aicore__ void sync_all_hard(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR sync) {
    SyncAllKernel k(x, w, y, sync);
    k.Double(0);
    SyncAll();
    k.AddNext(k.yGM, k.nextGM, true);
    // Every block has read its neighbour's w before any block writes w again.
    SyncAll<true>();
    k.AddNext(k.wGM, k.nextY, false);
}

extern "C" __global__ __aicore__ void sync_all_few(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR sync) {
    SyncAllKernel k(x, w, y, sync);
    if (GetBlockIdx() >= 2) {
        k.Copy();
        return;
    }
    k.Double(0);
    k.Soft(2);
    // Among blocks 0 and 1 the neighbour of block 1 is block 0.
    if (GetBlockIdx() == 1) {
        k.nextGM.SetGlobalBuffer((__gm__ float *)w, SYNC_N);
    }
    k.AddNext(k.yGM, k.nextGM, true);
}

extern "C" __global__ __aicore__ void sync_all_skew(GM_ADDR x, GM_ADDR w, GM_ADDR y, GM_ADDR sync) {
    SyncAllKernel k(x, w, y, sync);
    k.Double(GetBlockIdx() == 0 ? 200 : 0);
    k.Soft();
    k.AddNext(k.yGM, k.nextGM, true);
}

extern "C" __global__ __aicore__ void sync_all_skipped(GM_ADDR x, GM_ADDR w, GM_ADDR y,
                                                       GM_ADDR sync) {
    SyncAllKernel k(x, w, y, sync);
    k.Double(0);
    if (GetBlockIdx() == 0) {
        return;
    }
    SyncAll();
    k.AddNext(k.yGM, k.nextGM, true);
}
