/*
 * static_tensor.cpp — Ascend C's static tensor programming: no TPipe or TQue; the kernel takes
 * its UB tensors from a LocalMemAllocator (or the LocalTensor(position, address, size)
 * constructor) and orders the pipes itself with SetFlag / WaitFlag on HardEvents.
 *
 * Entry points:
 *   static_add(x, y, z, n)      z = x + y (float), n a multiple of TILE, on any block count:
 *                               ping-pong tiles from a LocalMemAllocator, each block a
 *                               contiguous share
 *   static_add_addr(x, y, z, n) the same with tensors built at fixed UB addresses, one tile at a
 *                               time
 *   half_permute(x, idx, z, n)  z[idx[i]] = x[i] for n halves (idx: int32 byte offsets, as a
 *                               scatter takes them), element by element with GetValue /
 *                               SetValue on half tensors
 *   int8_scale(x, z, n)         int8 through half and back (Cast both ways, saturating)
 *   static_overflow(x)          asks the allocator for more UB than there is (the block aborts
 *                               with a message)
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t TILE = 1024;

extern "C" __global__ __aicore__ void static_add(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t n) {
    InitSocState();
    uint32_t share = n / GetBlockNum();
    uint32_t base = share * GetBlockIdx();
    GlobalTensor<float> xg, yg, zg;
    xg.SetGlobalBuffer((__gm__ float *)x + base, share);
    yg.SetGlobalBuffer((__gm__ float *)y + base, share);
    zg.SetGlobalBuffer((__gm__ float *)z + base, share);
    LocalMemAllocator<Hardware::UB> ub;
    LocalTensor<float> xs[2] = {ub.Alloc<float, TILE>(), ub.Alloc<float, TILE>()};
    LocalTensor<float> ys[2] = {ub.Alloc<float, TILE>(), ub.Alloc<float, TILE>()};
    LocalTensor<float> zs[2] = {ub.Alloc<TPosition::VECOUT, float>(TILE),
                                ub.Alloc<TPosition::VECOUT, float>(TILE)};
    uint32_t tiles = share / TILE;
    for (uint32_t i = 0; i < tiles; i++) {
        uint32_t p = i & 1;
        event_t ev = p ? EVENT_ID1 : EVENT_ID0;
        // The tile's buffers were last read by the vector unit / written out two tiles ago.
        if (i >= 2) {
            WaitFlag<HardEvent::V_MTE2>(ev);
            WaitFlag<HardEvent::MTE3_V>(ev);
        }
        DataCopy(xs[p], xg[i * TILE], TILE);
        DataCopy(ys[p], yg[i * TILE], TILE);
        SetFlag<HardEvent::MTE2_V>(ev);
        WaitFlag<HardEvent::MTE2_V>(ev);
        Add(zs[p], xs[p], ys[p], TILE);
        SetFlag<HardEvent::V_MTE2>(ev);
        SetFlag<HardEvent::V_MTE3>(ev);
        WaitFlag<HardEvent::V_MTE3>(ev);
        DataCopy(zg[i * TILE], zs[p], TILE);
        SetFlag<HardEvent::MTE3_V>(ev);
    }
    // The flags still set by the last two tiles are consumed before the block ends.
    for (uint32_t i = tiles >= 2 ? tiles - 2 : 0; i < tiles; i++) {
        event_t ev = (i & 1) ? EVENT_ID1 : EVENT_ID0;
        WaitFlag<HardEvent::V_MTE2>(ev);
        WaitFlag<HardEvent::MTE3_V>(ev);
    }
}

extern "C" __global__ __aicore__ void static_add_addr(GM_ADDR x, GM_ADDR y, GM_ADDR z,
                                                      uint32_t n) {
    uint32_t share = n / GetBlockNum();
    uint32_t base = share * GetBlockIdx();
    GlobalTensor<float> xg, yg, zg;
    xg.SetGlobalBuffer((__gm__ float *)x + base, share);
    yg.SetGlobalBuffer((__gm__ float *)y + base, share);
    zg.SetGlobalBuffer((__gm__ float *)z + base, share);
    constexpr uint32_t bytes = TILE * sizeof(float);
    LocalTensor<float> xl(TPosition::VECCALC, 0, TILE);
    LocalTensor<float> yl(TPosition::VECCALC, bytes, TILE);
    LocalTensor<float> zl(TPosition::VECCALC, Std::max(2 * bytes, bytes), TILE);
    for (uint32_t i = 0; i < share / TILE; i++) {
        if (i != 0) {
            WaitFlag<HardEvent::V_MTE2>(EVENT_ID0);
            WaitFlag<HardEvent::MTE3_V>(EVENT_ID0);
        }
        DataCopy(xl, xg[i * TILE], TILE);
        DataCopy(yl, yg[i * TILE], TILE);
        SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
        Add(zl, xl, yl, TILE);
        SetFlag<HardEvent::V_MTE2>(EVENT_ID0);
        SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
        WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
        DataCopy(zg[i * TILE], zl, TILE);
        SetFlag<HardEvent::MTE3_V>(EVENT_ID0);
    }
    if (share >= TILE) {
        WaitFlag<HardEvent::V_MTE2>(EVENT_ID0);
        WaitFlag<HardEvent::MTE3_V>(EVENT_ID0);
    }
}

extern "C" __global__ __aicore__ void half_permute(GM_ADDR x, GM_ADDR idx, GM_ADDR z, uint32_t n) {
    GlobalTensor<half> xg, zg;
    GlobalTensor<int32_t> ig;
    xg.SetGlobalBuffer((__gm__ half *)x, n);
    ig.SetGlobalBuffer((__gm__ int32_t *)idx, n);
    zg.SetGlobalBuffer((__gm__ half *)z, n);
    LocalMemAllocator<> ub;
    uint32_t padded = (n + 15) / 16 * 16;
    LocalTensor<half> xl = ub.Alloc<half>(padded);
    LocalTensor<int32_t> il = ub.Alloc<int32_t>(padded);
    LocalTensor<half> zl = ub.Alloc<half>(padded);
    DataCopy(xl, xg, padded);
    DataCopy(il, ig, padded);
    for (uint32_t i = 0; i < n; i++) {
        zl.SetValue(il.GetValue(i) / sizeof(half), xl.GetValue(i));
    }
    SetFlag<HardEvent::S_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::S_MTE3>(EVENT_ID0);
    DataCopy(zg, zl, padded);
}

extern "C" __global__ __aicore__ void static_overflow(GM_ADDR x) {
    (void)x;
    LocalMemAllocator<Hardware::UB> ub;
    LocalTensor<float> a = ub.Alloc<float>(32 * 1024);
    LocalTensor<float> b = ub.Alloc<float>(32 * 1024);
    Duplicate(a, 1.0f, 8);
    Duplicate(b, 1.0f, 8);
}

/* z = int8(half(x) * 1.5 + 0.5) for n int8 values (n a multiple of 32): Cast int8 -> half, the
 * arithmetic in half, Cast back with CAST_RINT (saturating at -128 / 127). */
extern "C" __global__ __aicore__ void int8_scale(GM_ADDR x, GM_ADDR z, uint32_t n) {
    GlobalTensor<int8_t> xg, zg;
    xg.SetGlobalBuffer((__gm__ int8_t *)x, n);
    zg.SetGlobalBuffer((__gm__ int8_t *)z, n);
    LocalMemAllocator<> ub;
    LocalTensor<int8_t> xl = ub.Alloc<int8_t>(n);
    LocalTensor<half> h = ub.Alloc<half>(n);
    LocalTensor<int8_t> zl = ub.Alloc<int8_t>(n);
    DataCopy(xl, xg, n);
    SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
    Cast(h, xl, RoundMode::CAST_NONE, n);
    Muls(h, h, half(1.5f), n);
    Adds(h, h, half(0.5f), n);
    Cast(zl, h, RoundMode::CAST_RINT, n);
    SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
    DataCopy(zg, zl, n);
}
