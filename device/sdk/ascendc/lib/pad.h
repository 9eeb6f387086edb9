/*
 * lib/pad.h — Ascend C's advanced Pad and UnPad APIs on npusim (kernel_operator.h includes
 * it): a height x width tensor in UB, padded in the width to 32 bytes, or its right columns
 * taken off. The shapes come from a PadTiling / UnPadTiling (kernel_tiling/kernel_tiling.h,
 * filled on the host by tiling/pad_tiling.h's PadTilingFunc / UnPadTilingFunc).
 *
 *  - Pad, width 32-byte aligned (srcWidth a whole number of blocks, srcOriWidth of them data):
 *    dst = src (DataCopy), then the rightPad columns after the data set to padValue in every
 *    row (the bit-wise-mask Duplicate's way: a run starting a 32-byte block is one vdup, the
 *    rest the scalar unit's). Only the right side is padded there, and the padded columns stay
 *    within the data's last 32-byte block, as Ascend C documents.
 *  - Pad, width not aligned: row r of dst is leftPad copies of padValue, src's row r (rows
 *    srcWidth apart), rightPad copies of padValue, rows leftPad + srcWidth + rightPad apart
 *    (at most the width rounded up to 32 bytes).
 *  - UnPad: src's rows (srcWidth apart, 32-byte aligned) without their last rightPad elements,
 *    one after another in dst. leftPad has no effect, as Ascend C documents.
 *
 * The unaligned moves (Pad's unaligned width, UnPad) are made by the scalar unit, once the
 * vector unit and the copies are done with UB: npusim's vector and copy instructions address
 * whole 32-byte blocks and it has no TransDataTo5HD, Ascend's way. The numbers are Ascend's;
 * the simulated time is the scalar unit's. No temporary buffer is needed: the sharedTmpBuffer
 * forms accept one and leave it untouched. A tiling or parameters outside these rules abort the
 * block with a message naming the API.
 */
#ifndef NPUSIM_ASCENDC_LIB_PAD_H
#define NPUSIM_ASCENDC_LIB_PAD_H
#include "kernel_operator.h"

