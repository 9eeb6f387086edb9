/*
 * kernel_tiling/kernel_tiling.h — TCubeTiling, the tiling of CANN's high-level Matmul API, as
 * both sides see it: the host fills it (tiling/tiling_api.h, matmul_tiling::MatmulApiTiling /
 * MultiCoreMatmulTiling::GetTiling) and copies its words to device memory; the kernel copies
 * them back into the same struct and hands it to a Matmul object (lib/matmul_intf.h). One
 * file, included by both (the device's lib/matmul_intf.h includes it), so the layout has one
 * owner. Field names and order follow CANN's TCubeTiling: 32-bit signed integers, in order.
 */
#ifndef NPUSIM_KERNEL_TILING_H
#define NPUSIM_KERNEL_TILING_H
#include <cstdint>

/* X(name) for every field of TCubeTiling, in CANN's order. */
#define NPUSIM_TCUBE_TILING_FIELDS(X)                                                              \
    X(usedCoreNum) X(M) X(N) X(Ka) X(Kb) X(singleCoreM) X(singleCoreN) X(singleCoreK) X(baseM)   \
    X(baseN) X(baseK) X(depthA1) X(depthB1) X(stepM) X(stepN) X(isBias) X(transLength)             \
    X(iterateOrder) X(shareMode) X(shareL1Size) X(shareL0CSize) X(shareUbSize) X(batchM)          \
    X(batchN) X(singleBatchM) X(singleBatchN) X(stepKa) X(stepKb) X(depthAL1CacheUB)               \
    X(depthBL1CacheUB) X(dbL0A) X(dbL0B) X(dbL0C) X(ALayoutInfoB) X(ALayoutInfoS)                  \
    X(ALayoutInfoN) X(ALayoutInfoG) X(ALayoutInfoD) X(BLayoutInfoB) X(BLayoutInfoS)                \
    X(BLayoutInfoN) X(BLayoutInfoG) X(BLayoutInfoD) X(CLayoutInfoB) X(CLayoutInfoS1)               \
    X(CLayoutInfoN) X(CLayoutInfoG) X(CLayoutInfoS2) X(BatchNum) X(mxTypePara)

/* The Matmul tiling: the whole problem (M, N, Ka = Kb), one core's share (singleCore*), one
 * cube step (base*: baseM x baseK of A times baseK x baseN of B into baseM x baseN of C), the
 * cores used, bias, and the order C's base blocks are produced in (iterateOrder: 0 walks M
 * first, 1 walks N first). The other fields are CANN's (batch, L1 sharing, layouts); npusim's
 * Matmul reads the ones above. */
struct TCubeTiling {
#define NPUSIM_TCUBE_FIELD(name) int32_t name = 0;
    NPUSIM_TCUBE_TILING_FIELDS(NPUSIM_TCUBE_FIELD)
#undef NPUSIM_TCUBE_FIELD
};
#endif
