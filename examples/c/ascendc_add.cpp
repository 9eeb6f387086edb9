/*
 * ascendc_add.cpp — the host side of Ascend C's add_custom sample, on npusim: the kernel
 * (examples/ascendc/add_custom.cpp) is launched with ACLRT_LAUNCH_KERNEL, as a CANN kernel-
 * launch sample does, through the header and launch code scripts/npusim-ascendc.sh
 * generates. Checks z = x + y (half) against the CPU and prints the simulated time.
 *
 * Build and run, from the repository root (one command):
 *     make -f examples/c/ascendc.mk run
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclrtlaunch_add_custom.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        aclError err_ = (aclError)(call);                                                    \
        if (err_ != ACL_SUCCESS) {                                                           \
            const char *msg_ = aclGetRecentErrMsg();                                         \
            fprintf(stderr, "%s failed with %d: %s\n", #call, err_, msg_ ? msg_ : "");        \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

// IEEE half <-> float on the host (round to nearest even), for the inputs and the check.
static uint16_t to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t e = (int32_t)((x >> 23) & 0xff) - 112;
    uint32_t man = x & 0x7fffff;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        uint32_t m = man | 0x800000, shift = (uint32_t)(14 - e);
        uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        return (uint16_t)(sign | (kept + (rest > half || (rest == half && (kept & 1)))));
    }
    uint32_t kept = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fff;
    return (uint16_t)(sign | (kept + (rest > 0x1000 || (rest == 0x1000 && (kept & 1)))));
}
static float to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        float v = (float)m / 16777216.0f;
        return sign ? -v : v;
    }
    bits = e == 31 ? sign | 0x7f800000 | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int main() {
    const uint32_t blockDim = 8;
    const size_t n = 8 * 2048;
    const size_t bytes = n * sizeof(uint16_t);

    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));

    uint16_t *hx, *hy, *hz;
    CHECK(aclrtMallocHost((void **)&hx, bytes));
    CHECK(aclrtMallocHost((void **)&hy, bytes));
    CHECK(aclrtMallocHost((void **)&hz, bytes));
    for (size_t i = 0; i < n; i++) {
        hx[i] = to_half((float)(i % 97) * 0.37f - 9.0f);
        hy[i] = to_half((float)(i % 13) * 1.75f);
    }
    void *x, *y, *z;
    CHECK(aclrtMalloc(&x, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&y, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&z, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(x, bytes, hx, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(y, bytes, hy, bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    aclrtEvent start, end;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEvent(&end));
    CHECK(aclrtRecordEvent(start, stream));
    CHECK(ACLRT_LAUNCH_KERNEL(add_custom)(blockDim, stream, x, y, z));
    CHECK(aclrtRecordEvent(end, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(hz, bytes, z, bytes, ACL_MEMCPY_DEVICE_TO_HOST));

    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (hz[i] != to_half(to_float(hx[i]) + to_float(hy[i]))) {
            if (bad++ < 5) fprintf(stderr, "z[%zu] = %#06x\n", i, hz[i]);
        }
    }
    float ms = 0;
    CHECK(aclrtEventElapsedTime(&ms, start, end));
    printf("add_custom (half, %zu elements, %u blocks): %s, %.2f us simulated\n", n, blockDim,
           bad ? "WRONG" : "correct", ms * 1000.0f);

    CHECK(aclrtFree(x));
    CHECK(aclrtFree(y));
    CHECK(aclrtFree(z));
    CHECK(aclrtFreeHost(hx));
    CHECK(aclrtFreeHost(hy));
    CHECK(aclrtFreeHost(hz));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return bad ? 1 : 0;
}
