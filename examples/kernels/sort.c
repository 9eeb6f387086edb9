/*
 * sort.c — in-place sorting and a switch-based classifier.
 *
 * Besides being useful, these kernels exercise the loader: the gap table is a constant array in
 * .rodata, the call counter a static in .sbss, the version word initialised data in .sdata, and
 * the classifier's `switch` compiles to a jump table of code addresses in .rodata. Every one of
 * them needs a relocation against another section. build-kernels.sh compiles this file twice,
 * with -mcmodel=medany (sort.o) and -mcmodel=medlow (sort_medlow.o), so both addressing
 * models are tested.
 */
#include "npusim.h"

/* Shell sort gaps (Ciura's sequence), largest first. */
static const uint32_t SORT_GAPS[] = {701, 301, 132, 57, 23, 10, 4, 1};

/* How many times sort_i32 has run since the binary was loaded (shared by all launches). */
static uint64_t sort_calls;

/* A non-zero initialised global, so the binary has a .sdata section the loader must copy. */
int32_t sort_version = 3;

/*
 * sort_i32(data, n): sorts data[0..n) ascending, in place (Shell sort, not stable).
 * Sorting is not split across blocks: only block 0 works, the others return at once.
 *   a0 data: int32_t*  the array
 *   a1 n:    uint64_t  number of elements
 */
NPU_KERNEL void sort_i32(int32_t *data, uint64_t n) {
    if (npu_block_idx() != 0) {
        return;
    }
    sort_calls++;
    for (size_t g = 0; g < sizeof SORT_GAPS / sizeof SORT_GAPS[0]; g++) {
        uint64_t gap = SORT_GAPS[g];
        for (uint64_t i = gap; i < n; i++) {
            int32_t v = data[i];
            uint64_t j = i;
            while (j >= gap && data[j - gap] > v) {
                data[j] = data[j - gap];
                j -= gap;
            }
            data[j] = v;
        }
    }
}

/*
 * sort_stats(out): out[0] = number of sort_i32 calls so far, out[1] = sort_version.
 *   a0 out: uint64_t*  two words
 */
NPU_KERNEL void sort_stats(uint64_t *out) {
    if (npu_block_idx() != 0) {
        return;
    }
    out[0] = sort_calls;
    out[1] = (uint64_t)sort_version;
}

/* Not inlined, so its switch stays a jump table in its own function. */
__attribute__((noinline)) static int32_t classify_one(int32_t v) {
    switch (v & 7) {
    case 0:
        return v / 8;
    case 1:
        return v * 3 + 1;
    case 2:
        return -v;
    case 3:
        return v ^ 0x55;
    case 4:
        return v << 2;
    case 5:
        return v - 1000;
    case 6:
        return v >> 1;
    default:
        return 7;
    }
}

/*
 * classify_i32(in, out, n): out[i] = f(in[i]) where f depends on in[i] & 7 (see classify_one).
 * Each block handles its own slice.
 *   a0 in:  const int32_t*  input, n values
 *   a1 out: int32_t*        output, n values
 *   a2 n:   uint64_t        number of elements
 */
NPU_KERNEL void classify_i32(const int32_t *in, int32_t *out, uint64_t n) {
    uint64_t begin, end;
    npu_block_range(n, &begin, &end);
    for (uint64_t i = begin; i < end; i++) {
        out[i] = classify_one(in[i]);
    }
}
