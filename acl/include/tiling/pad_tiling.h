/*
 * tiling/pad_tiling.h — the host side of CANN's Pad and UnPad APIs on npusim (included by
 * tiling/tiling_api.h): optiling::PadTiling / optiling::UnPadTiling, the tiling-data classes
 * samples fill and save with SaveToBuffer, and AscendC::GetPadMaxMinTmpSize, PadTilingFunc,
 * GetUnPadMaxMinTmpSize and UnPadTilingFunc, which fill them from ge::Shape (graph/tensor.h)
 * shapes. The layouts are kernel_tiling/kernel_tiling.h's, the kernel side lib/pad.h.
 *
 * What npusim's kernels read: the shape (srcHeight, srcWidth and, for Pad, srcOriWidth). The
 * tiling also carries, as CANN's does, the plan for a 32-byte-aligned width (Pad's
 * widthWithoutLastBlock .. tailBlockOffset: the pad columns' last 32-byte block, 255 rows per
 * repeat). npusim's Pad and UnPad need no temporary buffer, so GetPadMaxMinTmpSize and
 * GetUnPadMaxMinTmpSize report 0 and 0 and the temporary-buffer plan stays 0.
 * A shape that is not two-dimensional, or a typeSize other than 2 or 4, leaves the tiling as it
 * was and prints a line on stderr naming why (as CANN's host checks log and return).
 */
#ifndef NPUSIM_TILING_PAD_TILING_H
#define NPUSIM_TILING_PAD_TILING_H
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "graph/tensor.h"
#include "kernel_tiling/kernel_tiling.h"
#include "tiling/platform/platform_ascendc.h"

namespace optiling {
/* CANN's tiling-data class for Struct: set_NAME / get_NAME per field, GetDataSize (the
 * struct's bytes) and SaveToBuffer (its words, in order). */
#define NPUSIM_U32_ACCESSORS(name)                                                                 \
    void set_##name(uint32_t v) { data_.name = v; }                                                \
    uint32_t get_##name() const { return data_.name; }
#define NPUSIM_TILING_DATA_CLASS(Struct, FIELDS)                                                   \
    class Struct {                                                                                 \
    public:                                                                                        \
        FIELDS(NPUSIM_U32_ACCESSORS)                                                               \
        size_t GetDataSize() const { return sizeof(::Struct); }                                    \
        void SaveToBuffer(void *buf, size_t size) const {                                          \
            std::memcpy(buf, &data_, size < sizeof data_ ? size : sizeof data_);                   \
        }                                                                                          \
        const ::Struct &Data() const { return data_; }                                             \
        ::Struct &Data() { return data_; }                                                         \
                                                                                                   \
    private:                                                                                       \
        ::Struct data_{};                                                                          \
    };
NPUSIM_TILING_DATA_CLASS(PadTiling, NPUSIM_PAD_TILING_FIELDS)
NPUSIM_TILING_DATA_CLASS(UnPadTiling, NPUSIM_UNPAD_TILING_FIELDS)
#undef NPUSIM_TILING_DATA_CLASS
#undef NPUSIM_U32_ACCESSORS
} // namespace optiling

