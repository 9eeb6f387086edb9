/*
 * atomic_add.cpp — SetAtomicAdd<T>() / SetAtomicNone() on copies out, and InitGlobalMemory.
 * Every block reads its N elements of x (DataCopyPad: N is odd, so the rows are not whole
 * 32-byte blocks), then
 *   - fills its slice of w with 3 (InitGlobalMemory, Fill or InitOutput), and with SetAtomicAdd in force copies
 *     its x both into z's first N elements (every block adds into the same N: z accumulates
 *     the blocks' x in block order) and onto its slice of w (w = 3 + x);
 *   - after SetAtomicNone, copies x over its slice of v (which the host filled): plain again.
 *
 * Entry points ((GM_ADDR x, GM_ADDR z, GM_ADDR w, GM_ADDR v)): atomic_add_f32, atomic_add_f16,
 * atomic_add_i32. Checked in tests/ascendc.rs against the CPU in block order, bit for bit.
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t ATOMIC_N = 37;

/* FILL picks the name the fill goes by: 0 InitGlobalMemory, 1 Fill, 2 InitOutput. */
template <typename T, int FILL>
__aicore__ inline void AtomicAdd(GM_ADDR x, GM_ADDR z, GM_ADDR w, GM_ADDR v) {
    const uint32_t b = GetBlockIdx();
    GlobalTensor<T> xGM, zGM, wGM, vGM;
    xGM.SetGlobalBuffer((__gm__ T *)x + b * ATOMIC_N, ATOMIC_N);
    zGM.SetGlobalBuffer((__gm__ T *)z, ATOMIC_N);
    wGM.SetGlobalBuffer((__gm__ T *)w + b * ATOMIC_N, ATOMIC_N);
    vGM.SetGlobalBuffer((__gm__ T *)v + b * ATOMIC_N, ATOMIC_N);
    if constexpr (FILL == 2) {
        InitOutput<T>(wGM, ATOMIC_N, (T)3);
    } else if constexpr (FILL == 1) {
        Fill<T>(wGM, ATOMIC_N, 3);
    } else {
        InitGlobalMemory(wGM, ATOMIC_N, (T)3);
    }

    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, (ATOMIC_N * sizeof(T) + 31) / 32 * 32);
    LocalTensor<T> t = buf.Get<T>();
    DataCopyExtParams row(1, ATOMIC_N * sizeof(T), 0, 0, 0);
    DataCopyPad(t, xGM, row, DataCopyPadExtParams<T>());
    // The copies out (MTE3) wait for the copy in (MTE2).
    SetFlag<HardEvent::MTE2_MTE3>(0);
    WaitFlag<HardEvent::MTE2_MTE3>(0);
    SetAtomicAdd<T>();
    DataCopyPad(zGM, t, row);
    DataCopyPad(wGM, t, row);
    SetAtomicNone();
    DataCopyPad(vGM, t, row);
}

extern "C" __global__ __aicore__ void atomic_add_f32(GM_ADDR x, GM_ADDR z, GM_ADDR w, GM_ADDR v) {
    AtomicAdd<float, 0>(x, z, w, v);
}
extern "C" __global__ __aicore__ void atomic_add_f16(GM_ADDR x, GM_ADDR z, GM_ADDR w, GM_ADDR v) {
    AtomicAdd<half, 2>(x, z, w, v);
}
extern "C" __global__ __aicore__ void atomic_add_i32(GM_ADDR x, GM_ADDR z, GM_ADDR w, GM_ADDR v) {
    AtomicAdd<int32_t, 1>(x, z, w, v);
}
