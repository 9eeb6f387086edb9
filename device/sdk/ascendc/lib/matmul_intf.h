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
 * with B1 / A2 / B2 (and CO1 when two blocks fit L0C) double buffered: fixed ping-pong slots
 * carved from the TPipe handed to REGIST_MATMUL_OBJ, taken in turn, with one flag each way per
 * pair of pipes (MTE2 -> MTE1, MTE1 -> M, M -> FIX and back), as CANN's own matmul does, so
 * the pipes overlap and a K step costs the scalar unit a few dozen instructions. Tails on
 * every side: the last block along M, N and K is whatever is left (partial fractals are the
 * cube path's). Numbers are the cube's: half products exact in float, each element starting
 * from its bias (or 0) and adding its K products in K order, so the result is bit for bit a
 * CPU loop in that order.
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
        // The tiling is read where it is (as CANN's Matmul, which keeps the pointer): it must
        // stay alive while the object is used (GET_TILING_DATA's struct in the kernel does).
        t_ = tiling;
        pipe_ = tpipe != nullptr ? tpipe : GetTPipePtr();
        orgM_ = t_->M;
        orgN_ = t_->N;
        orgKa_ = t_->Ka;
        SetSingleShape(t_->singleCoreM, t_->singleCoreN, t_->singleCoreK);
        if (t_->baseM <= 0 || t_->baseN <= 0 || t_->baseK <= 0 || t_->baseM % BLOCK ||
            t_->baseN % BLOCK || t_->baseK % BLOCK) {
            AscendC::detail::fail("Matmul: the tiling's baseM, baseN and baseK must be positive "
                                  "multiples of 16");
        }
        uint32_t bm = t_->baseM, bn = t_->baseN, bk = t_->baseK;
        // A1 holds stepKa base blocks of A along K per load (the whole of K at most), in
        // depthA1 / stepKa slots (one or two), and at least two K steps (the ring the steps
        // stream through when a block's rows over all of K do not fit): a panel that covers
        // all of K stays for every block of C in the same rows (walking N), loaded once.
        stepKa_ = t_->stepKa > 0 ? (uint32_t)t_->stepKa : 1;
        uint32_t kIterMax = detail::CeilDiv((uint32_t)t_->singleCoreK, bk);
        if (stepKa_ > kIterMax) {
            stepKa_ = kIterMax > 0 ? kIterMax : 1;
        }
        uint32_t a1Steps = (t_->depthA1 >= (int32_t)(2 * stepKa_) ? 2 : 1) * stepKa_;
        a1Bytes_ = (a1Steps > 2 ? a1Steps : 2) * bm * bk * (uint32_t)sizeof(A_T);
        TBuf<TPosition::A1> bA1;
        TBuf<TPosition::B1> bB1;
        TBuf<TPosition::A2> bA2;
        TBuf<TPosition::B2> bB2;
        TBuf<TPosition::CO1> bCO1;
        pipe_->InitBuffer(bA1, a1Bytes_);
        pipe_->InitBuffer(bB1, 2 * bk * bn * (uint32_t)sizeof(B_T));
        pipe_->InitBuffer(bA2, 2 * bm * bk * (uint32_t)sizeof(A_T));
        pipe_->InitBuffer(bB2, 2 * bk * bn * (uint32_t)sizeof(B_T));
        // C's block double buffered in L0C when two fit (the fixpipe of one block overlaps
        // the cube steps of the next).
        uint32_t c = bm * bn * (uint32_t)sizeof(float);
        co1Slots_ = t_->dbL0C >= 2 || 2 * c <= npu_l0c_bytes() ? 2 : 1;
        pipe_->InitBuffer(bCO1, co1Slots_ * c);
        a1_ = (uint8_t *)bA1.template Get<uint8_t>().Ptr();
        b1_ = (uint8_t *)bB1.template Get<uint8_t>().Ptr();
        a2_ = (uint8_t *)bA2.template Get<uint8_t>().Ptr();
        b2_ = (uint8_t *)bB2.template Get<uint8_t>().Ptr();
        co1_ = (uint8_t *)bCO1.template Get<uint8_t>().Ptr();
        b1Slot_ = bk * bn * (uint32_t)sizeof(B_T);
        a2Slot_ = bm * bk * (uint32_t)sizeof(A_T);
        b2Slot_ = b1Slot_;
        co1Slot_ = co1Slots_ == 2 ? c : 0;
        // The hand-overs, one flag each way per pair of pipes (the slots are taken in turn):
        // L1 (MTE2 -> MTE1), L0A / L0B (MTE1 -> M), L0C (M -> FIX).
        evL1Full_ = flagWord(NPU_PIPE_MTE2, NPU_PIPE_MTE1, pipe_->TakeEvent(NPU_PIPE_MTE2, NPU_PIPE_MTE1));
        evA1Full_ = flagWord(NPU_PIPE_MTE2, NPU_PIPE_MTE1, pipe_->TakeEvent(NPU_PIPE_MTE2, NPU_PIPE_MTE1));
        evL1Free_ = flagWord(NPU_PIPE_MTE1, NPU_PIPE_MTE2, pipe_->TakeEvent(NPU_PIPE_MTE1, NPU_PIPE_MTE2));
        evL0Full_ = flagWord(NPU_PIPE_MTE1, NPU_PIPE_M, pipe_->TakeEvent(NPU_PIPE_MTE1, NPU_PIPE_M));
        evL0Free_ = flagWord(NPU_PIPE_M, NPU_PIPE_MTE1, pipe_->TakeEvent(NPU_PIPE_M, NPU_PIPE_MTE1));
        evCFull_ = flagWord(NPU_PIPE_M, NPU_PIPE_MTE3, pipe_->TakeEvent(NPU_PIPE_M, NPU_PIPE_MTE3));
        evCFree_ = flagWord(NPU_PIPE_MTE3, NPU_PIPE_M, pipe_->TakeEvent(NPU_PIPE_MTE3, NPU_PIPE_M));
        if (t_->isBias) {
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
        if (!t_->isBias) {
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
            ToUb(ub[mi_ * t_->baseM * sN_ + ni_ * t_->baseN], sN_);
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
        if constexpr (!sync) {
            next_ = 0;
            Plan();
            asyncLeft_ = sK_ > 0 ? blocks_ : 0;
            return asyncLeft_ > 0;
        }
        if (next_ == 0) {
            Plan();
        }
        return Next();
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
        // SetAtomicAdd<float> in force or enAtomic 1: C is added into GM (the fixpipe's add).
        const uint32_t atomic = AscendC::detail::pipe_state()->atomic;
        const bool add = enAtomic == 1 || atomic != 0;
        if (add && (sizeof(C_T) != 4 || (atomic != 0 &&
                                          atomic != AscendC::detail::AtomicMode<float>::value))) {
            AscendC::detail::fail("Fixpipe: the atomic add on L0C -> GM is offered for float "
                                  "output under SetAtomicAdd<float>() only");
        }
        // enSequentialWrite: the blocks one after another, baseN apart; else at C's place.
        const uint32_t stride = enSequentialWrite ? t_->baseN : orgN_;
        const uint32_t off = enSequentialWrite ? 0 : mi_ * t_->baseM * orgN_ + ni_ * t_->baseN;
        flagWait(evCFull_);
        ToGm((uint8_t *)gm[off].GetPhyAddr(), stride, add);
        flagSet(evCFree_);
        cFreeSets_++;
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
        if (ub.GetSize() < (uint32_t)(t_->baseM * t_->baseN)) {
            AscendC::detail::fail("Matmul::GetTensorC: the LocalTensor holds fewer than baseM x "
                                  "baseN elements");
        }
        Fetch<sync>();
        ToUb(ub, t_->baseN);
    }
    /* Ends the matmul: drains the cube pipes. */
    __aicore__ inline void End() {
        ReleaseA();
        Drain();
        PipeBarrier<PIPE_ALL>();
    }

private:
    /* A pass over this core's C starts: its blocks along M and N, its K steps and the last
     * one's size (the single shape is fixed for the pass). */
    __aicore__ inline void Plan() {
        mIter_ = detail::CeilDiv(sM_, t_->baseM);
        nIter_ = detail::CeilDiv(sN_, t_->baseN);
        blocks_ = mIter_ * nIter_;
        kIter_ = detail::CeilDiv(sK_, t_->baseK);
        kLast_ = sK_ - (kIter_ - 1) * t_->baseK;
    }
    /* The next block of C into L0C (sync) or false when every block is done. */
    __aicore__ inline bool Next() {
        if (next_ >= blocks_ || sK_ <= 0) {
            next_ = 0;
            ReleaseA();
            return false;
        }
        // iterateOrder 0 walks M first, 1 walks N first.
        if (next_ == 0) {
            mi_ = 0;
            ni_ = 0;
        } else if (t_->iterateOrder == 1) {
            if (++ni_ == nIter_) {
                ni_ = 0;
                mi_++;
            }
        } else if (++mi_ == mIter_) {
            mi_ = 0;
            ni_++;
        }
        next_++;
        Compute();
        return true;
    }
    /* Forgets the A panels kept across blocks (a new pass reads A from GM again). */
    __aicore__ inline void ReleaseA() {
        panelA_[0] = nullptr;
        panelA_[1] = nullptr;
    }
    /* The flag words of the hand-overs, and the set / wait of one (the layer's flags order
     * pipes only, never the scalar unit's memory accesses: no "memory" clobber, so the loop's
     * state stays in registers). */
    __aicore__ static inline uint64_t flagWord(int src, int dst, int32_t ev) {
        return (uint64_t)src | (uint64_t)dst << 8 | (uint64_t)ev << 16;
    }
    __aicore__ static inline void flagSet(uint64_t w) {
        __asm__ volatile(".insn r 0x7b, 0, 0, x0, %0, x0" : : "r"(w));
    }
    __aicore__ static inline void flagWait(uint64_t w) {
        __asm__ volatile(".insn r 0x7b, 1, 0, x0, %0, x0" : : "r"(w));
    }
    /* Before the first block: every slot of the rings starts free (two L1 / L0 slots, the
     * L0C slots). */
    __aicore__ inline void Prime() {
        if (primed_) {
            return;
        }
        primed_ = true;
        flagSet(evL1Free_);
        flagSet(evL1Free_);
        flagSet(evL0Free_);
        flagSet(evL0Free_);
        for (uint32_t i = 0; i < co1Slots_; i++) {
            flagSet(evCFree_);
        }
        cFreeSets_ = co1Slots_;
    }
    /* Consumes the free sets still pending (End): the flags are as the object found them. */
    __aicore__ inline void Drain() {
        if (!primed_) {
            return;
        }
        primed_ = false;
        flagWait(evL1Free_);
        flagWait(evL1Free_);
        flagWait(evL0Free_);
        flagWait(evL0Free_);
        for (; cFreeSets_ > 0; cFreeSets_--) {
            flagWait(evCFree_);
        }
    }
    /* GetTensorC<false> computes the next block of an Iterate<false>. */
    template <bool sync> __aicore__ inline void Fetch() {
        if constexpr (!sync) {
            if (asyncLeft_ == 0) {
                AscendC::detail::fail("Matmul::GetTensorC<false>: no block left (call "
                                      "Iterate<false>() first; one GetTensorC per block)");
            }
            Next();
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
        flagWait(evCFull_);
        SetFlag<HardEvent::V_MTE3>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::V_MTE3>(NPUSIM_SYNC_EVENT);
        SetFlag<HardEvent::MTE2_MTE3>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::MTE2_MTE3>(NPUSIM_SYNC_EVENT);
        // L0C holds C as 16-column blocks of m1 x 16 rows (NZ): one copy per column block.
        const uint32_t m1 = detail::CeilDiv(m_, BLOCK);
        for (uint32_t j = 0; j * BLOCK < n_; j++) {
            uint32_t cols = detail::Min(BLOCK, n_ - j * BLOCK);
            const float *s = (const float *)cOut_ + j * m1 * FRACTAL;
            C_T *d = ub.Ptr() + j * BLOCK;
            if constexpr (sizeof(C_T) == 2) {
                npusim_detail::move<7, 1>(d, s, m_, cols * 4, 64, stride * 2);
            } else {
                npusim_detail::move<7>(d, s, m_, cols * 4, 64, stride * 4);
            }
        }
        flagSet(evCFree_);
        cFreeSets_++;
        SetFlag<HardEvent::MTE3_V>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::MTE3_V>(NPUSIM_SYNC_EVENT);
        SetFlag<HardEvent::MTE3_MTE2>(NPUSIM_SYNC_EVENT);
        WaitFlag<HardEvent::MTE3_MTE2>(NPUSIM_SYNC_EVENT);
    }
    /* CO1 -> GM through the fixpipe (NZ -> ND): the block's whole 16-column blocks as one
     * copy (the mover's repeat register: one per column block, m1 fractals apart in L0C, 16
     * elements apart in GM), then a partial last column block. Half C is rounded on the way;
     * add: C is added into GM. */
    __aicore__ inline void ToGm(uint8_t *d, uint32_t stride, bool add) {
        const uint32_t m = m_, n = n_, m1 = detail::CeilDiv(m, BLOCK);
        const uint32_t full = n / BLOCK, cols = n % BLOCK;
        const uint32_t e = (uint32_t)sizeof(C_T), ds = stride * e, rep = m1 * BLOCK * 64;
        const uint8_t *s = cOut_;
        for (uint32_t part = 0; part < 2; part++) {
            uint32_t rowBytes = 64;
            if (part == 0) {
                if (full == 0) {
                    continue;
                }
                npu_move_repeat(full, rep, BLOCK * e);
            } else {
                if (cols == 0) {
                    break;
                }
                d += full * BLOCK * e;
                s += full * rep;
                rowBytes = cols * 4;
            }
            if constexpr (sizeof(C_T) == 2) {
                npusim_detail::move<5, 1>(d, s, m, rowBytes, 64, ds);
            } else if (add) {
                npusim_detail::move<5, 2>(d, s, m, rowBytes, 64, ds);
            } else {
                npusim_detail::move<5>(d, s, m, rowBytes, 64, ds);
            }
        }
    }
    /* This block's baseN bias values: GM -> C1 -> C2 (the bias table). */
    __aicore__ inline void CopyBias() {
        LocalTensor<BIAS_T> c1 = qC1_.template AllocTensor<BIAS_T>();
        DataCopy(c1, bias_[ni_ * t_->baseN], n_);
        qC1_.EnQue(c1);
        c1 = qC1_.template DeQue<BIAS_T>();
        LocalTensor<float> c2 = qC2_.template AllocTensor<float>();
        uint16_t units = (uint16_t)detail::CeilDiv(n_ * (uint32_t)sizeof(BIAS_T), 64);
        DataCopy(c2, c1, DataCopyParams(1, units, 0, 0));
        qC2_.EnQue(c2);
        qC1_.FreeTensor(c1);
    }

    /* The state of one block's K loop, in registers: where the step's operands come from and
     * go, and how each moves on to the next step. */
    struct Loop {
        const uint8_t *aGm, *bGm;    // this step's A (rows of the block, columns of the step) and B
        uint64_t aGmStep, bGmStep;   // bytes to the next step's
        uint8_t *a1;                 // the step's A in A1 (NZ): loaded there when loadA
        uint64_t a1Step, a1Xor;      // the next step's: a1 + a1Step (a panel), ^ a1Xor (the ring)
        uint8_t *b1, *a2, *b2;       // the step's slots of B1, A2, B2 (two each, in turn)
        uint64_t b1Xor, a2Xor, b2Xor;
        uint8_t *c;
        uint32_t m, n, m1, n1;
        uint32_t aRow, bRow;         // GM row strides, bytes
        bool loadA;
    };
    /* One K step of k (a multiple of 16 but for the last step of a ragged K): GM -> A1 (when
     * A is not already there) and GM -> B1 (ND -> NZ, the column blocks as one copy each);
     * A1 -> A2 (zZ) and B1 -> B2 (zN, fractals transposed), one copy each; the Mmad. MODE 0
     * starts C from 0, 1 from the bias row, 2 accumulates. */
    template <int MODE> __aicore__ inline __attribute__((always_inline)) void Step(Loop &l, uint32_t k) {
        const uint32_t k1 = detail::CeilDiv(k, BLOCK);
        const uint32_t kf = k / BLOCK, kt = k % BLOCK;
        const uint32_t nf = l.n / BLOCK, nt = l.n % BLOCK;
        flagWait(evL1Free_);
        if (l.loadA) {
            // A's m rows x k columns: column block j (32 bytes of each row) at j * m1 fractals.
            if (kf != 0) {
                npu_move_repeat(kf, 32, l.m1 * 512);
                npusim_detail::move<1>(l.a1, l.aGm, l.m, 32, l.aRow, 32);
            }
            if (kt != 0) {
                npusim_detail::move<1>(l.a1 + kf * l.m1 * 512, l.aGm + kf * 32, l.m, kt * 2,
                                       l.aRow, 32);
            }
            // A's own hand-over: its A1 -> A2 copy need not wait for B to land.
            flagSet(evA1Full_);
        }
        // B's k rows x n columns: column block j at j * k1 fractals.
        if (nf != 0) {
            npu_move_repeat(nf, 32, k1 * 512);
            npusim_detail::move<1>(l.b1, l.bGm, k, 32, l.bRow, 32);
        }
        if (nt != 0) {
            npusim_detail::move<1>(l.b1 + nf * k1 * 512, l.bGm + nf * 32, k, nt * 2, l.bRow, 32);
        }
        flagSet(evL1Full_);
        flagWait(evL0Free_);
        if (l.loadA) {
            flagWait(evA1Full_);
        }
        // A1 -> A2: fractal row i is its k1 fractals m1 apart in A1, the rows one apart.
        npu_move_repeat(l.m1, 512, k1 * 512);
        npusim_detail::move<3>(l.a2, l.a1, k1, 512, l.m1 * 512, 512);
        flagWait(evL1Full_);
        // B1 -> B2: fractal row kb is its n1 fractals k1 apart in B1, transposed; the rows
        // one fractal apart in B1 and n1 fractals apart in B2.
        npu_move_repeat(k1, 512, l.n1 * 512);
        npusim_detail::move<4, 1>(l.b2, l.b1, l.n1, 512, k1 * 512, 512);
        flagSet(evL1Free_);
        flagSet(evL0Full_);
        flagWait(evL0Full_);
        const uint64_t mnk = (uint64_t)l.m | ((uint64_t)l.n << 16) | ((uint64_t)k << 32);
        if constexpr (MODE == 0) {
            npusim_detail::mmad<4>(l.c, l.a2, l.b2, mnk);
        } else if constexpr (MODE == 1) {
            // C starts from the bias row (cmatrixInitVal false, as Ascend C's flags say).
            LocalTensor<float> bt = qC2_.template DeQue<float>();
            const uint64_t b = (uint64_t)bt.Ptr();
            npusim_detail::mmad_bias<4>(l.c, l.a2, l.b2, mnk | ((b - NPU_BT_BASE) / 32) << 48);
            qC2_.FreeTensor(bt);
        } else {
            npusim_detail::mmad<5>(l.c, l.a2, l.b2, mnk);
        }
        flagSet(evL0Free_);
        l.aGm += l.aGmStep;
        l.bGm += l.bGmStep;
        l.a1 = (uint8_t *)(((uint64_t)l.a1 + l.a1Step) ^ l.a1Xor);
        l.b1 = (uint8_t *)((uint64_t)l.b1 ^ l.b1Xor);
        l.a2 = (uint8_t *)((uint64_t)l.a2 ^ l.a2Xor);
        l.b2 = (uint8_t *)((uint64_t)l.b2 ^ l.b2Xor);
    }
    /* One block of C: every K step's loads and Mmad, accumulating in CO1. */
    __aicore__ inline void Compute() {
        const uint32_t bm = t_->baseM, bn = t_->baseN, bk = t_->baseK;
        m_ = detail::Min(bm, sM_ - mi_ * bm);
        n_ = detail::Min(bn, sN_ - ni_ * bn);
        const uint32_t kIter = kIter_, kLast = kLast_;
        Prime();
        Loop l;
        l.m = m_;
        l.n = n_;
        l.m1 = detail::CeilDiv(m_, BLOCK);
        l.n1 = detail::CeilDiv(n_, BLOCK);
        l.aRow = orgKa_ * (uint32_t)sizeof(A_T);
        l.bRow = orgN_ * (uint32_t)sizeof(B_T);
        l.aGm = (const uint8_t *)a_.GetPhyAddr() + (uint64_t)mi_ * bm * l.aRow;
        l.bGm = (const uint8_t *)b_.GetPhyAddr() + (uint64_t)ni_ * bn * sizeof(B_T);
        l.aGmStep = bk * (uint32_t)sizeof(A_T);
        l.bGmStep = (uint64_t)bk * l.bRow;
        // A: a panel of the block's rows over all of K when it fits A1 (one of two when two
        // do), kept for the next blocks in the same rows; else a ring of two K steps.
        const uint32_t stepBytes = (bk / BLOCK) * l.m1 * 512;
        const uint32_t panelBytes = kIter * bm * bk * (uint32_t)sizeof(A_T);
        const uint32_t slot = bm * bk * (uint32_t)sizeof(A_T);
        const uint32_t par = par_;
        if (stepKa_ >= kIter && panelBytes <= a1Bytes_) {
            const uint32_t panels = panelBytes * 2 <= a1Bytes_ ? 2 : 1;
            const uint32_t p = panels == 2 ? mi_ & 1 : 0;
            const A_T *gm = a_.GetPhyAddr() + mi_ * bm * orgKa_;
            l.a1 = a1_ + p * panelBytes;
            l.a1Step = stepBytes;
            l.a1Xor = 0;
            l.loadA = !(panelA_[p] == gm && panelRows_[p] == m_ && panelK_[p] == sK_);
            if (l.loadA) {
                // The panel's earlier readers (MTE1) are done before it is refilled.
                SetFlag<HardEvent::MTE1_MTE2>(NPUSIM_SYNC_EVENT);
                WaitFlag<HardEvent::MTE1_MTE2>(NPUSIM_SYNC_EVENT);
                panelA_[p] = gm;
                panelRows_[p] = m_;
                panelK_[p] = sK_;
                panelA_[1 - p] = panels == 2 ? panelA_[1 - p] : nullptr;
            }
            ringA_ = false;
        } else {
            if (!ringA_ || panelA_[0] != nullptr || panelA_[1] != nullptr) {
                // The ring takes A1 over from the panels: their readers are done first.
                SetFlag<HardEvent::MTE1_MTE2>(NPUSIM_SYNC_EVENT);
                WaitFlag<HardEvent::MTE1_MTE2>(NPUSIM_SYNC_EVENT);
                ReleaseA();
            }
            ringA_ = true;
            l.a1 = a1_ + par * slot;
            l.a1Step = 0;
            l.a1Xor = (uint64_t)a1_ ^ (uint64_t)(a1_ + slot);
            l.loadA = true;
        }
        l.b1 = b1_ + par * b1Slot_;
        l.a2 = a2_ + par * a2Slot_;
        l.b2 = b2_ + par * b2Slot_;
        l.b1Xor = (uint64_t)b1_ ^ (uint64_t)(b1_ + b1Slot_);
        l.a2Xor = (uint64_t)a2_ ^ (uint64_t)(a2_ + a2Slot_);
        l.b2Xor = (uint64_t)b2_ ^ (uint64_t)(b2_ + b2Slot_);
        l.c = co1_ + cSlot_ * co1Slot_;
        cOut_ = l.c;
        cSlot_ = co1Slots_ == 2 ? cSlot_ ^ 1 : 0;
        par_ = (par + kIter) & 1;
        if (hasBias_) {
            CopyBias();
        }
        // C's slot: its last fixpipe is done before the first Mmad writes it.
        flagWait(evCFree_);
        cFreeSets_--;
        const uint32_t k0 = kIter == 1 ? kLast : bk;
        if (hasBias_) {
            Step<1>(l, k0);
        } else {
            Step<0>(l, k0);
        }
        for (uint32_t ki = 2; ki < kIter; ki++) {
            Step<2>(l, bk);
        }
        if (kIter > 1) {
            Step<2>(l, kLast);
        }
        flagSet(evCFull_);
    }

    const TCubeTiling *t_ = nullptr;
    TPipe *pipe_ = nullptr;
    uint32_t stepKa_ = 1;
    GlobalTensor<A_T> a_;
    GlobalTensor<B_T> b_;
    /* L1, L0A, L0B and L0C: A1 (a1Bytes_: A panels or the A ring), two slots of B1, A2, B2,
     * and co1Slots_ of CO1. */
    uint8_t *a1_ = nullptr, *b1_ = nullptr, *a2_ = nullptr, *b2_ = nullptr, *co1_ = nullptr;
    uint32_t a1Bytes_ = 0, b1Slot_ = 0, a2Slot_ = 0, b2Slot_ = 0, co1Slot_ = 0, co1Slots_ = 1;
    /* The A panels in A1: the rows of the A at panelA_ (panelRows_ of them, over panelK_). */
    const A_T *panelA_[2] = {nullptr, nullptr};
    uint32_t panelRows_[2] = {0, 0}, panelK_[2] = {0, 0};
    bool ringA_ = false;
    /* The rings' next slot (par_, the K steps' L1 / L0 slots), the next block's L0C slot and
     * the L0C of the block the last Iterate computed. */
    uint32_t par_ = 0, cSlot_ = 0;
    uint8_t *cOut_ = nullptr;
    /* The flags of the hand-overs (flagWord), whether the free slots are set (Prime), and
     * the L0C free sets not yet consumed. */
    uint64_t evL1Full_ = 0, evA1Full_ = 0, evL1Free_ = 0, evL0Full_ = 0, evL0Free_ = 0, evCFull_ = 0,
             evCFree_ = 0;
    bool primed_ = false;
    uint32_t cFreeSets_ = 0;
    TQue<TPosition::C1, 1> qC1_;
    TQue<TPosition::C2, 1> qC2_;
    GlobalTensor<BIAS_T> bias_;
    bool hasBias_ = false;
    uint32_t asyncLeft_ = 0;
    uint32_t orgM_ = 0, orgN_ = 0, orgKa_ = 0;
    uint32_t sM_ = 0, sN_ = 0, sK_ = 0;
    uint32_t next_ = 0, mi_ = 0, ni_ = 0, m_ = 0, n_ = 0;
    /* The pass's plan (Plan): blocks along M and N, their product, K steps, the last's K. */
    uint32_t mIter_ = 0, nIter_ = 0, blocks_ = 0, kIter_ = 0, kLast_ = 0;
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
