/*
 * mmad_custom.cpp — C = A x B on the cube in Ascend C, the structure of the introductory cube
 * sample: GM -> A1 / B1 (DataCopy with Nd2NzParams, ND -> NZ), A1 -> A2 and B1 -> B2 (LoadData
 * with LoadData2DParams: NZ -> zZ for A, NZ -> zN with ifTranspose for B), Mmad into CO1, and
 * Fixpipe back to GM (NZ -> ND). Each stage hands its tensor to the next through a TQue, so the
 * pipes (MTE2, MTE1, M, the fixpipe) are ordered by the queues' flags.
 *
 * One class, KernelCube, with the shape fixed at compile time; K is walked in steps of K_STEP,
 * each step's Mmad accumulating on the previous ones in CO1 (cmatrixInitVal only on the first).
 * A and B are double buffered in A1 / B1 / A2 / B2.
 *
 * With BIAS the kernel also takes a bias row (n values of A's type): GM -> C1 (L1), C1 -> C2
 * (the bias table, as float: DataCopy with DataCopyParams), and the first step's Mmad starts
 * C from it (Mmad with the bias tensor, cmatrixInitVal = false): C = bias + A x B.
 *
 * Entry points ((GM_ADDR a, GM_ADDR b, GM_ADDR c), or (a, b, bias, c) with a bias; one block):
 *   mmad_custom        half 32 x 32 x 32 -> float, one step (the sample's shape)
 *   mmad_kloop         half m = 48, k = 64, n = 32 -> float, four K steps of 16
 *   mmad_ragged_half   half m = 20, k = 40, n = 24 -> half (Fixpipe F322F16): partial fractals
 *                      on every side, two K steps of 20
 *   mmad_f32_bt        float m = 32, k = 24, n = 16 -> float, B given transposed (n x k in GM),
 *                      three K steps of 8 (float fractals are 16 x 8)
 *   mmad_half_bt       half m = 16, k = 32, n = 48 -> float, B given transposed
 *   mmad_bias          half m = 48, k = 64, n = 32 + half bias -> float, two K steps of 32
 *   mmad_bias_f32_bt   float m = 16, k = 16, n = 32 + float bias, B transposed, K steps of 8
 * and three deliberate mistakes:
 *   mmad_unsynced       mmad_custom without EnQue / DeQue of A2 and B2: Mmad reads L0A / L0B
 *                       before LoadData landed (stale bytes, as on hardware)
 *   mmad_l0a_overflow   an A2 queue larger than L0A (InitBuffer aborts the block, code 136)
 *   mmad_wrong_position Mmad with A still in A1 (L1): the cube faults naming the operand
 */
#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t CUBE_BLOCK = 16;

__aicore__ constexpr uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

template <typename T, typename OutT, uint32_t M, uint32_t N, uint32_t K, uint32_t K_STEP,
          bool B_TRANSPOSED, bool BIAS = false, bool SYNC_L0 = true>
