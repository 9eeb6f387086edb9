/*
 * lib/broadcast.h — Ascend C's advanced Broadcast API on npusim (kernel_operator.h includes
 * it): a 1- or 2-dimensional tensor in UB, one axis of extent 1 repeated to dstShape's extent,
 * into a compact dst (rows dstShape[1] apart). Also under its earlier name, BroadCast.
 *
 *  - dim 1 (axis 0): dst[i] = src[0] — one vdup.
 *  - dim 2, axis 0 ([1, k] -> [m, k]): every row of dst is src's row — one vmov per row; k
 *    fills whole 32-byte blocks, as Ascend C requires.
 *  - dim 2, axis 1 ([m, 1] -> [m, k]): row r of dst is k copies of src[r] — one vdup per row
 *    from its first 32-byte boundary on; when k does not fill whole blocks, the elements of a
 *    row before that boundary are the scalar unit's (an NPU instruction's UB address is 32-byte
 *    aligned).
 * The source values are read by the scalar unit once the vector unit and the copies are done
 * with UB. A srcShape whose broadcast axis is dstShape's extent is a copy. Element types: any
 * of 8, 16 or 32 bits (a broadcast moves bits). No temporary buffer is needed: the
 * sharedTmpBuffer form accepts one and leaves it untouched. dim other than 1 or 2, or axis
 * outside it, stops the compile; shapes outside these rules abort the block naming the API.
 */
#ifndef NPUSIM_ASCENDC_LIB_BROADCAST_H
#define NPUSIM_ASCENDC_LIB_BROADCAST_H
#include "kernel_operator.h"

namespace AscendC {

template <typename T, int32_t dim, int32_t axis, bool isReuseSource = false>
__aicore__ inline void Broadcast(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal,
                                 const uint32_t dstShape[dim], const uint32_t srcShape[dim]) {
    static_assert(dim == 1 || dim == 2, "Broadcast: dim is 1 or 2");
    static_assert(axis >= 0 && axis < dim, "Broadcast: axis is 0 or 1, and less than dim");
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                  "Broadcast: 8-, 16- and 32-bit element types");
    const uint32_t other = dim == 2 ? 1 - (uint32_t)axis : 0;
    if (dim == 2 && srcShape[other] != dstShape[other]) {
        detail::fail("Broadcast: srcShape and dstShape differ off the broadcast axis");
    }
    const uint32_t total = dim == 2 ? dstShape[0] * dstShape[1] : dstShape[0];
    if (srcShape[axis] == dstShape[axis]) {
        DataCopy(dstLocal, srcLocal, total);
        return;
    }
    if (srcShape[axis] != 1) {
        detail::fail("Broadcast: srcShape's extent on the broadcast axis must be 1");
    }
    T *dst = dstLocal.Ptr();
    const T *src = srcLocal.Ptr();
    if (dim == 2 && axis == 0) {
        const uint32_t k = dstShape[1];
        if (k * sizeof(T) % 32 != 0) {
            detail::fail("Broadcast: with dim 2 and axis 0, srcShape[1] must fill whole 32-byte "
                         "blocks");
        }
        for (uint32_t r = 0; r < dstShape[0]; r++) {
            DataCopy(dstLocal[r * k], srcLocal, k);
        }
        return;
    }
    detail::scalar_owns_ub();
    if (dim == 1) {
        detail::fill_span(dst, 0, total, npusim_detail::volatile_load(src));
        return;
    }
    const uint32_t k = dstShape[1];
    for (uint32_t r = 0; r < dstShape[0]; r++) {
        detail::fill_span(dst, r * k, k, npusim_detail::volatile_load(src + r));
    }
}
template <typename T, int32_t dim, int32_t axis, bool isReuseSource = false>
__aicore__ inline void Broadcast(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal,
                                 const uint32_t dstShape[dim], const uint32_t srcShape[dim],
                                 const LocalTensor<uint8_t> &sharedTmpBuffer) {
    (void)sharedTmpBuffer;
    Broadcast<T, dim, axis, isReuseSource>(dstLocal, srcLocal, dstShape, srcShape);
}
/* The API's earlier name. */
template <typename T, int32_t dim, int32_t axis, bool isReuseSource = false>
__aicore__ inline void BroadCast(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal,
                                 const uint32_t dstShape[dim], const uint32_t srcShape[dim]) {
    Broadcast<T, dim, axis, isReuseSource>(dstLocal, srcLocal, dstShape, srcShape);
}
template <typename T, int32_t dim, int32_t axis, bool isReuseSource = false>
__aicore__ inline void BroadCast(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal,
                                 const uint32_t dstShape[dim], const uint32_t srcShape[dim],
                                 const LocalTensor<uint8_t> &sharedTmpBuffer) {
    (void)sharedTmpBuffer;
    Broadcast<T, dim, axis, isReuseSource>(dstLocal, srcLocal, dstShape, srcShape);
}

} // namespace AscendC
#endif
