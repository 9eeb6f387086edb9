/*
 * tiling/tiling_api.h — CANN's host-side Matmul tiling API on npusim: matmul_tiling::
 * MatmulApiTiling (one core) and MultiCoreMatmulTiling (a problem split over cores) fill a
 * TCubeTiling (kernel_tiling/kernel_tiling.h) for the kernel-side Matmul of lib/matmul_intf.h;
 * optiling::TCubeTiling is the tiling-data class samples hand to GetTiling and save with
 * SaveToBuffer. The Pad / UnPad tiling functions are tiling/pad_tiling.h's (included here).
 * Header-only; the buffer sizes come from the platform (platform_ascendc.h, the
 * npusim preset).
 *
 * What npusim's Matmul offers, and so what GetTiling accepts (anything else: -1 and a line on
 * stderr naming it): A and B in GM, ND, DT_FLOAT16, neither transposed;
 * C in GM or UB (VECIN / VECOUT / VECCALC), ND, DT_FLOAT or DT_FLOAT16; a bias in GM, DT_FLOAT
 * or DT_FLOAT16, whose baseN values fit the bias table; Ka == Kb.
 *
 * The split: MultiCoreMatmulTiling picks singleCoreM x singleCoreN (multiples of 16, SetDim
 * blocks at most) minimising the simulated time: the blocks run a wave at a time on the AI
 * cores (GetCoreNumAic; npusim runs each block on a whole AI core), each wave as long as its
 * largest block's cube steps (one cycle per 16 x 16 x 16 fractal product, 8 more per step) or
 * its loads (A's rows kept in L1 when they fit, B's read for every block), whichever is longer,
 * plus a block's fixed cost (its set-up, first loads and last fixpipe: about 3,000 cycles);
 * the fewer blocks on a tie. SetSingleShape fixes them. usedCoreNum = ceil(M / singleCoreM) *
 * ceil(N / singleCoreN), the blocks walking M first (block b is M block b % mBlocks, N block
 * b / mBlocks), as the samples' kernels compute their offsets. One cube step is baseM x baseN
 * over baseK: baseM and baseN at most 128 and 256 with two C blocks in L0C (the fixpipe of one
 * overlaps the next one's steps; one when two do not fit), baseK as deep as double-buffered
 * L0A and L0B allow (128 halves at most), smaller where the shape or SetBufferSpace's sizes
 * say so; A and B double buffered in L1.
 */
#ifndef NPUSIM_TILING_API_H
#define NPUSIM_TILING_API_H
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kernel_tiling/kernel_tiling.h"
#include "tiling/pad_tiling.h"
#include "tiling/platform/platform_ascendc.h"

namespace optiling {
/* CANN's tiling-data class for TCubeTiling: set_NAME / get_NAME for every field,
 * GetDataSize (the struct's bytes) and SaveToBuffer (its words, in order). */
class TCubeTiling {
public:
#define NPUSIM_TCUBE_ACCESSORS(name)                                                               \
    void set_##name(int32_t v) { data_.name = v; }                                                 \
    int32_t get_##name() const { return data_.name; }
    NPUSIM_TCUBE_TILING_FIELDS(NPUSIM_TCUBE_ACCESSORS)
#undef NPUSIM_TCUBE_ACCESSORS
    size_t GetDataSize() const { return sizeof(::TCubeTiling); }
    /* Copies the struct's bytes into buf (at most size of them). */
    void SaveToBuffer(void *buf, size_t size) const {
        std::memcpy(buf, &data_, size < sizeof data_ ? size : sizeof data_);
    }
    const ::TCubeTiling &Data() const { return data_; }
    ::TCubeTiling &Data() { return data_; }

private:
    ::TCubeTiling data_{};
};
} // namespace optiling

