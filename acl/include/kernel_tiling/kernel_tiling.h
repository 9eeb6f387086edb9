/*
 * kernel_tiling/kernel_tiling.h — the tiling structs of CANN's high-level APIs, as both sides
 * see them: the host fills them (tiling/tiling_api.h) and copies their words to device memory;
 * the kernel copies them back into the same struct and hands it to the API. One file, included
 * by both (the device's kernel_operator.h and lib/matmul_intf.h include it), so each layout has
 * one owner. Field names and order follow CANN's:
 *   TCubeTiling (Matmul, lib/matmul_intf.h): 32-bit signed integers;
 *   PadTiling, UnPadTiling (Pad, UnPad, lib/pad.h): 32-bit unsigned integers — a kernel may
 *   copy them word by word from GM, as CANN's samples do.
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

/* X(name) for every field of PadTiling, in CANN's order: the shape (srcHeight rows of srcWidth
 * elements, of which the first srcOriWidth are data), the plan for a 32-byte-aligned width
 * (widthWithoutLastBlock .. tailBlockOffset) and CANN's temporary-buffer plan for an unaligned
 * one (tmpBuffer1BlockNum .. reserved). npusim's Pad reads the shape; the host fills the
 * aligned-width plan as CANN does and leaves the temporary-buffer plan 0 (npusim's Pad needs no
 * temporary buffer). */
#define NPUSIM_PAD_TILING_FIELDS(X)                                                                \
    X(srcHeight) X(srcWidth) X(srcOriWidth) X(widthWithoutLastBlock) X(blocksPerRow)              \
    X(heightTiling) X(heightFractal) X(heightFractalTail) X(mainLoopOffset) X(tailBlockOffset)    \
    X(tmpBuffer1BlockNum) X(tmpBuffer1RowNum) X(tmpBuffer2Offset) X(widthTiling) X(widthFractal)  \
    X(widthFractalTail) X(widthFractalTailAlingned) X(brcbTiling) X(brcbFractal)                  \
    X(brcbFractalTail) X(maxRepeatTimes) X(brcbTilingRepeatTimes) X(brcbTilingRepeatTimesTail)    \
    X(brcbFractalTailRepeatTimes) X(brcbFractalTailRepeatTimesTail) X(reserved)

/* X(name) for every field of UnPadTiling, in CANN's order: the shape (srcHeight rows of
 * srcWidth elements), then CANN's temporary-buffer plan (0 from npusim's host: its UnPad needs
 * no temporary buffer, as CANN's on the 910B). */
#define NPUSIM_UNPAD_TILING_FIELDS(X)                                                              \
    X(srcHeight) X(srcWidth) X(tmpBuffer1BlockNum) X(tmpBuffer1RowNum) X(tmpBuffer2Offset)        \
    X(widthTiling) X(widthFractal) X(widthFractalTail)

#define NPUSIM_U32_FIELD(name) uint32_t name = 0;
struct PadTiling {
    NPUSIM_PAD_TILING_FIELDS(NPUSIM_U32_FIELD)
};
struct UnPadTiling {
    NPUSIM_UNPAD_TILING_FIELDS(NPUSIM_U32_FIELD)
};
#undef NPUSIM_U32_FIELD

/* CANN's newer spelling of the same structs (PadTilingFunc has an overload taking them). */
namespace AscendC {
namespace tiling {
using ::PadTiling;
using ::TCubeTiling;
using ::UnPadTiling;
} // namespace tiling
} // namespace AscendC
#endif
