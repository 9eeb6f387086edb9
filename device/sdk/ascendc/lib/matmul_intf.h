/*
 * lib/matmul_intf.h — Ascend C's high-level Matmul API on npusim: C = A x B (+ bias) for one
 * core's share of a problem, driven by a TCubeTiling (kernel_tiling/kernel_tiling.h, filled
 * on the host by tiling/tiling_api.h). Written over the cube path of kernel_operator.h, the
 * same steps a hand-written cube kernel takes (examples/ascendc/mmad_custom.cpp):
 *
 *   for each baseM x baseN block of C (M blocks first, iterateOrder 0):
 *     with a bias: GM -> C1 (DataCopy), C1 -> C2 (the bias table; half widens to float)
 *     for each baseK step of K:   GM -> A1 / B1 (DataCopy, Nd2NzParams: one MTE2 instruction
 *                                 each); A1 holds stepKa steps of A per load, and a load of
 *                                 all of K (stepKa >= K / baseK, depthA1 >= stepKa) stays for
 *                                 every block of C in the same rows (tiling_api.h picks it
 *                                 when it fits L1)
 *                                 A1 -> A2, B1 -> B2 (one MTE1 instruction each, the repeat
 *                                 register; B's fractals transposed)
 *                                 Mmad into CO1: the first step starts from the bias row (or
 *                                 0), later steps accumulate
 *     CO1 -> GM (Fixpipe, NZ -> ND, C's row stride N), or CO1 -> UB (C in VECIN / VECOUT /
 *     VECCALC: the block as baseM rows of baseN, for the vector code that follows)
 *
 * with B1 / A2 / B2 (and CO1 when two blocks fit L0C) double buffered and every hand-over a TQue on the TPipe handed to
 * REGIST_MATMUL_OBJ (so the pipes overlap as the queues allow). Tails on every side: the last
 * block along M, N and K is whatever is left (partial fractals are the cube path's). Numbers
 * are the cube's: half products exact in float, each element starting from its bias (or 0)
 * and adding its K products in K order, so the result is bit for bit a CPU loop in that order.
 *
 * C into UB: on the 910B the cube core's C reaches the vector cores through GM (the
 * workspace); npusim's AI core runs both parts as one program, so its fixpipe writes UB
 * directly (the L0C -> UB mover, docs/isa.md) and GetTensorC returns once the vector unit
 * may read the block. The asynchronous forms (Iterate<false>, GetTensorC<false>,
 * IterateAll<false> + WaitIterateAll) give the same blocks in the same order: each
 * GetTensorC<false> computes the next block, so SetWorkspace's space is accepted and unused.
 *
 * The Matmul of CANN's samples runs its cube part on the AIC and is called from the two AIV
 * cores of each AI core (a mix kernel, blockDim counting AI cores). npusim's AI core runs a
 * kernel's cube and vector parts as one program, so on the 910B (dav-c220) this header marks
 * the kernel object as mix 1:2 (the symbol npusim_kernel_mix_aiv) and its generated launcher
 * (scripts/npusim-ascendc.sh) runs 2 x blockDim blocks: GetBlockIdx() counts AIV blocks, as
 * on hardware, and the samples' `blockDim = (usedCoreNum + 1) / 2` covers every block.
 *
 * Not offered (compile errors naming them): A or B outside GM or not ND, a transposed A or B,
 * float or int8 inputs, a bias outside GM or of another type than float / half, C in CO1
 * (the user-managed L0C form of Iterate), enAtomic other than 1 (add, float C), batch matmul,
 * and MatmulConfig other
 * than the default.
 */
#ifndef NPUSIM_ASCENDC_MATMUL_INTF_H
#define NPUSIM_ASCENDC_MATMUL_INTF_H
#include "kernel_operator.h"
#include "../../../../acl/include/kernel_tiling/kernel_tiling.h"

#if defined(__CCE_AICORE__) && __CCE_AICORE__ == 220 && !defined(ASCENDC_CUBE_ONLY)
/* Read by the launcher generator: this kernel is a mix kernel with 2 AIV blocks per AI core. */
extern "C" __attribute__((used, weak)) const unsigned char npusim_kernel_mix_aiv = 2;
#endif