namespace matmul_tiling {

/* Where an operand lives (CANN's TPosition). */
enum class TPosition : int32_t {
    GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM, TSCM, MAX
};
/* An operand's layout. */
enum class CubeFormat : int32_t { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };
/* Element types (ge::DataType's values). */
enum class DataType : int32_t {
    DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT16 = 6,
    DT_UINT16 = 7, DT_UINT32 = 8, DT_INT64 = 9, DT_UINT64 = 10, DT_DOUBLE = 11, DT_BOOL = 12,
    DT_BF16 = 27, DT_INT4 = 29
};

/* The order C's base blocks are produced in: FIRSTM walks M first (iterateOrder 0), FIRSTN
 * walks N first (1). */
enum class MatrixTraverse : int32_t { NOSET = 0, FIRSTM = 1, FIRSTN = 2 };

/* The tiling of one matmul on one core; the base of MultiCoreMatmulTiling. */
class MatmulApiTiling {
public:
    MatmulApiTiling() : MatmulApiTiling(*platform_ascendc::PlatformAscendCManager::GetInstance()) {}
    explicit MatmulApiTiling(const platform_ascendc::PlatformAscendC &platform)
        : info_(Buffers::Of(platform)), dim_((int32_t)platform.GetCoreNumAiv()) {}
    virtual ~MatmulApiTiling() = default;

    int32_t SetAType(TPosition pos, CubeFormat format, DataType type, bool isTrans = false) {
        a_ = {pos, format, type, isTrans};
        return 0;
    }
    int32_t SetBType(TPosition pos, CubeFormat format, DataType type, bool isTrans = false) {
        b_ = {pos, format, type, isTrans};
        return 0;
    }
    int32_t SetCType(TPosition pos, CubeFormat format, DataType type) {
        c_ = {pos, format, type, false};
        return 0;
    }
    int32_t SetBiasType(TPosition pos, CubeFormat format, DataType type) {
        bias_ = {pos, format, type, false};
        return 0;
    }
    /* The shape this tiling multiplies (for one core: that core's M, N, K; -1 keeps a value). */
    int32_t SetShape(int32_t m, int32_t n, int32_t k) {
        if (m > 0) m_ = m;
        if (n > 0) n_ = n;
        if (k > 0) k_ = k;
        return 0;
    }
    /* The whole matrices' shape: A is orgM x orgKa, B orgKb x orgN, C orgM x orgN. */
    int32_t SetOrgShape(int32_t orgM, int32_t orgN, int32_t orgK) { return SetOrgShape(orgM, orgN, orgK, orgK); }
    int32_t SetOrgShape(int32_t orgM, int32_t orgN, int32_t orgKa, int32_t orgKb) {
        orgM_ = orgM;
        orgN_ = orgN;
        orgKa_ = orgKa;
        orgKb_ = orgKb;
        return 0;
    }
    int32_t SetBias(bool isBias = false) {
        isBias_ = isBias;
        return 0;
    }
    /* Caps on the L1, L0C, UB and bias-table bytes the tiling may use (-1: the core's). */
    int32_t SetBufferSpace(int32_t l1Size = -1, int32_t l0CSize = -1, int32_t ubSize = -1, int32_t btSize = -1) {
        l1Cap_ = l1Size;
        l0cCap_ = l0CSize;
        ubCap_ = ubSize;
        btCap_ = btSize;
        return 0;
    }
    /* Fixes baseM, baseN, baseK (-1: the tiling picks). */
    int32_t SetFixSplit(int32_t baseM = -1, int32_t baseN = -1, int32_t baseK = -1) {
        fixBaseM_ = baseM;
        fixBaseN_ = baseN;
        fixBaseK_ = baseK;
        return 0;
    }
    int32_t SetDim(int32_t dim) {
        dim_ = dim;
        return 0;
    }
    int32_t SetTraverse(MatrixTraverse traverse) {
        traverse_ = traverse;
        return 0;
    }

