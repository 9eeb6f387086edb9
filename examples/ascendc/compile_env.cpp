/*
 * compile_env.cpp — the compile environment a CANN kernel file relies on: the mode macros, the
 * freestanding C++ headers (every one npusim offers, checked at compile time), the low-level intrinsic spellings, dcci and the LocalTensor
 * operators. Built in both of CANN's modes (the committed object is the NPU build;
 * tests/ascendc_host.rs builds the --cpu-debug one and other architectures).
 *
 *   compile_env(GM_ADDR out)                 out[0..8) the macros and limits; out[8 + b] = b + 1
 *                                            from every block b (get_block_idx spelling)
 *   std_math(GM_ADDR x, GM_ADDR y, n)        y[k * n + i] = the k-th <cmath> function of x[i]
 *   tensor_operators(GM_ADDR a, GM_ADDR b, GM_ADDR out)
 *                                            out = the operator shorthand on 256 floats, ordered
 *                                            with set_flag / wait_flag / pipe_barrier
 */
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <math.h>
#include <type_traits>
#include <utility>

#include "kernel_operator.h"

using namespace AscendC;

static_assert(std::is_same_v<std::int32_t, int32_t>, "<cstdint>");
static_assert(std::is_integral_v<std::uint16_t> && !std::is_integral_v<float>, "<type_traits>");
static_assert(std::is_floating_point<float>::value && std::is_signed_v<int8_t>, "<type_traits>");
static_assert(std::is_same_v<std::make_unsigned_t<int32_t>, uint32_t>, "<type_traits>");
static_assert(std::is_same_v<std::conditional_t<true, half, float>, half>, "<type_traits>");
static_assert(std::numeric_limits<int16_t>::max() == 32767, "<limits>");
static_assert(std::numeric_limits<float>::digits == 24, "<limits>");
static_assert(std::max(3, 7) == 7 && std::min<uint32_t>(3, 7) == 3, "<algorithm>");
static_assert(sizeof(std::size_t) == 8 && std::is_same_v<std::nullptr_t, decltype(nullptr)>,
              "<cstddef>");
static_assert(INT_MAX == 2147483647 && CHAR_BIT == 8, "<climits>");
static_assert(FLT_MAX == std::numeric_limits<float>::max() && FLT_MANT_DIG == 24, "<cfloat>");
static_assert(std::abs(-7) == 7 && std::abs(-7LL) == 7, "<cstdlib>");
constexpr int swapped() {
    std::pair<int, int> p = std::make_pair(1, 2);
    std::swap(p.first, p.second);
    int old = std::exchange(p.second, 5);
    return p.first * 10 + old + p.second * 100;
}
static_assert(swapped() == 521, "<utility>");
static_assert(std::is_same_v<decltype(sqrtf(2.0f)), float>, "<math.h>");

#ifdef __CCE_AICORE__
constexpr int32_t AICORE = __CCE_AICORE__;
#else
constexpr int32_t AICORE = -1;
#endif

extern "C" __global__ __aicore__ void compile_env(GM_ADDR out) {
    __gm__ int32_t *o = (__gm__ int32_t *)out;
    if (get_block_idx() == 0) {
        o[0] = AICORE;
#ifdef __DAV_C220_VEC__
        o[1] = 1;
#endif
#ifdef __DAV_C220_CUBE__
        o[2] = 1;
#endif
#ifdef __CCE_KT_TEST__
        o[3] = 1;
#endif
#ifdef ASCENDC_CPU_DEBUG
        o[4] = 1;
#endif
        o[5] = (int32_t)get_block_num();
        o[6] = std::numeric_limits<int32_t>::min();
        o[7] = (int32_t)std::numeric_limits<uint8_t>::max();
    }
    o[8 + get_block_idx()] = (int32_t)get_block_idx() + 1;
    dcci(o, cache_line_t::ENTIRE_DATA_CACHE, dcci_dst_t::CACHELINE_OUT);
    GlobalTensor<int32_t> g;
    g.SetGlobalBuffer(o, 64);
    DataCacheCleanAndInvalid<int32_t, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(g);
}

/* The <cmath> functions, in this order, on every x[i] of this block's share of n. */
constexpr uint32_t STD_MATH_FUNCTIONS = 16;

extern "C" __global__ __aicore__ void std_math(GM_ADDR x, GM_ADDR y, uint32_t n) {
    const __gm__ float *in = (const __gm__ float *)x;
    __gm__ float *res = (__gm__ float *)y;
    uint32_t per = (n + get_block_num() - 1) / get_block_num();
    uint32_t lo = per * get_block_idx();
    uint32_t hi = std::min(n, lo + per);
    for (uint32_t i = lo; i < hi; i++) {
        float v = in[i];
        float r[STD_MATH_FUNCTIONS] = {
            std::exp(v),   std::log(v),   std::sqrt(v),       std::exp2(v),
            std::log2(v),  std::log10(v), std::floor(v),      std::ceil(v),
            std::round(v), std::trunc(v), std::rint(v),       std::fabs(v),
            std::pow(v, 2.0f), std::pow(v, 0.75f), std::fmin(v, 1.0f), std::fma(v, v, 1.0f),
        };
        for (uint32_t k = 0; k < STD_MATH_FUNCTIONS; k++) {
            res[k * n + i] = r[k];
        }
    }
}

extern "C" __global__ __aicore__ void tensor_operators(GM_ADDR a, GM_ADDR b, GM_ADDR out) {
    constexpr uint32_t N = 256;
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 8 * N * sizeof(float));
    LocalTensor<float> all = buf.Get<float>();
    LocalTensor<float> ta = all[0], tb = all[N];
    LocalTensor<float> r[6] = {all[2 * N], all[3 * N], all[4 * N], all[5 * N], all[6 * N], all[7 * N]};
    for (LocalTensor<float> &t : r) {
        t.SetSize(N);
    }
    GlobalTensor<float> ga, gb, go;
    ga.SetGlobalBuffer((__gm__ float *)a, N);
    gb.SetGlobalBuffer((__gm__ float *)b, N);
    go.SetGlobalBuffer((__gm__ float *)out, 6 * N);
    DataCopy(ta, ga, N);
    DataCopy(tb, gb, N);
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    r[0] = ta * tb;
    r[1] = r[0] + 1.5f;
    r[2] = r[1] - ta;
    r[3] = 2.0f * r[2];
    r[4] = r[3] / tb;
    r[5] = r[4] - 0.25f;
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID1);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID1);
    DataCopy(go, r[0], 6 * N);
    pipe_barrier(PIPE_ALL);
}

#ifndef ASCENDC_CPU_DEBUG
// The sample's host wrapper: host code in the NPU build (compiled out of the device object).
void compile_env_do(uint32_t blockDim, void *l2ctrl, void *stream, uint8_t *out) {
    compile_env<<<blockDim, l2ctrl, stream>>>(out);
}
#endif