namespace matmul {
using namespace AscendC;

/* An operand's layout. */
enum class CubeFormat { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };
/* Batch layouts (only NONE is offered). */
enum class LayoutMode { NONE = 0, BSNGD, SBNGD, BNGS1S2, NORMAL };

/* What one operand of a Matmul is: where it lives, its layout, its element type. */
template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false,
          LayoutMode LAYOUT = LayoutMode::NONE, bool IBSHARE = false>
struct MatmulType {
    constexpr static TPosition pos = POSITION;
    constexpr static CubeFormat format = FORMAT;
    using T = TYPE;
    constexpr static bool isTrans = ISTRANS;
    constexpr static LayoutMode layout = LAYOUT;
    constexpr static bool ibShare = IBSHARE;
};

/* The schedule variants of CANN's Matmul (npusim runs one: the norm schedule). */
struct MatmulConfig {
    bool doNorm;
    bool doBasicBlock;
    bool doMultiDataLoad;
};
constexpr MatmulConfig CFG_NORM = {true, false, false};
constexpr MatmulConfig CFG_MDL = {false, false, true};

namespace detail {
template <typename T> struct IsHalf { static constexpr bool value = false; };
template <> struct IsHalf<half> { static constexpr bool value = true; };
template <typename T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };
template <typename T> struct Never { static constexpr bool value = false; };
template <typename T, typename U> struct Same { static constexpr bool value = false; };
template <typename T> struct Same<T, T> { static constexpr bool value = true; };
__aicore__ constexpr uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
__aicore__ constexpr uint32_t Min(uint32_t a, uint32_t b) { return a < b ? a : b; }
} // namespace detail

template <class A_TYPE, class B_TYPE, class C_TYPE,
          class BIAS_TYPE = MatmulType<TPosition::GM, CubeFormat::ND, float>,
          const MatmulConfig &MM_CFG = CFG_NORM>
class Matmul {
    using A_T = typename A_TYPE::T;
    using B_T = typename B_TYPE::T;
    using C_T = typename C_TYPE::T;
    static_assert(A_TYPE::pos == TPosition::GM && B_TYPE::pos == TPosition::GM,
                  "Matmul: A and B outside TPosition::GM are not offered by npusim's layer");
    static_assert(A_TYPE::format == CubeFormat::ND && B_TYPE::format == CubeFormat::ND &&
                      C_TYPE::format == CubeFormat::ND,
                  "Matmul: CubeFormat other than ND is not offered by npusim's layer");
    static_assert(!A_TYPE::isTrans && !B_TYPE::isTrans,
                  "Matmul: a transposed A or B (MatmulType ISTRANS) is not offered by npusim's layer");
    static_assert(A_TYPE::layout == LayoutMode::NONE && B_TYPE::layout == LayoutMode::NONE,
                  "Matmul: batch layouts (LayoutMode) are not offered by npusim's layer");
    static_assert(detail::IsHalf<A_T>::value && detail::IsHalf<B_T>::value,
                  "Matmul: A and B must be half (float, int8 and bfloat16_t inputs are not "
                  "offered by npusim's layer)");
    static_assert(detail::IsFloat<C_T>::value || detail::IsHalf<C_T>::value,
                  "Matmul: C must be float or half");
    static_assert(C_TYPE::pos == TPosition::GM || C_TYPE::pos == TPosition::VECIN ||
                      C_TYPE::pos == TPosition::VECOUT || C_TYPE::pos == TPosition::VECCALC,
                  "Matmul: C must be in GM or UB (C in TPosition::CO1 (the user-managed L0C "
                  "form) is not offered by npusim's layer)");
    static_assert(MM_CFG.doNorm, "Matmul: MatmulConfig other than CFG_NORM is not offered by "
                                 "npusim's layer");
    using BIAS_T = typename BIAS_TYPE::T;
    static_assert(BIAS_TYPE::pos == TPosition::GM,
                  "Matmul: a bias outside TPosition::GM is not offered by npusim's layer");
    static_assert(detail::IsFloat<BIAS_T>::value || detail::IsHalf<BIAS_T>::value,
                  "Matmul: the bias must be float or half");
    static constexpr bool C_IN_UB = C_TYPE::pos != TPosition::GM;