    /* Fills tiling; 0 on success, -1 (and a line on stderr naming why) when npusim's Matmul
     * cannot run this problem. */
    int64_t GetTiling(optiling::TCubeTiling &tiling) { return GetTiling(tiling.Data()); }
    int64_t GetTiling(::TCubeTiling &tiling) {
        ::TCubeTiling t{};
        if (!Check()) {
            return -1;
        }
        int32_t M = orgM_ > 0 ? orgM_ : m_;
        int32_t N = orgN_ > 0 ? orgN_ : n_;
        int32_t K = orgKa_ > 0 ? orgKa_ : k_;
        int32_t sM = 0, sN = 0, sK = k_ > 0 ? k_ : K;
        if (!Split(M, N, sK, sM, sN)) {
            return -1;
        }
        t.M = M;
        t.N = N;
        t.Ka = K;
        t.Kb = orgKb_ > 0 ? orgKb_ : K;
        t.singleCoreM = sM;
        t.singleCoreN = sN;
        t.singleCoreK = sK;
        t.usedCoreNum = (int32_t)(CeilDiv(M, sM) * CeilDiv(N, sN));
        if (!Bases(sM, sN, sK, t)) {
            return -1;
        }
        t.depthA1 = 2;
        t.depthB1 = 2;
        t.stepM = 1;
        t.stepN = 1;
        t.stepKa = 1;
        t.stepKb = 1;
        {
            // A's rows over all of K in L1 when they fit beside B's double-buffered base
            // blocks (and the bias): loaded once for every block of C in those rows.
            uint64_t l1 = l1Cap_ > 0 ? (uint64_t)l1Cap_ : info_.l1Bytes;
            int32_t kSteps = (int32_t)CeilDiv(sK, t.baseK);
            uint64_t panel = (uint64_t)t.baseM * kSteps * t.baseK * InBytes();
            uint64_t rest = 2ull * t.baseK * t.baseN * InBytes() + (isBias_ ? t.baseN * 4ull : 0);
            if (kSteps > 1 && panel + rest <= l1) {
                t.stepKa = kSteps;
                t.depthA1 = kSteps;
            }
        }
        t.isBias = isBias_ ? 1 : 0;
        t.iterateOrder = traverse_ == MatrixTraverse::FIRSTN ? 1 : 0;
        t.shareL1Size = 2 * (t.baseM * t.baseK + t.baseK * t.baseN) * InBytes();
        t.shareL0CSize = t.baseM * t.baseN * 4;
        t.batchM = 1;
        t.batchN = 1;
        t.singleBatchM = 1;
        t.singleBatchN = 1;
        t.dbL0A = 2;
        t.dbL0B = 2;
        t.dbL0C = 2ull * t.baseM * t.baseN * 4 <= info_.l0cBytes ? 2 : 1;
        tiling = t;
        return 0;
    }

protected:
    struct Operand {
        TPosition pos = TPosition::GM;
        CubeFormat format = CubeFormat::ND;
        DataType type = DataType::DT_FLOAT16;
        bool trans = false;
    };
    static int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
    static int32_t Align(int32_t a, int32_t b) { return (int32_t)CeilDiv(a, b) * b; }
    static int32_t Min(int32_t a, int32_t b) { return a < b ? a : b; }
    static bool Fail(const char *what) {
        std::fprintf(stderr, "matmul_tiling (npusim): %s\n", what);
        return false;
    }
    int32_t InBytes() const { return a_.type == DataType::DT_FLOAT ? 4 : 2; }
    /* One core's M and N: the single-core API takes the whole shape. */
    virtual bool Split(int32_t M, int32_t N, int32_t, int32_t &sM, int32_t &sN) {
        sM = m_ > 0 ? m_ : M;
        sN = n_ > 0 ? n_ : N;
        return true;
    }
    bool Check() const {
        int32_t M = orgM_ > 0 ? orgM_ : m_, N = orgN_ > 0 ? orgN_ : n_, K = orgKa_ > 0 ? orgKa_ : k_;
        if (M <= 0 || N <= 0 || K <= 0) {
            return Fail("no shape: SetShape / SetOrgShape with M, N, K > 0");
        }
        if (orgKb_ > 0 && orgKb_ != K) {
            return Fail("Ka != Kb");
        }
        if (a_.pos != TPosition::GM || b_.pos != TPosition::GM) {
            return Fail("A and B must be in TPosition::GM (other positions are not offered)");
        }
        if (a_.format != CubeFormat::ND || b_.format != CubeFormat::ND || c_.format != CubeFormat::ND) {
            return Fail("A, B and C must be CubeFormat::ND (NZ and the others are not offered)");
        }
        if (a_.trans || b_.trans) {
            return Fail("a transposed A or B is not offered");
        }
        if (a_.type != DataType::DT_FLOAT16 || b_.type != DataType::DT_FLOAT16) {
            return Fail("A and B must be DT_FLOAT16 (float, int8 and bfloat16 inputs are not offered)");
        }
        if (c_.type != DataType::DT_FLOAT && !(c_.type == DataType::DT_FLOAT16 && a_.type == DataType::DT_FLOAT16)) {
            return Fail("C must be DT_FLOAT (or DT_FLOAT16 from half inputs)");
        }
        if (c_.pos != TPosition::GM && c_.pos != TPosition::VECIN && c_.pos != TPosition::VECOUT &&
            c_.pos != TPosition::VECCALC) {
            return Fail("C must be in GM or in UB (VECIN / VECOUT / VECCALC)");
        }
        if (isBias_ && (bias_.pos != TPosition::GM ||
                        (bias_.type != DataType::DT_FLOAT && bias_.type != DataType::DT_FLOAT16))) {
            return Fail("a bias must be DT_FLOAT or DT_FLOAT16 in TPosition::GM");
        }
        return true;
    }
    /* baseM x baseN over baseK: fits L0A / L0B twice (double buffered), C's block in L0C. */
    bool Bases(int32_t sM, int32_t sN, int32_t sK, ::TCubeTiling &t, bool report = true) const {
        auto fail = [report](const char *what) { return report ? Fail(what) : false; };
        int32_t in = InBytes();
        int32_t k0 = 32 / in; // elements along K in one fractal row
        uint64_t l0c = info_.l0cBytes;
        if (l0cCap_ > 0 && (uint64_t)l0cCap_ < l0c) {
            l0c = (uint64_t)l0cCap_;
        }
        int32_t bm = fixBaseM_ > 0 ? fixBaseM_ : Min(Align(sM, 16), 128);
        int32_t bn = fixBaseN_;
        if (bn <= 0) {
            // Two C blocks in L0C when they fit, else one.
            int32_t two = (int32_t)(l0c / (2ull * bm * 4)) / 16 * 16;
            int32_t one = (int32_t)(l0c / (1ull * bm * 4)) / 16 * 16;
            bn = Min(Align(sN, 16), Min(256, two >= 16 ? two : one));
        }
        while ((uint64_t)bm * bn * 4 > l0c && bm > 16) {
            bm /= 2;
        }
        int32_t bk = fixBaseK_;
        if (bk <= 0) {
            // As deep as A's and B's blocks fit L0A and L0B twice, 128 halves at most.
            uint64_t deep = info_.l0aBytes / (2ull * bm * in);
            if (info_.l0bBytes / (2ull * bn * in) < deep) {
                deep = info_.l0bBytes / (2ull * bn * in);
            }
            bk = Min(Align(sK, k0), Min(128 * 2 / in, (int32_t)deep / k0 * k0));
            if (bk < k0) {
                bk = k0;
            }
        }
        if (bm % 16 || bn % 16 || bk % k0) {
            return fail("baseM and baseN must be multiples of 16, baseK of 32 bytes");
        }
        if ((uint64_t)bm * bn * 4 > l0c || 2ull * bm * bk * in > info_.l0aBytes ||
            2ull * bk * bn * in > info_.l0bBytes) {
            return fail("the base block does not fit L0A / L0B / L0C");
        }
        uint64_t l1 = l1Cap_ > 0 ? (uint64_t)l1Cap_ : info_.l1Bytes;
        if (2ull * (bm * bk + bk * bn) * in + (isBias_ ? bn * 4ull : 0) > l1) {
            return fail("A's and B's base blocks do not fit L1");
        }
        if (isBias_ && bn * 4u > info_.btBytes) {
            return fail("the bias block does not fit the bias table");
        }
        t.baseM = bm;
        t.baseN = bn;
        t.baseK = bk;
        return true;
    }

