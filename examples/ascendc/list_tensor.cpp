/*
 * list_tensor.cpp — a kernel that takes a list of tensors as one argument (ListTensorDesc /
 * TensorDesc, kernel_operator_list_tensor_intf.h), as AddN-style operators do.
 *
 *   list_probe(list, out, count)   for each of `count` tensors writes 4 words to `out`: its
 *                                  dimension count, index, element count (the product of its
 *                                  shape) and the bits of its last float element
 *   list_past_end(list, out)       asks a 2-tensor list for tensor 2 (the block aborts)
 */
#include "kernel_operator.h"
#include "kernel_operator_list_tensor_intf.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void list_probe(GM_ADDR list, GM_ADDR out, uint32_t count) {
    ListTensorDesc l((__gm__ void *)list, 0xffffffffu, count);
    GlobalTensor<uint64_t> o;
    o.SetGlobalBuffer((__gm__ uint64_t *)out, 4 * count);
    for (uint32_t t = 0; t < l.GetSize(); t++) {
        uint64_t shape[4] = {0};
        TensorDesc<float> d;
        d.SetShapeAddr(shape);
        l.GetDesc(d, t);
        GlobalTensor<float> data = d.GetDataObj();
        uint64_t n = 1;
        for (uint32_t i = 0; i < d.GetDim(); i++) {
            n *= d.GetShape(i);
        }
        float last = data.GetValue(n - 1);
        o.SetValue(4 * t, d.GetDim());
        o.SetValue(4 * t + 1, d.GetIndex());
        o.SetValue(4 * t + 2, n);
        o.SetValue(4 * t + 3, npusim_detail::f32_bits(last));
        if (l.GetDataPtr<float>(t) != d.GetDataPtr()) {
            o.SetValue(4 * t, 0xdead);
        }
    }
}

extern "C" __global__ __aicore__ void list_past_end(GM_ADDR list, GM_ADDR out) {
    (void)out;
    ListTensorDesc l((__gm__ void *)list, 0xffffffffu, 2);
    (void)l.GetDataPtr<float>(2);
}