class KernelCube {
    static_assert(!BIAS || N * sizeof(T) % 64 == 0, "C1 -> C2 moves the bias in 64-byte units");
    static_assert(K % K_STEP == 0, "K_STEP must divide K");
    static_assert(B_TRANSPOSED || sizeof(T) == 2, "LoadData transposes 16-bit fractals only");
    // Elements along K in one fractal row (32 bytes), and in one 512-byte fractal.
    static constexpr uint32_t K0 = 32 / sizeof(T);
    static constexpr uint32_t FRACTAL = 512 / sizeof(T);
    static constexpr uint32_t M1 = CeilDiv(M, CUBE_BLOCK);
    static constexpr uint32_t N1 = CeilDiv(N, CUBE_BLOCK);
    // B in B1 (not transposed) is NZ in 16 x 16 fractals, so its rows (K) come in 16s.
    static constexpr uint32_t KB1 = B_TRANSPOSED ? CeilDiv(K_STEP, K0) : CeilDiv(K_STEP, 16);
    static constexpr uint32_t KA1 = CeilDiv(K_STEP, K0);

public:
    __aicore__ inline KernelCube() {}
    __aicore__ inline void Init(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c) {
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
        aGM.SetGlobalBuffer((__gm__ T *)a, M * K);
        bGM.SetGlobalBuffer((__gm__ T *)b, K * N);
        cGM.SetGlobalBuffer((__gm__ OutT *)c, M * N);
        pipe.InitBuffer(inQueueA1, 2, M1 * KA1 * 512);
        pipe.InitBuffer(inQueueB1, 2, KB1 * N1 * 512);
        pipe.InitBuffer(inQueueA2, 2, M1 * KA1 * 512);
        pipe.InitBuffer(inQueueB2, 2, KB1 * N1 * 512);
        pipe.InitBuffer(outQueueCO1, 1, M1 * N1 * CUBE_BLOCK * CUBE_BLOCK * sizeof(float));
        if (BIAS) {
            biasGM.SetGlobalBuffer((__gm__ T *)bias, N);
            pipe.InitBuffer(inQueueC1, 1, N * sizeof(T));
            pipe.InitBuffer(outQueueC2, 1, N * sizeof(float));
        }
    }
    __aicore__ inline void Process() {
        LocalTensor<float> c1Local = outQueueCO1.AllocTensor<float>();
        if (BIAS) {
            CopyBiasIn();
            SplitBias();
        }
        for (uint32_t step = 0; step < K / K_STEP; step++) {
            CopyIn(step);
            SplitA();
            SplitB();
            Compute(c1Local, step);
        }
        outQueueCO1.EnQue<float>(c1Local);
        CopyOut();
    }

private:
    __aicore__ inline void CopyBiasIn() {
        LocalTensor<T> bias1Local = inQueueC1.AllocTensor<T>();
        DataCopy(bias1Local, biasGM, N);
        inQueueC1.EnQue(bias1Local);
    }
    __aicore__ inline void SplitBias() {
        LocalTensor<T> bias1Local = inQueueC1.DeQue<T>();
        LocalTensor<float> bias2Local = outQueueC2.AllocTensor<float>();
        // C1 -> C2 in 64-byte units of the source; half widens to float on the way.
        DataCopy(bias2Local, bias1Local, {1, (uint16_t)(N * sizeof(T) / 64), 0, 0});
        outQueueC2.EnQue<float>(bias2Local);
        inQueueC1.FreeTensor(bias1Local);
    }
    __aicore__ inline void CopyIn(uint32_t step) {
        LocalTensor<T> a1Local = inQueueA1.AllocTensor<T>();
        LocalTensor<T> b1Local = inQueueB1.AllocTensor<T>();
        // A's columns [step * K_STEP, +K_STEP): M rows of K_STEP elements, K apart in GM.
        Nd2NzParams aParams;
        aParams.ndNum = 1;
        aParams.nValue = M;
        aParams.dValue = K_STEP;
        aParams.srcNdMatrixStride = 0;
        aParams.srcDValue = K;
        aParams.dstNzC0Stride = M1 * CUBE_BLOCK;
        aParams.dstNzNStride = 1;
        aParams.dstNzMatrixStride = 0;
        DataCopy(a1Local, aGM[step * K_STEP], aParams);
        if (B_TRANSPOSED) {
            // B^T (N x K in GM): N rows of K_STEP elements; its NZ is already L0B's order.
            DataCopy(b1Local, bGM[step * K_STEP],
                     Nd2NzParams(1, N, K_STEP, 0, K, N1 * CUBE_BLOCK, 1, 0));
        } else {
            // B's rows [step * K_STEP, +K_STEP): K_STEP rows of N elements.
            DataCopy(b1Local, bGM[step * K_STEP * N],
                     Nd2NzParams(1, K_STEP, N, 0, N, KB1 * CUBE_BLOCK, 1, 0));
        }
        inQueueA1.EnQue(a1Local);
        inQueueB1.EnQue(b1Local);
    }
    __aicore__ inline void SplitA() {
        LocalTensor<T> a1Local = inQueueA1.DeQue<T>();
        LocalTensor<T> a2Local = inQueueA2.AllocTensor<T>();
        // NZ -> zZ: fractal row i of A is fractals i, i + M1, i + 2 M1, ... of A1.
        LoadData2DParams params;
        params.repeatTimes = KA1;
        params.srcStride = M1;
        params.ifTranspose = false;
        for (uint32_t i = 0; i < M1; i++) {
            params.startIndex = i;
            LoadData(a2Local[i * KA1 * FRACTAL], a1Local, params);
        }
        a2Stale = a2Local;
        if (SYNC_L0) {
            inQueueA2.EnQue<T>(a2Local);
        }
        inQueueA1.FreeTensor(a1Local);
    }
    __aicore__ inline void SplitB() {
        LocalTensor<T> b1Local = inQueueB1.DeQue<T>();
        LocalTensor<T> b2Local = inQueueB2.AllocTensor<T>();
        if (B_TRANSPOSED) {
            LoadData(b2Local, b1Local, LoadData2DParams(0, KB1 * N1, 1, 0, 0, false, 0));
        } else {
            // NZ -> zN: fractal row kb of B is fractals kb, kb + KB1, ... of B1, transposed.
            LoadData2DParams params;
            params.repeatTimes = N1;
            params.srcStride = KB1;
            params.ifTranspose = true;
            for (uint32_t kb = 0; kb < KB1; kb++) {
                LoadData(b2Local[kb * N1 * FRACTAL], b1Local[kb * FRACTAL], params);
            }
        }
        inQueueB1.FreeTensor(b1Local);
        b2Stale = b2Local;
        if (SYNC_L0) {
            inQueueB2.EnQue<T>(b2Local);
        }
    }
    __aicore__ inline void Compute(const LocalTensor<float> &c1Local, uint32_t step) {
        LocalTensor<T> a2Local = SYNC_L0 ? inQueueA2.DeQue<T>() : a2Stale;
        LocalTensor<T> b2Local = SYNC_L0 ? inQueueB2.DeQue<T>() : b2Stale;
        MmadParams params;
        params.m = M;
        params.n = N;
        params.k = K_STEP;
        if (BIAS && step == 0) {
            LocalTensor<float> bias2Local = outQueueC2.DeQue<float>();
            params.cmatrixInitVal = false;
            Mmad(c1Local, a2Local, b2Local, bias2Local, params);
            outQueueC2.FreeTensor(bias2Local);
        } else {
            params.cmatrixInitVal = step == 0;
            Mmad(c1Local, a2Local, b2Local, params);
        }
        inQueueA2.FreeTensor(a2Local);
        inQueueB2.FreeTensor(b2Local);
    }
    __aicore__ inline void CopyOut() {
        LocalTensor<float> c1Local = outQueueCO1.DeQue<float>();
        FixpipeParamsV220 params;
        params.nSize = N;
        params.mSize = M;
        params.srcStride = M1 * CUBE_BLOCK;
        params.dstStride = N;
        params.ndNum = 1;
        params.srcNdStride = 0;
        params.dstNdStride = 0;
        if (sizeof(OutT) == 2) {
            params.quantPre = QuantMode_t::F322F16;
        }
        Fixpipe(cGM, c1Local, params);
        outQueueCO1.FreeTensor(c1Local);
    }