    /* The per-core buffer sizes the split must fit, from the platform. */
    struct Buffers {
        uint64_t l0aBytes, l0bBytes, l0cBytes, l1Bytes, btBytes;
        uint32_t aicCores;
        static Buffers Of(const platform_ascendc::PlatformAscendC &p) {
            Buffers b{};
            p.GetCoreMemSize(platform_ascendc::CoreMemType::L0_A, b.l0aBytes);
            p.GetCoreMemSize(platform_ascendc::CoreMemType::L0_B, b.l0bBytes);
            p.GetCoreMemSize(platform_ascendc::CoreMemType::L0_C, b.l0cBytes);
            p.GetCoreMemSize(platform_ascendc::CoreMemType::L1, b.l1Bytes);
            p.GetCoreMemSize(platform_ascendc::CoreMemType::BT, b.btBytes);
            b.aicCores = p.GetCoreNumAic() > 0 ? p.GetCoreNumAic() : 1;
            return b;
        }
    };
    Buffers info_;
    Operand a_, b_, c_, bias_{TPosition::GM, CubeFormat::ND, DataType::DT_FLOAT, false};
    int32_t m_ = -1, n_ = -1, k_ = -1;
    int32_t orgM_ = -1, orgN_ = -1, orgKa_ = -1, orgKb_ = -1;
    int32_t l1Cap_ = -1, l0cCap_ = -1, ubCap_ = -1, btCap_ = -1;
    int32_t fixBaseM_ = -1, fixBaseN_ = -1, fixBaseK_ = -1;
    int32_t dim_;
    bool isBias_ = false;
    MatrixTraverse traverse_ = MatrixTraverse::FIRSTM;
};

/* A matmul split over SetDim cores (default: the AIV cores, as GetCoreNumAiv). */
class MultiCoreMatmulTiling : public MatmulApiTiling {
public:
    MultiCoreMatmulTiling() = default;
    explicit MultiCoreMatmulTiling(const platform_ascendc::PlatformAscendC &platform) : MatmulApiTiling(platform) {}
    /* Fixes one core's M, N (and K; -1: the tiling picks). */
    int32_t SetSingleShape(int32_t singleM = -1, int32_t singleN = -1, int32_t singleK = -1) {
        singleM_ = singleM;
        singleN_ = singleN;
        if (singleK > 0) {
            k_ = singleK;
        }
        return 0;
    }
    /* The split GetTiling chose: cores used, and blocks along M and N. */
    int32_t GetCoreNum(int32_t &dim, int32_t &mDim, int32_t &nDim) const {
        dim = mDim_ * nDim_;
        mDim = mDim_;
        nDim = nDim_;
        return 0;
    }
    int32_t GetSingleShape(int32_t &shapeM, int32_t &shapeN, int32_t &shapeK) const {
        shapeM = sM_;
        shapeN = sN_;
        shapeK = sK_;
        return 0;
    }

protected:
    bool Split(int32_t M, int32_t N, int32_t K, int32_t &sM, int32_t &sN) override {
        if (dim_ <= 0) {
            return Fail("SetDim: at least one core");
        }
        int64_t best = -1;
        int32_t unfit = -1; // a split whose base block does not fit (its reason is printed)
        for (int32_t md = 1; md <= dim_; md++) {
            for (int32_t nd = 1; md * nd <= dim_; nd++) {
                int32_t cm = singleM_ > 0 ? singleM_ : Align((int32_t)CeilDiv(M, md), 16);
                int32_t cn = singleN_ > 0 ? singleN_ : Align((int32_t)CeilDiv(N, nd), 16);
                int64_t used = CeilDiv(M, cm) * CeilDiv(N, cn);
                if (used > dim_) {
                    continue;
                }
                // The waves' time (see the header); fewer blocks on a tie.
                ::TCubeTiling b{};
                if (!Bases(cm, cn, K, b, false)) {
                    unfit = cm;
                    sN = cn;
                    continue;
                }
                int64_t waves = CeilDiv(used, (int64_t)info_.aicCores);
                int64_t busy = CubeCycles(cm, cn, K, b);
                int64_t loads = LoadCycles(cm, cn, K, b);
                int64_t cost = waves * ((busy > loads ? busy : loads) + kBlockCycles);
                int64_t key = cost * 4096 + used;
                if (best < 0 || key < best) {
                    best = key;
                    sM = cm;
                    sN = cn;
                }
            }
        }
        if (best < 0 && unfit > 0) {
            ::TCubeTiling b{};
            return Bases(unfit, sN, K, b);
        }
        if (best < 0) {
            return Fail("SetSingleShape's blocks need more cores than SetDim gives");
        }
        mDim_ = (int32_t)CeilDiv(M, sM);
        nDim_ = (int32_t)CeilDiv(N, sN);
        sM_ = sM;
        sN_ = sN;
        sK_ = K;
        return true;
    }

private:
    /* A block's fixed cost in cycles: its set-up, its first loads and its last fixpipe. */
    static constexpr int64_t kBlockCycles = 3000;
    /* One block's cube cycles: every base block's K steps, a cycle per fractal product and
     * 8 per step (the products factor: the fractals along M, N and K, summed over the steps). */
    static int64_t CubeCycles(int32_t sM, int32_t sN, int32_t sK, const ::TCubeTiling &b) {
        int64_t fm = 0, fn = 0, fk = 0, steps = 1;
        Along(sM, b.baseM, fm, steps);
        Along(sN, b.baseN, fn, steps);
        Along(sK, b.baseK, fk, steps);
        return fm * fn * fk + 8 * steps;
    }
    /* One block's GM -> L1 cycles (128 bytes a cycle, 16 more per copy): B's base blocks for
     * every block of C, A's rows once per row of blocks when they fit L1 as a panel (the
     * Matmul keeps them), else for every block. */
    int64_t LoadCycles(int32_t sM, int32_t sN, int32_t sK, const ::TCubeTiling &b) const {
        int64_t mBlocks = CeilDiv(sM, b.baseM), nBlocks = CeilDiv(sN, b.baseN);
        int64_t kSteps = CeilDiv(sK, b.baseK), in = InBytes();
        uint64_t l1 = l1Cap_ > 0 ? (uint64_t)l1Cap_ : info_.l1Bytes;
        bool panel = (uint64_t)b.baseM * kSteps * b.baseK * in + 2ull * b.baseK * b.baseN * in <= l1;
        int64_t aBytes = (int64_t)sM * sK * in * (panel ? 1 : nBlocks);
        int64_t bBytes = (int64_t)sN * sK * in * mBlocks;
        int64_t copies = kSteps * (mBlocks * nBlocks + (panel ? mBlocks : mBlocks * nBlocks));
        return (aBytes + bBytes) / 128 + 16 * copies;
    }
    /* Splits `size` into base pieces: adds their 16-element fractals to `fractals` and
     * multiplies `steps` by their count. */
    static void Along(int32_t size, int32_t base, int64_t &fractals, int64_t &steps) {
        int64_t full = size / base, tail = size % base;
        fractals += full * CeilDiv(base, 16) + (tail ? CeilDiv(tail, 16) : 0);
        steps *= full + (tail ? 1 : 0);
    }
    int32_t singleM_ = -1, singleN_ = -1;
    int32_t mDim_ = 0, nDim_ = 0, sM_ = 0, sN_ = 0, sK_ = 0;
};

} // namespace matmul_tiling
#endif