namespace AscendC {

struct PadParams {
    __aicore__ PadParams() {}
    __aicore__ PadParams(const uint16_t leftPadIn, const uint16_t rightPadIn,
                         const int32_t padValueIn)
        : leftPad(leftPadIn), rightPad(rightPadIn), padValue(padValueIn) {}
    uint16_t leftPad = 0;  /* columns added on the left (unaligned widths only) */
    uint16_t rightPad = 0; /* columns set or added on the right */
    int32_t padValue = 0;  /* their value, converted to the element type */
};

struct UnPadParams {
    __aicore__ UnPadParams() {}
    __aicore__ UnPadParams(const uint16_t leftPadIn, const uint16_t rightPadIn)
        : leftPad(leftPadIn), rightPad(rightPadIn) {}
    uint16_t leftPad = 0;  /* no effect (as in Ascend C) */
    uint16_t rightPad = 0; /* columns taken off each row, fewer than a 32-byte block holds */
};

namespace detail {
/* Pad's and UnPad's element types: int16_t, uint16_t, half, int32_t, uint32_t, float. */
template <typename T> struct IsPadType {
    static constexpr bool value = (sizeof(T) == 2 || sizeof(T) == 4) && Type<T>::code != NPU_BF16;
};
__aicore__ inline uint32_t round_up(uint32_t v, uint32_t to) { return (v + to - 1) / to * to; }
} // namespace detail

template <typename T>
__aicore__ inline void Pad(const LocalTensor<T> &dstTensor, const LocalTensor<T> &srcTensor,
                           const PadParams &padParams, const PadTiling &tiling) {
    static_assert(detail::IsPadType<T>::value,
                  "Pad: int16_t, uint16_t, half, int32_t, uint32_t and float tensors");
    const uint32_t height = tiling.srcHeight, width = tiling.srcWidth;
    const uint32_t left = padParams.leftPad, right = padParams.rightPad;
    const uint32_t per_block = 32 / sizeof(T);
    const T value = static_cast<T>(padParams.padValue);
    T *dst = dstTensor.Ptr();
    const T *src = srcTensor.Ptr();
    if (width % per_block == 0) {
        const uint32_t data = tiling.srcOriWidth;
        if (left != 0) {
            detail::fail("Pad: a 32-byte-aligned width is padded on the right only (leftPad must "
                         "be 0)");
        }
        if (data + right > width || data + right > detail::round_up(data, per_block)) {
            detail::fail("Pad: srcOriWidth + rightPad passes the data's last 32-byte block");
        }
        if (dst != src) {
            DataCopy(dstTensor, srcTensor, height * width);
        }
        if (right == 0) {
            return;
        }
        if (data % per_block != 0) {
            detail::scalar_owns_ub();
        }
        for (uint32_t r = 0; r < height; r++) {
            detail::fill_span(dst + r * width, data, right, value);
        }
        return;
    }
    const uint32_t out = left + width + right;
    if (out > detail::round_up(width, per_block)) {
        detail::fail("Pad: leftPad + srcWidth + rightPad passes the width rounded up to 32 bytes");
    }
    detail::scalar_owns_ub();
    /* Last row first, right to left: dst may be src (its rows only move right). */
    for (uint32_t r = height; r-- > 0;) {
        T *d = dst + r * out;
        const T *s = src + r * width;
        for (uint32_t c = right; c-- > 0;) {
            npusim_detail::volatile_store(d + left + width + c, value);
        }
        for (uint32_t c = width; c-- > 0;) {
            npusim_detail::volatile_store(d + left + c, npusim_detail::volatile_load(s + c));
        }
        for (uint32_t c = left; c-- > 0;) {
            npusim_detail::volatile_store(d + c, value);
        }
    }
}
template <typename T>
__aicore__ inline void Pad(const LocalTensor<T> &dstTensor, const LocalTensor<T> &srcTensor,
                           const PadParams &padParams, const LocalTensor<uint8_t> &sharedTmpBuffer,
                           const PadTiling &tiling) {
    (void)sharedTmpBuffer;
    Pad(dstTensor, srcTensor, padParams, tiling);
}

template <typename T>
__aicore__ inline void UnPad(const LocalTensor<T> &dstTensor, const LocalTensor<T> &srcTensor,
                             const UnPadParams &unPadParams, const UnPadTiling &tiling) {
    static_assert(detail::IsPadType<T>::value,
                  "UnPad: int16_t, uint16_t, half, int32_t, uint32_t and float tensors");
    const uint32_t height = tiling.srcHeight, width = tiling.srcWidth;
    const uint32_t right = unPadParams.rightPad;
    const uint32_t per_block = 32 / sizeof(T);
    if (width % per_block != 0) {
        detail::fail("UnPad: srcWidth must be a whole number of 32-byte blocks");
    }
    if (right >= per_block) {
        detail::fail("UnPad: rightPad must be fewer elements than a 32-byte block holds");
    }
    const uint32_t out = width - right;
    T *dst = dstTensor.Ptr();
    const T *src = srcTensor.Ptr();
    detail::scalar_owns_ub();
    /* First row first, left to right: dst may be src (its rows only move left). */
    for (uint32_t r = 0; r < height; r++) {
        for (uint32_t c = 0; c < out; c++) {
            npusim_detail::volatile_store(dst + r * out + c,
                                          npusim_detail::volatile_load(src + r * width + c));
        }
    }
}
template <typename T>
__aicore__ inline void UnPad(const LocalTensor<T> &dstTensor, const LocalTensor<T> &srcTensor,
                             const UnPadParams &unPadParams,
                             const LocalTensor<uint8_t> &sharedTmpBuffer,
                             const UnPadTiling &tiling) {
    (void)sharedTmpBuffer;
    UnPad(dstTensor, srcTensor, unPadParams, tiling);
}

} // namespace AscendC
#endif