    TPipe pipe;
    TQue<TPosition::A1, 2> inQueueA1;
    TQue<TPosition::B1, 2> inQueueB1;
    TQue<TPosition::A2, 2> inQueueA2;
    TQue<TPosition::B2, 2> inQueueB2;
    TQue<TPosition::CO1, 1> outQueueCO1;
    TQue<TPosition::C1, 1> inQueueC1;
    TQue<TPosition::C2, 1> outQueueC2;
    GlobalTensor<T> aGM;
    GlobalTensor<T> bGM;
    GlobalTensor<T> biasGM;
    LocalTensor<T> a2Stale;
    LocalTensor<T> b2Stale;
    GlobalTensor<OutT> cGM;
};

#define NPUSIM_CUBE_KERNEL(name, T, OutT, M, N, K, K_STEP, B_TRANSPOSED)                       \
    extern "C" __global__ __aicore__ void name(GM_ADDR a, GM_ADDR b, GM_ADDR c) {              \
        KernelCube<T, OutT, M, N, K, K_STEP, B_TRANSPOSED> op;                                 \
        op.Init(a, b, nullptr, c);                                                             \
        op.Process();                                                                          \
    }
#define NPUSIM_CUBE_UNSYNCED_KERNEL(name, T, OutT, M, N, K, K_STEP, B_TRANSPOSED)              \
    extern "C" __global__ __aicore__ void name(GM_ADDR a, GM_ADDR b, GM_ADDR c) {              \
        KernelCube<T, OutT, M, N, K, K_STEP, B_TRANSPOSED, false, false> op;                   \
        op.Init(a, b, nullptr, c);                                                             \
        op.Process();                                                                          \
    }