    static constexpr uint32_t BLOCK = 16;    // cube fractal rows and columns (half)
    static constexpr uint32_t FRACTAL = 256; // elements of one 512-byte half fractal

public:
    __aicore__ inline Matmul() {}
    /* Takes the tiling and carves the L1 / L0 queues from pipe (REGIST_MATMUL_OBJ calls it). */
    __aicore__ inline void Init(const TCubeTiling *tiling, TPipe *tpipe = nullptr) {
        t_ = *tiling;
        pipe_ = tpipe != nullptr ? tpipe : GetTPipePtr();
        orgM_ = t_.M;
        orgN_ = t_.N;
        orgKa_ = t_.Ka;
        SetSingleShape(t_.singleCoreM, t_.singleCoreN, t_.singleCoreK);
        if (t_.baseM <= 0 || t_.baseN <= 0 || t_.baseK <= 0 || t_.baseM % BLOCK ||
            t_.baseN % BLOCK || t_.baseK % BLOCK) {
            AscendC::detail::fail("Matmul: the tiling's baseM, baseN and baseK must be positive "
                                  "multiples of 16");
        }
        uint32_t bm = t_.baseM, bn = t_.baseN, bk = t_.baseK;
        // A1 holds stepKa base blocks of A along K per load (the whole of K at most), in
        // depthA1 / stepKa slots (one or two): a load that covers all of K stays for every
        // block of C in the same rows (walking N), loaded once.
        stepKa_ = t_.stepKa > 0 ? (uint32_t)t_.stepKa : 1;
        uint32_t kIterMax = detail::CeilDiv((uint32_t)t_.singleCoreK, bk);
        if (stepKa_ > kIterMax) {
            stepKa_ = kIterMax > 0 ? kIterMax : 1;
        }
        uint32_t a1Slots = t_.depthA1 >= (int32_t)(2 * stepKa_) ? 2 : 1;
        pipe_->InitBuffer(qA1_, a1Slots, bm * bk * stepKa_ * sizeof(A_T));
        pipe_->InitBuffer(qB1_, 2, bk * bn * sizeof(B_T));
        pipe_->InitBuffer(qA2_, 2, bm * bk * sizeof(A_T));
        pipe_->InitBuffer(qB2_, 2, bk * bn * sizeof(B_T));
        // C's block double buffered in L0C when two fit (the fixpipe of one block overlaps
        // the cube steps of the next).
        uint32_t c = bm * bn * (uint32_t)sizeof(float);
        pipe_->InitBuffer(qCO1_, t_.dbL0C >= 2 || 2 * c <= npu_l0c_bytes() ? 2 : 1, c);
        if (t_.isBias) {
            // C1 -> C2 moves 64-byte units of the source; half lands as float (twice the bytes).
            uint32_t c1 = (bn * (uint32_t)sizeof(BIAS_T) + 63) / 64 * 64;
            pipe_->InitBuffer(qC1_, 1, c1);
            pipe_->InitBuffer(qC2_, 1, c1 * (uint32_t)(sizeof(float) / sizeof(BIAS_T)));
        }
    }
    /* The whole matrices: A is orgM x orgKa, B orgKb x orgN, C orgM x orgN (row strides). */
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK); }
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0) {
        orgM_ = orgM;
        orgN_ = orgN;
        orgKa_ = orgKa;
        if (orgKb != orgKa) {
            AscendC::detail::fail("Matmul::SetOrgShape: Ka != Kb");
        }
        (void)orgKc;
    }
    /* This core's M, N, K (the tiling's singleCore sizes until changed). */
    __aicore__ inline void SetSingleShape(int singleM, int singleN, int singleK) {
        sM_ = singleM;
        sN_ = singleN;
        sK_ = singleK;
    }
    /* A tail core's M, N (and K): -1 keeps the current value. */
    __aicore__ inline void SetTail(int tailM = -1, int tailN = -1, int tailK = -1) {
        if (tailM > 0) sM_ = tailM;
        if (tailN > 0) sN_ = tailN;
        if (tailK > 0) sK_ = tailK;
    }
    __aicore__ inline void SetTensorA(const GlobalTensor<A_T> &gm, bool isTransposeA = false) {
        if (isTransposeA) {
            AscendC::detail::fail("Matmul::SetTensorA: a transposed A is not offered by npusim's layer");
        }
        ReleaseA();
        a_ = gm;
    }
    __aicore__ inline void SetTensorB(const GlobalTensor<B_T> &gm, bool isTransposeB = false) {
        if (isTransposeB) {
            AscendC::detail::fail("Matmul::SetTensorB: a transposed B is not offered by npusim's layer");
        }
        b_ = gm;
    }
    /* A bias row of N (this core's part from gm on), added to every row of C: each block of C
     * starts from its baseN values in the bias table. Needs a tiling with isBias (the host's
     * SetBias(true)). */
    __aicore__ inline void SetBias(const GlobalTensor<BIAS_T> &gm) {
        if (!t_.isBias) {
            AscendC::detail::fail("Matmul::SetBias: the tiling was made without a bias (call "
                                  "SetBias(true) on the host's MatmulApiTiling)");
        }
        bias_ = gm;
        hasBias_ = true;
    }
    template <typename U> __aicore__ inline void SetBias(const GlobalTensor<U> &) {
        static_assert(detail::Same<U, BIAS_T>::value,
                      "Matmul::SetBias: the bias tensor's type must be BIAS_TYPE's (the fourth "
                      "MatmulType)");
    }
    /* No bias from here on (until the next SetBias). */
    __aicore__ inline void DisableBias() { hasBias_ = false; }
    __aicore__ inline void ClearBias() { hasBias_ = false; }
    /* The system workspace npusim's Matmul does not need: accepted. */
    template <typename U> __aicore__ inline void SetWorkspace(const GlobalTensor<U> &) {}
    template <typename U> __aicore__ inline void SetWorkspace(__gm__ const U *, int) {}
    /* The 310P's UB scratch for format conversion: not needed, accepted. */
    __aicore__ inline void SetLocalWorkspace(const LocalTensor<uint8_t> &) {}

    /* Computes this core's whole C and writes it to gm (row stride orgN). sync = false returns
     * with the same result (WaitIterateAll then has nothing to wait for). */
    template <bool sync = true>
    __aicore__ inline void IterateAll(const GlobalTensor<C_T> &gm, uint8_t enAtomic = 0,
                                      bool enSequentialWrite = false, bool waitIterateAll = false,
                                      bool fakeMsg = false) {
        (void)enSequentialWrite;
        (void)waitIterateAll;
        (void)fakeMsg;
        while (Iterate()) {
            GetTensorC(gm, enAtomic);
        }
    }
    /* Computes this core's whole C into ub: singleCoreM rows of singleCoreN (ND; each row's
     * bytes a multiple of 32, as ND_ALIGN would pad them). */
    template <bool sync = true>
    __aicore__ inline void IterateAll(const LocalTensor<C_T> &ub, uint8_t enAtomic = 0) {
        static_assert(C_IN_UB, "Matmul::IterateAll to a LocalTensor: C's MatmulType must be in "
                               "UB (TPosition::VECIN, VECOUT or VECCALC)");
        if (enAtomic != 0) {
            AscendC::detail::fail("Matmul::IterateAll: enAtomic is not offered by npusim's layer");
        }
        if (sN_ * sizeof(C_T) % 32 != 0) {
            AscendC::detail::fail("Matmul::IterateAll to a LocalTensor: singleCoreN x the element "
                                  "size must be a multiple of 32 bytes (CubeFormat::ND_ALIGN is "
                                  "not offered by npusim's layer)");
        }
        if (ub.GetSize() < sM_ * sN_) {
            AscendC::detail::fail("Matmul::IterateAll: the LocalTensor holds fewer than "
                                  "singleCoreM x singleCoreN elements");
        }
        while (Iterate()) {
            ToUb(ub[mi_ * t_.baseM * sN_ + ni_ * t_.baseN], sN_);
        }
    }
    /* The asynchronous IterateAll has finished when it returned. */
    __aicore__ inline void WaitIterateAll() {}
    /* Computes C's next baseM x baseN block into L0C; false when every block is done.
     * Iterate<false> starts the asynchronous form: every later GetTensorC<false> gives the next
     * block (singleCoreM / baseM x singleCoreN / baseN of them, rounded up). */
    template <bool sync = true> __aicore__ inline bool Iterate(bool enPartialSum = false) {
        if (enPartialSum) {
            AscendC::detail::fail("Matmul::Iterate: enPartialSum is not offered by npusim's layer");
        }
        uint32_t blocks = detail::CeilDiv(sM_, t_.baseM) * detail::CeilDiv(sN_, t_.baseN);
        if constexpr (!sync) {
            next_ = 0;
            asyncLeft_ = sK_ > 0 ? blocks : 0;
            return asyncLeft_ > 0;
        }
        return Next(blocks);
    }
    /* Writes the block Iterate computed to gm, at its place in this core's C. */
    template <bool sync = true>
    __aicore__ inline void GetTensorC(const GlobalTensor<C_T> &gm, uint8_t enAtomic = 0,
                                      bool enSequentialWrite = false) {
        // enAtomic 1: C is added into GM (float C only); 2 (max) and 3 (min) are not offered.
        if (enAtomic > 1 || (enAtomic == 1 && sizeof(C_T) != 4)) {
            AscendC::detail::fail("Matmul::GetTensorC: enAtomic is offered as 1 (add) into a "
                                  "float C only");
        }
        Fetch<sync>();
        LocalTensor<float> c = qCO1_.template DeQue<float>();
        FixpipeParamsV220 p;
        p.nSize = n_;
        p.mSize = m_;
        p.srcStride = detail::CeilDiv(m_, BLOCK) * BLOCK;
        // enSequentialWrite: the blocks one after another, baseN apart; else at C's place.
        p.dstStride = enSequentialWrite ? t_.baseN : orgN_;
        p.ndNum = 1;
        p.srcNdStride = 0;
        p.dstNdStride = 0;
        if (sizeof(C_T) == 2) {
            p.quantPre = QuantMode_t::F322F16;
        }
        uint32_t off = enSequentialWrite ? 0 : mi_ * t_.baseM * orgN_ + ni_ * t_.baseN;
        auto *state = AscendC::detail::pipe_state();
        const uint32_t atomic = state->atomic;
        if (enAtomic == 1) {
            state->atomic = AscendC::detail::AtomicMode<float>::value;
        }
        Fixpipe(gm[off], c, p);
        state->atomic = atomic;
        qCO1_.FreeTensor(c);
    }
    /* Writes the block Iterate computed to ub as baseM rows of baseN elements (a tail block's
     * m x n in the top left); returns once the vector unit may read it. */
    template <bool sync = true>
    __aicore__ inline void GetTensorC(const LocalTensor<C_T> &ub, uint8_t enAtomic = 0,
                                      bool enSequentialWrite = false) {
        static_assert(C_IN_UB, "Matmul::GetTensorC to a LocalTensor: C's MatmulType must be in "
                               "UB (TPosition::VECIN, VECOUT or VECCALC)");
        if (enAtomic != 0) {
            AscendC::detail::fail("Matmul::GetTensorC: enAtomic is not offered by npusim's layer");
        }
        (void)enSequentialWrite;
        if (ub.GetSize() < (uint32_t)(t_.baseM * t_.baseN)) {
            AscendC::detail::fail("Matmul::GetTensorC: the LocalTensor holds fewer than baseM x "
                                  "baseN elements");
        }
        Fetch<sync>();
        ToUb(ub, t_.baseN);
    }
    /* Ends the matmul: drains the cube pipes. */
    __aicore__ inline void End() {
        ReleaseA();
        PipeBarrier<PIPE_ALL>();
    }

