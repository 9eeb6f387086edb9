/*
 * kernel_operator_list_tensor_intf.h — Ascend C's ListTensorDesc / TensorDesc: a kernel that
 * takes a list of tensors as one GM argument (AddN, concat) reads their shapes and data
 * pointers from a descriptor the host lays out as CANN does, in 64-bit words:
 *
 *   word 0                 ptrOffset: the byte offset of the data-pointer array
 *   then, per tensor       one word `dim | index << 32`, then `dim` words of shape
 *   at ptrOffset           one data pointer per tensor
 *
 * GetDesc(desc, i) fills the i-th tensor's description (its shape into the buffer given with
 * SetShapeAddr); GetDataPtr<T>(i) is the i-th data pointer. An index past the list aborts the
 * block with a message.
 */
#ifndef NPUSIM_ASCENDC_LIST_TENSOR_INTF_H
#define NPUSIM_ASCENDC_LIST_TENSOR_INTF_H

#include "kernel_operator.h"

namespace AscendC {

/* One tensor of a list: its dimension count, index, shape (into a buffer the kernel provides)
 * and data. */
template <typename T> class TensorDesc {
public:
    __aicore__ inline TensorDesc() : dim_(0), index_(0), shape_(nullptr), data_(nullptr) {}
    /* Where GetDesc writes the shape (room for the tensor's dimension count). */
    __aicore__ inline void SetShapeAddr(uint64_t *shapePtr) { shape_ = shapePtr; }
    __aicore__ inline uint64_t GetDim() const { return dim_; }
    __aicore__ inline uint64_t GetIndex() const { return index_; }
    __aicore__ inline uint64_t GetShape(uint32_t offset) const {
        if (shape_ == nullptr || offset >= dim_) {
            detail::fail("TensorDesc::GetShape: the dimension is past the tensor's, or no "
                         "SetShapeAddr buffer was given");
        }
        return shape_[offset];
    }
    __aicore__ inline __gm__ T *GetDataPtr() const { return data_; }
    __aicore__ inline GlobalTensor<T> GetDataObj() const {
        GlobalTensor<T> g;
        uint64_t n = 1;
        for (uint32_t i = 0; i < dim_ && shape_ != nullptr; i++) {
            n *= shape_[i];
        }
        g.SetGlobalBuffer(data_, n);
        return g;
    }

private:
    friend class ListTensorDesc;
    uint32_t dim_;
    uint32_t index_;
    uint64_t *shape_;
    __gm__ T *data_;
};

/* The list: `data` is the descriptor in GM, `length` its size in bytes and `count` its number
 * of tensors (0xffffffff: not checked). */
class ListTensorDesc {
public:
    __aicore__ inline ListTensorDesc() : data_(nullptr), length_(0xffffffffu), count_(0xffffffffu) {}
    __aicore__ inline ListTensorDesc(__gm__ void *data, uint32_t length = 0xffffffffu,
                                     uint32_t count = 0xffffffffu) {
        Init(data, length, count);
    }
    __aicore__ inline void Init(__gm__ void *data, uint32_t length = 0xffffffffu,
                                uint32_t count = 0xffffffffu) {
        data_ = (__gm__ uint64_t *)data;
        length_ = length;
        count_ = count;
    }
    /* Fills `desc` with tensor `index`: dimension count, index, shape, data pointer. */
    template <typename T> __aicore__ inline void GetDesc(TensorDesc<T> &desc, uint32_t index) {
        uint32_t at = Find(index);
        uint64_t head = Word(at);
        desc.dim_ = (uint32_t)head;
        desc.index_ = (uint32_t)(head >> 32);
        for (uint32_t i = 0; i < desc.dim_ && desc.shape_ != nullptr; i++) {
            desc.shape_[i] = Word(at + 1 + i);
        }
        desc.data_ = GetDataPtr<T>(index);
    }
    /* The data pointer of tensor `index`. */
    template <typename T> __aicore__ inline __gm__ T *GetDataPtr(uint32_t index) {
        Check(index);
        uint64_t off = Word(0);
        if (off % 8 != 0) {
            detail::fail("ListTensorDesc: ptrOffset is not a multiple of 8 bytes");
        }
        return (__gm__ T *)Word((uint32_t)(off / 8) + index);
    }
    /* The number of tensors, as given at construction. */
    __aicore__ inline uint32_t GetSize() const { return count_; }

private:
    __aicore__ inline void Check(uint32_t index) const {
        if (count_ != 0xffffffffu && index >= count_) {
            detail::fail("ListTensorDesc: the tensor index is past the list");
        }
    }
    /* Word `i` of the descriptor, inside `length`. */
    __aicore__ inline uint64_t Word(uint32_t i) const {
        if (length_ != 0xffffffffu && (uint64_t)(i + 1) * 8 > length_) {
            detail::fail("ListTensorDesc: a read past the descriptor's length");
        }
        return npusim_detail::volatile_load((const uint64_t *)(data_ + i));
    }
    /* The word index of tensor `index`'s head word. */
    __aicore__ inline uint32_t Find(uint32_t index) const {
        Check(index);
        uint32_t at = 1;
        for (uint32_t i = 0; i < index; i++) {
            at += 1 + (uint32_t)Word(at);
        }
        return at;
    }
    __gm__ uint64_t *data_;
    uint32_t length_;
    uint32_t count_;
};

} // namespace AscendC

#endif /* NPUSIM_ASCENDC_LIST_TENSOR_INTF_H */
