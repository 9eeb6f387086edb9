/*
 * api_probe.cpp — exercises the parts of the layer the samples above do not: TBuf slices,
 * Duplicate, SetValue after vector work, Max, ReduceMax / ReduceMin, Compare + Select, a Cast
 * with CAST_FLOOR, GlobalTensor::SetValue, printf.
 *
 *   api_probe(GM_ADDR out)             writes 4 floats: max, min, selected, floored
 *   deque_without_enque(GM_ADDR out)   a deliberate mistake (the block faults)
 *   bitwise_probe(a16, b16, a32, b32, out16, out32)   And / Or / Not on uint16_t and int32_t
 *   dump_probe(GM_ADDR x)              DumpTensor / DumpAccChkPoint of GM, UB and L1 tensors
 */
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void api_probe(GM_ADDR out) {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 2048);
    LocalTensor<float> all = buf.Get<float>();
    LocalTensor<float> a = all, b = all[64], c = all[128], work = all[192], red = all[256];
    Duplicate(a, 2.5f, 64);
    Duplicate(b, -1.0f, 64);
    b.SetValue(3, 7.0f);
    Max(c, a, b, 64);
    ReduceMax(red, c, work, 64);
    float mx = red.GetValue(0);
    ReduceMin(red, b, work, 64);
    float mn = red.GetValue(0);

    // mask = a < b (only element 3), then pick b there and 0 elsewhere.
    LocalTensor<uint8_t> mask = all[264].ReinterpretCast<uint8_t>();
    Compare(mask, a, b, CMPMODE::LT, 64);
    LocalTensor<float> sel = all[272];
    Select(sel, mask, b, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, 64);
    ReduceSum(red, sel, work, 64);
    float picked = red.GetValue(0);

    LocalTensor<int32_t> ints = all[336].ReinterpretCast<int32_t>();
    Muls(work, a, -1.0f, 8);
    Cast(ints, work, RoundMode::CAST_FLOOR, 8);
    int32_t floored = ints.GetValue(0);

    printf("probe: block %ld of %ld, max %.2f, min %f, picked %f, floor %d, hex %x, %s\n",
           GetBlockIdx(), GetBlockNum(), mx, mn, picked, floored, 255u, "ok");
    GlobalTensor<float> o;
    o.SetGlobalBuffer((__gm__ float *)out, 4);
    o.SetValue(0, mx);
    o.SetValue(1, mn);
    o.SetValue(2, picked);
    o.SetValue(3, (float)floored);
}

// A deliberate mistake: DeQue from a queue nothing was enqueued to. On hardware the vector
// pipe would wait for ever; here the wait has no earlier set and the block faults.
extern "C" __global__ __aicore__ void deque_without_enque(GM_ADDR out) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 1, 256);
    LocalTensor<float> t = q.DeQue<float>();
    GlobalTensor<float> o;
    o.SetGlobalBuffer((__gm__ float *)out, 64);
    DataCopy(o, t, 64);
}

// And / Or / Not on 128 uint16_t and 64 int32_t: out16 = [a & b, a | b, ~a], out32 likewise.
extern "C" __global__ __aicore__ void bitwise_probe(GM_ADDR a16, GM_ADDR b16, GM_ADDR a32,
                                                    GM_ADDR b32, GM_ADDR out16, GM_ADDR out32) {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 5 * 256 + 5 * 256);
    LocalTensor<uint16_t> u = buf.Get<uint16_t>();
    LocalTensor<int32_t> w = u[5 * 128].ReinterpretCast<int32_t>();
    GlobalTensor<uint16_t> ga16, gb16, go16;
    GlobalTensor<int32_t> ga32, gb32, go32;
    ga16.SetGlobalBuffer((__gm__ uint16_t *)a16, 128);
    gb16.SetGlobalBuffer((__gm__ uint16_t *)b16, 128);
    go16.SetGlobalBuffer((__gm__ uint16_t *)out16, 3 * 128);
    ga32.SetGlobalBuffer((__gm__ int32_t *)a32, 64);
    gb32.SetGlobalBuffer((__gm__ int32_t *)b32, 64);
    go32.SetGlobalBuffer((__gm__ int32_t *)out32, 3 * 64);
    DataCopy(u, ga16, 128);
    DataCopy(u[128], gb16, 128);
    DataCopy(w, ga32, 64);
    DataCopy(w[64], gb32, 64);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    And(u[256], u, u[128], 128);
    Or(u[384], u, u[128], 128);
    Not(u[512], u, 128);
    And(w[128], w, w[64], 64);
    Or(w[192], w, w[64], 64);
    Not(w[256], w, 64);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(go16, u[256], 3 * 128);
    DataCopy(go32, w[128], 3 * 64);
}

/* DumpTensor of a GM tensor (no shape), of a UB tensor as a 3 x 4 shape, DumpAccChkPoint from
 * an offset, and of an L1 tensor (named, not read). `x` holds 12 floats. */
extern "C" __global__ __aicore__ void dump_probe(GM_ADDR x) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> ub;
    TBuf<TPosition::A1> l1;
    pipe.InitBuffer(ub, 64);
    pipe.InitBuffer(l1, 64);
    GlobalTensor<float> xg;
    xg.SetGlobalBuffer((__gm__ float *)x, 12);
    DumpTensor(xg, 0, 12);
    LocalTensor<half> h = ub.Get<half>();
    Duplicate(h, half(1.5f), 16);
    h.SetValue(5, half(-2.25f));
    uint32_t shape[] = {3, 4};
    DumpTensor(h, 1, 12, ShapeInfo(2, shape));
    DumpAccChkPoint(h, 2, 4, 3);
    LocalTensor<int32_t> a1 = l1.Get<int32_t>();
    DumpTensor(a1, 3, 8);
}

/* y = 2 x (256 floats) through UB, then out[k] = y[idx[k]] for k < m, read element by element
 * with GlobalTensor::GetValue right after the copy out (GetValue waits for MTE3) and written
 * with SetValue. gm_index_read_unsynced reads and writes with operator() instead: no wait, so
 * it sees what y held before the copy landed (a deliberate mistake). */
template <bool synced>
__aicore__ inline void gm_index(GM_ADDR x, GM_ADDR y, GM_ADDR idx, GM_ADDR out, uint32_t m) {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 256 * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    GlobalTensor<float> gx, gy, go;
    GlobalTensor<uint32_t> gi;
    gx.SetGlobalBuffer((__gm__ float *)x, 256);
    gy.SetGlobalBuffer((__gm__ float *)y, 256);
    gi.SetGlobalBuffer((__gm__ uint32_t *)idx, m);
    go.SetGlobalBuffer((__gm__ float *)out, m);
    DataCopy(t, gx, 256);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    Muls(t, t, 2.0f, 256);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(gy, t, 256);
    for (uint32_t k = 0; k < m; k++) {
        if (synced) {
            go.SetValue(k, gy.GetValue(gi.GetValue(k)));
        } else {
            go(k) = gy(gi(k));
        }
    }
}
extern "C" __global__ __aicore__ void gm_index_read(GM_ADDR x, GM_ADDR y, GM_ADDR idx,
                                                    GM_ADDR out, uint32_t m) {
    gm_index<true>(x, y, idx, out, m);
}
extern "C" __global__ __aicore__ void gm_index_read_unsynced(GM_ADDR x, GM_ADDR y, GM_ADDR idx,
                                                             GM_ADDR out, uint32_t m) {
    gm_index<false>(x, y, idx, out, m);
}