namespace AscendC {
namespace detail {
inline bool pad_shape_ok(const char *api, const ge::Shape &shape, uint32_t typeSize) {
    if (typeSize != 2 && typeSize != 4) {
        std::fprintf(stderr, "%s (npusim): typeSize is %u; Pad and UnPad take 2- and 4-byte types\n",
                     api, typeSize);
        return false;
    }
    if (shape.GetDimNum() != 2 || shape.GetDim(0) <= 0 || shape.GetDim(1) <= 0) {
        std::fprintf(stderr, "%s (npusim): the shape has %zu dimensions; it takes height x width\n",
                     api, shape.GetDimNum());
        return false;
    }
    return true;
}
} // namespace detail

/* The temporary space Pad needs for a srcShape of typeSize elements: none on npusim. */
inline void GetPadMaxMinTmpSize(const ge::Shape &srcShape, const uint32_t typeSize,
                                uint32_t &maxValue, uint32_t &minValue) {
    if (!detail::pad_shape_ok("GetPadMaxMinTmpSize", srcShape, typeSize)) {
        return;
    }
    maxValue = 0;
    minValue = 0;
}

/* Pad's tiling: srcShape is height x width as it lies in UB (data and the columns to pad),
 * oriSrcShape the data's height x width. */
inline void PadTilingFunc(const ge::Shape srcShape, const ge::Shape oriSrcShape,
                          const uint32_t stackBufferSize, const uint32_t typeSize,
                          optiling::PadTiling &tiling) {
    (void)stackBufferSize;
    if (!detail::pad_shape_ok("PadTilingFunc", srcShape, typeSize) ||
        !detail::pad_shape_ok("PadTilingFunc", oriSrcShape, typeSize)) {
        return;
    }
    if (oriSrcShape.GetDim(1) > srcShape.GetDim(1)) {
        std::fprintf(stderr, "PadTilingFunc (npusim): oriSrcShape's width %lld is wider than "
                             "srcShape's %lld\n",
                     (long long)oriSrcShape.GetDim(1), (long long)srcShape.GetDim(1));
        return;
    }
    const uint32_t height = (uint32_t)srcShape.GetDim(0);
    const uint32_t width = (uint32_t)srcShape.GetDim(1);
    const uint32_t perBlock = 32 / typeSize;
    const uint32_t rowsPerRepeat = 255; /* a repeat count's limit */
    ::PadTiling t{};
    t.srcHeight = height;
    t.srcWidth = width;
    t.srcOriWidth = (uint32_t)oriSrcShape.GetDim(1);
    /* The aligned-width plan: the pad columns lie in each row's last 32-byte block. */
    t.widthWithoutLastBlock = width >= perBlock ? width - perBlock : 0;
    t.blocksPerRow = width * typeSize / 32;
    t.heightTiling = rowsPerRepeat;
    t.heightFractal = height / rowsPerRepeat;
    t.heightFractalTail = height % rowsPerRepeat;
    t.mainLoopOffset = rowsPerRepeat * width;
    t.tailBlockOffset = t.heightFractal * rowsPerRepeat * width + t.widthWithoutLastBlock;
    tiling.Data() = t;
}
inline void PadTilingFunc(const ge::Shape srcShape, const ge::Shape oriSrcShape,
                          const uint32_t stackBufferSize, const uint32_t typeSize,
                          ::PadTiling &tiling) {
    optiling::PadTiling data;
    data.Data() = tiling;
    PadTilingFunc(srcShape, oriSrcShape, stackBufferSize, typeSize, data);
    tiling = data.Data();
}

/* The temporary space UnPad needs: none on npusim (nor, on the 910B, with CANN's). */
inline void GetUnPadMaxMinTmpSize(const platform_ascendc::PlatformAscendC &ascendcPlatform,
                                  const ge::Shape &srcShape, const uint32_t typeSize,
                                  uint32_t &maxValue, uint32_t &minValue) {
    (void)ascendcPlatform;
    if (!detail::pad_shape_ok("GetUnPadMaxMinTmpSize", srcShape, typeSize)) {
        return;
    }
    maxValue = 0;
    minValue = 0;
}

/* UnPad's tiling: srcShape is height x width as it lies in UB. */
inline void UnPadTilingFunc(const ge::Shape srcShape, const uint32_t stackBufferSize,
                            const uint32_t typeSize, optiling::UnPadTiling &tiling) {
    (void)stackBufferSize;
    if (!detail::pad_shape_ok("UnPadTilingFunc", srcShape, typeSize)) {
        return;
    }
    ::UnPadTiling t{};
    t.srcHeight = (uint32_t)srcShape.GetDim(0);
    t.srcWidth = (uint32_t)srcShape.GetDim(1);
    tiling.Data() = t;
}
inline void UnPadTilingFunc(const ge::Shape srcShape, const uint32_t stackBufferSize,
                            const uint32_t typeSize, ::UnPadTiling &tiling) {
    optiling::UnPadTiling data;
    data.Data() = tiling;
    UnPadTilingFunc(srcShape, stackBufferSize, typeSize, data);
    tiling = data.Data();
}
} // namespace AscendC
#endif