private:
    /* The next block of C into L0C (sync) or false when every block is done. */
    __aicore__ inline bool Next(uint32_t blocks) {
        if (next_ >= blocks || sK_ <= 0) {
            next_ = 0;
            ReleaseA();
            return false;
        }
        uint32_t mIter = detail::CeilDiv(sM_, t_.baseM), nIter = detail::CeilDiv(sN_, t_.baseN);
        // iterateOrder 0 walks M first, 1 walks N first.
        if (t_.iterateOrder == 1) {
            ni_ = next_ % nIter;
            mi_ = next_ / nIter;
        } else {
            mi_ = next_ % mIter;
            ni_ = next_ / mIter;
        }
        next_++;
        Compute();
        return true;
    }
    /* Gives back the A1 tensor kept across blocks (a new pass reads A from GM again). */
    __aicore__ inline void ReleaseA() {
        if (aHeld_) {
            qA1_.FreeTensor(a1_);
            aHeld_ = false;
        }
    }
    /* GetTensorC<false> computes the next block of an Iterate<false>. */
    template <bool sync> __aicore__ inline void Fetch() {
        if constexpr (!sync) {
            if (asyncLeft_ == 0) {
                AscendC::detail::fail("Matmul::GetTensorC<false>: no block left (call "
                                      "Iterate<false>() first; one GetTensorC per block)");
            }
            uint32_t blocks = detail::CeilDiv(sM_, t_.baseM) * detail::CeilDiv(sN_, t_.baseN);
            Next(blocks);
            if (--asyncLeft_ == 0) {
                next_ = 0;
                ReleaseA();
            }
        } else if (asyncLeft_ != 0) {
            AscendC::detail::fail("Matmul::GetTensorC: after Iterate<false>, fetch the blocks "
                                  "with GetTensorC<false>");
        }
    }
    /* CO1 -> UB: the m x n block at ub, rows `stride` elements apart; UB's earlier readers
     * and writers (V, MTE2) are done before it lands, and V waits for it. */
    __aicore__ inline void ToUb(const LocalTensor<C_T> &ub, uint32_t stride) {
        LocalTensor<float> c = qCO1_.template DeQue<float>();
        SetFlag<HardEvent::V_MTE3>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::V_MTE3>(NPUSIM_SYNC_EVENT);
        SetFlag<HardEvent::MTE2_MTE3>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::MTE2_MTE3>(NPUSIM_SYNC_EVENT);
        // L0C holds C as 16-column blocks of m1 x 16 rows (NZ): one copy per column block.
        const uint32_t m1 = detail::CeilDiv(m_, BLOCK);
        for (uint32_t j = 0; j * BLOCK < n_; j++) {
            uint32_t cols = detail::Min(BLOCK, n_ - j * BLOCK);
            const float *s = c.Ptr() + j * m1 * FRACTAL;
            C_T *d = ub.Ptr() + j * BLOCK;
            if constexpr (sizeof(C_T) == 2) {
                npusim_detail::move<7, 1>(d, s, m_, cols * 4, 64, stride * 2);
            } else {
                npusim_detail::move<7>(d, s, m_, cols * 4, 64, stride * 4);
            }
        }
        qCO1_.FreeTensor(c);
        SetFlag<HardEvent::MTE3_V>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::MTE3_V>(NPUSIM_SYNC_EVENT);
        SetFlag<HardEvent::MTE3_MTE2>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::MTE3_MTE2>(NPUSIM_SYNC_EVENT);
    }
    /* This block's baseN bias values: GM -> C1 -> C2 (the bias table). */
    __aicore__ inline void CopyBias() {
        LocalTensor<BIAS_T> c1 = qC1_.template AllocTensor<BIAS_T>();
        DataCopy(c1, bias_[ni_ * t_.baseN], n_);
        qC1_.EnQue(c1);
        c1 = qC1_.template DeQue<BIAS_T>();
        LocalTensor<float> c2 = qC2_.template AllocTensor<float>();
        uint16_t units = (uint16_t)detail::CeilDiv(n_ * (uint32_t)sizeof(BIAS_T), 64);
        DataCopy(c2, c1, DataCopyParams(1, units, 0, 0));
        qC2_.EnQue(c2);
        qC1_.FreeTensor(c1);
    }
    /* One block of C: every K step's loads and Mmad, accumulating in CO1. */
    __aicore__ inline void Compute() {
        m_ = detail::Min(t_.baseM, sM_ - mi_ * t_.baseM);
        n_ = detail::Min(t_.baseN, sN_ - ni_ * t_.baseN);
        uint32_t kIter = detail::CeilDiv(sK_, t_.baseK);
        LocalTensor<float> c = qCO1_.template AllocTensor<float>();
        if (hasBias_) {
            CopyBias();
        }
        // kc: the step's place in its A1 load (stepKa steps a load).
        for (uint32_t ki = 0, kc = 0; ki < kIter; ki++) {
            uint32_t k = detail::Min(t_.baseK, sK_ - ki * t_.baseK);
            if (kc == 0) {
                CopyA(ki);
            }
            CopyB(ki, k);
            bool lastOfLoad = kc + 1 == stepKa_ || ki + 1 == kIter;
            SplitA(kc, k, lastOfLoad && !(ki + 1 == kIter && stepKa_ >= kIter));
            kc = kc + 1 == stepKa_ ? 0 : kc + 1;
            SplitB(k);
            LocalTensor<A_T> a2 = qA2_.template DeQue<A_T>();
            LocalTensor<B_T> b2 = qB2_.template DeQue<B_T>();
            MmadParams p;
            p.m = m_;
            p.n = n_;
            p.k = k;
            p.cmatrixInitVal = ki == 0;
            if (ki == 0 && hasBias_) {
                // C starts from the bias row (cmatrixInitVal false, as Ascend C's flags say).
                LocalTensor<float> bt = qC2_.template DeQue<float>();
                p.cmatrixInitVal = false;
                Mmad(c, a2, b2, bt, p);
                qC2_.FreeTensor(bt);
            } else {
                Mmad(c, a2, b2, p);
            }
            qA2_.FreeTensor(a2);
            qB2_.FreeTensor(b2);
        }
        qCO1_.EnQue(c);
    }
    /* A's part from K step ki on in A1: stepKa steps' columns (kept when it already holds this
     * block's rows over all of K). */
    __aicore__ inline void CopyA(uint32_t ki) {
        uint32_t kc = detail::Min(stepKa_ * t_.baseK, sK_ - ki * t_.baseK);
        bool whole = kc == sK_;
        if (aHeld_) {
            if (whole && aRow_ == mi_ && aRows_ == m_ && aA_ == a_.GetPhyAddr()) {
                return;
            }
            qA1_.FreeTensor(a1_);
            aHeld_ = false;
        }
        LocalTensor<A_T> a1 = qA1_.template AllocTensor<A_T>();
        uint32_t m1 = detail::CeilDiv(m_, BLOCK);
        // A's rows [mi * baseM, +m), columns [ki * baseK, +kc): NZ, m1 * 16 rows a column block.
        DataCopy(a1, a_[mi_ * t_.baseM * orgKa_ + ki * t_.baseK],
                 Nd2NzParams(1, m_, kc, 0, orgKa_, m1 * BLOCK, 1, 0));
        qA1_.EnQue(a1);
        a1_ = qA1_.template DeQue<A_T>();
        aHeld_ = true;
        aRow_ = mi_;
        aRows_ = m_;
        aA_ = a_.GetPhyAddr();
    }
    __aicore__ inline void CopyB(uint32_t ki, uint32_t k) {
        LocalTensor<B_T> b1 = qB1_.template AllocTensor<B_T>();
        uint32_t k1 = detail::CeilDiv(k, BLOCK);
        // B's rows [ki * baseK, +k), columns [ni * baseN, +n).
        DataCopy(b1, b_[ki * t_.baseK * orgN_ + ni_ * t_.baseN],
                 Nd2NzParams(1, k, n_, 0, orgN_, k1 * BLOCK, 1, 0));
        qB1_.EnQue(b1);
    }
    /* A1 (NZ) -> A2 (zZ), one instruction: fractal row i of the step (the kc-th of its load)
     * is its k1 fractals m1 apart in A1, the rows one fractal apart. free: the step is the
     * load's last and the load is not kept (it is, over all of K, for the next block in the
     * same rows). */
    __aicore__ inline void SplitA(uint32_t kc, uint32_t k, bool free) {
        LocalTensor<A_T> a2 = qA2_.template AllocTensor<A_T>();
        uint32_t m1 = detail::CeilDiv(m_, BLOCK), k1 = detail::CeilDiv(k, BLOCK);
        const A_T *src = a1_.Ptr() + kc * (t_.baseK / BLOCK) * m1 * FRACTAL;
        npu_move_repeat(m1, 512, k1 * 512);
        npusim_detail::move<3>(a2.Ptr(), src, k1, 512, m1 * 512, 512);
        qA2_.EnQue(a2);
        if (free) {
            qA1_.FreeTensor(a1_);
            aHeld_ = false;
        }
    }
    /* B1 (NZ) -> B2 (zN), one instruction: fractal row kb is its n1 fractals k1 apart in B1,
     * transposed; the rows one fractal apart in B1 and n1 fractals apart in B2. */
    __aicore__ inline void SplitB(uint32_t k) {
        LocalTensor<B_T> b1 = qB1_.template DeQue<B_T>();
        LocalTensor<B_T> b2 = qB2_.template AllocTensor<B_T>();
        uint32_t n1 = detail::CeilDiv(n_, BLOCK), k1 = detail::CeilDiv(k, BLOCK);
        npu_move_repeat(k1, 512, n1 * 512);
        npusim_detail::move<4, 1>(b2.Ptr(), b1.Ptr(), n1, 512, k1 * 512, 512);
        qB2_.EnQue(b2);
        qB1_.FreeTensor(b1);
    }

    TCubeTiling t_;
    TPipe *pipe_ = nullptr;
    /* The A1 tensor the cube steps read (aHeld_): loaded for rows aRow_ (aRows_ of them) of
     * the A at aA_. */
    LocalTensor<A_T> a1_;
    bool aHeld_ = false;
    uint32_t aRow_ = 0, aRows_ = 0;
    __gm__ const A_T *aA_ = nullptr;
    uint32_t stepKa_ = 1;
    GlobalTensor<A_T> a_;
    GlobalTensor<B_T> b_;
    TQue<TPosition::A1, 2> qA1_;
    TQue<TPosition::B1, 2> qB1_;
    TQue<TPosition::A2, 2> qA2_;
    TQue<TPosition::B2, 2> qB2_;
    TQue<TPosition::CO1, 1> qCO1_;
    TQue<TPosition::C1, 1> qC1_;
    TQue<TPosition::C2, 1> qC2_;
    GlobalTensor<BIAS_T> bias_;
    bool hasBias_ = false;
    uint32_t asyncLeft_ = 0;
    uint32_t orgM_ = 0, orgN_ = 0, orgKa_ = 0;
    uint32_t sM_ = 0, sN_ = 0, sK_ = 0;
    uint32_t next_ = 0, mi_ = 0, ni_ = 0, m_ = 0, n_ = 0;
};
} // namespace matmul

namespace AscendC {
using matmul::CubeFormat;
using matmul::LayoutMode;
using matmul::Matmul;
using matmul::MatmulConfig;
using matmul::MatmulType;
using matmul::CFG_MDL;
using matmul::CFG_NORM;
/* The system workspace of the high-level APIs: npusim's Matmul needs none (its cube and vector
 * parts run as one program), so there is none to point at. */
__aicore__ inline GM_ADDR GetSysWorkSpacePtr() { return nullptr; }
__aicore__ inline void SetSysWorkspace(GM_ADDR) {}
} // namespace AscendC

/* Initialises each Matmul object with its tiling on the pipe (CANN's macro: the pipe, the
 * system workspace, then object, tiling pairs; a null tiling leaves the object for a later
 * Init). */
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...) ::matmul::detail::regist((tpipe), __VA_ARGS__)
namespace matmul {
namespace detail {
__aicore__ inline void regist(TPipe *) {}
template <class MM, class... Rest>
__aicore__ inline void regist(TPipe *pipe, MM &mm, const TCubeTiling *tiling, Rest &&...rest) {
    if (tiling != nullptr) {
        mm.Init(tiling, pipe);
    }
    regist(pipe, rest...);
}
} // namespace detail
} // namespace matmul
#endif
