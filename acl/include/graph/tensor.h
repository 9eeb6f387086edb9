/*
 * graph/tensor.h — the piece of CANN's graph headers that host tiling code uses: ge::Shape, the
 * dimensions of a tensor (the Pad / UnPad tiling functions of tiling/tiling_api.h take the
 * shapes as ge::Shape). Header-only.
 */
#ifndef NPUSIM_GRAPH_TENSOR_H
#define NPUSIM_GRAPH_TENSOR_H
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ge {
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;

/* A tensor's dimensions, outermost first. */
class Shape {
public:
    Shape() = default;
    explicit Shape(const std::vector<int64_t> &dims) : dims_(dims) {}
    size_t GetDimNum() const { return dims_.size(); }
    /* Dimension idx, or 0 past the last. */
    int64_t GetDim(size_t idx) const { return idx < dims_.size() ? dims_[idx] : 0; }
    graphStatus SetDim(size_t idx, int64_t value) {
        if (idx >= dims_.size()) {
            return GRAPH_FAILED;
        }
        dims_[idx] = value;
        return GRAPH_SUCCESS;
    }
    std::vector<int64_t> GetDims() const { return dims_; }
    /* The element count: the product of the dimensions (0 for a shape with none). */
    int64_t GetShapeSize() const {
        if (dims_.empty()) {
            return 0;
        }
        int64_t n = 1;
        for (int64_t d : dims_) {
            n *= d;
        }
        return n;
    }

private:
    std::vector<int64_t> dims_;
};
} // namespace ge
#endif