#define NPUSIM_CUBE_BIAS_KERNEL(name, T, M, N, K, K_STEP, B_TRANSPOSED)                         \
    extern "C" __global__ __aicore__ void name(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c) { \
        KernelCube<T, float, M, N, K, K_STEP, B_TRANSPOSED, true> op;                          \
        op.Init(a, b, bias, c);                                                                \
        op.Process();                                                                          \
    }
NPUSIM_CUBE_KERNEL(mmad_custom, half, float, 32, 32, 32, 32, false)
NPUSIM_CUBE_KERNEL(mmad_kloop, half, float, 48, 32, 64, 16, false)
NPUSIM_CUBE_KERNEL(mmad_ragged_half, half, half, 20, 24, 40, 20, false)
NPUSIM_CUBE_KERNEL(mmad_f32_bt, float, float, 32, 16, 24, 8, true)
NPUSIM_CUBE_KERNEL(mmad_half_bt, half, float, 16, 48, 32, 32, true)
NPUSIM_CUBE_UNSYNCED_KERNEL(mmad_unsynced, half, float, 32, 32, 32, 32, false)
NPUSIM_CUBE_BIAS_KERNEL(mmad_bias, half, 48, 32, 64, 32, false)
NPUSIM_CUBE_BIAS_KERNEL(mmad_bias_f32_bt, float, 16, 32, 16, 8, true)

/* A 65 KiB A2 queue: L0A holds 64 KiB, so InitBuffer aborts the block with its message. */
extern "C" __global__ __aicore__ void mmad_l0a_overflow(GM_ADDR, GM_ADDR, GM_ADDR) {
    TPipe pipe;
    TQue<TPosition::A2, 1> inQueueA2;
    pipe.InitBuffer(inQueueA2, 1, 65 * 1024);
    LocalTensor<half> a2Local = inQueueA2.AllocTensor<half>();
    inQueueA2.FreeTensor(a2Local);
}

/* Mmad handed A1 (L1) where A2 (L0A) belongs: the cube instruction faults at issue. */
extern "C" __global__ __aicore__ void mmad_wrong_position(GM_ADDR a, GM_ADDR, GM_ADDR) {
    TPipe pipe;
    TQue<TPosition::A1, 1> inQueueA1;
    TQue<TPosition::B2, 1> inQueueB2;
    TQue<TPosition::CO1, 1> outQueueCO1;
    pipe.InitBuffer(inQueueA1, 1, 512);
    pipe.InitBuffer(inQueueB2, 1, 512);
    pipe.InitBuffer(outQueueCO1, 1, 1024);
    GlobalTensor<half> aGM;
    aGM.SetGlobalBuffer((__gm__ half *)a, 256);
    LocalTensor<half> a1Local = inQueueA1.AllocTensor<half>();
    DataCopy(a1Local, aGM, 256);
    inQueueA1.EnQue(a1Local);
    a1Local = inQueueA1.DeQue<half>();
    LocalTensor<half> b2Local = inQueueB2.AllocTensor<half>();
    LocalTensor<float> c1Local = outQueueCO1.AllocTensor<float>();
    MmadParams params(16, 16, 16, 0, false, true);
    Mmad(c1Local, a1Local, b2Local, params);
    outQueueCO1.EnQue<float>(c1Local);
    c1Local = outQueueCO1.DeQue<float>();
    outQueueCO1.FreeTensor(c1Local);
}
