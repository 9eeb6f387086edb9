/*
 * ascendc_add.cpp — the host side of Ascend C's add_custom sample, on npusim: the kernel
 * (examples/ascendc/add_custom.cpp) is launched with ACLRT_LAUNCH_KERNEL, as a CANN kernel-
 * launch sample does, through the header and launch code scripts/npusim-ascendc.sh
 * generates. Checks z = x + y (half) against the CPU and prints the simulated time; then
 * launches the float variant whose tiling struct is a by-value parameter, passing `&tiling` as
 * a CANN sample does, and checks it.
 *
 * Build and run, from the repository root (one command):
 *     make -f examples/c/ascendc.mk run
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclrtlaunch_add_custom.h"
#include "aclrtlaunch_add_custom_tiling_f32.h"
#include "aclrtlaunch_add_custom_big_tiling.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        aclError err_ = (aclError)(call);                                                    \
        if (err_ != ACL_SUCCESS) {                                                           \
            const char *msg_ = aclGetRecentErrMsg();                                         \
            fprintf(stderr, "%s failed with %d: %s\n", #call, err_, msg_ ? msg_ : "");        \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

// The half conversions CANN's acl_base.h declares (samples' data_utils.h uses them).
static uint16_t to_half(float f) { return aclFloatToFloat16(f); }
static float to_float(uint16_t h) { return aclFloat16ToFloat(h); }

// The tiling struct add_custom_tiling_f32 takes by value (its layout in the kernel file).
struct AddTiling {
    uint32_t totalLength;
    uint32_t tileNum;
};
// The 48-byte tiling struct add_custom_big_tiling takes by value.
struct AddBigTiling {
    uint32_t totalLength;
    uint32_t tileNum;
    uint32_t reserved[6];
    float scale;
    uint64_t magic;
};

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

    // The float kernel with its tiling struct by value: 8 blocks x 2 tiles x 2 buffers of
    // n / 32 floats each.
    const size_t fbytes = n * sizeof(float);
    float *fx, *fy, *fz;
    CHECK(aclrtMallocHost((void **)&fx, fbytes));
    CHECK(aclrtMallocHost((void **)&fy, fbytes));
    CHECK(aclrtMallocHost((void **)&fz, fbytes));
    for (size_t i = 0; i < n; i++) {
        fx[i] = (float)(i % 101) * 0.25f - 3.0f;
        fy[i] = (float)(i % 7) * 1.5f;
    }
    void *dx, *dy, *dz;
    CHECK(aclrtMalloc(&dx, fbytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, fbytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dz, fbytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dx, fbytes, fx, fbytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(dy, fbytes, fy, fbytes, ACL_MEMCPY_HOST_TO_DEVICE));
    AddTiling tiling = {(uint32_t)n, 2};
    CHECK(ACLRT_LAUNCH_KERNEL(add_custom_tiling_f32)(blockDim, stream, dx, dy, dz, &tiling));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(fz, fbytes, dz, fbytes, ACL_MEMCPY_DEVICE_TO_HOST));
    size_t fbad = 0;
    for (size_t i = 0; i < n; i++) {
        if (fz[i] != fx[i] + fy[i]) {
            if (fbad++ < 5) fprintf(stderr, "float z[%zu] = %g\n", i, fz[i]);
        }
    }
    printf("add_custom_tiling_f32 (float, tiling {%u, %u} by value): %s\n", tiling.totalLength,
           tiling.tileNum, fbad ? "WRONG" : "correct");
    bad += fbad;

    // A 48-byte tiling struct by value (LP64F: by reference to a copy the launcher places in
    // device memory): first half the vector, then the whole, so the second launch's struct
    // must replace the first's.
    CHECK(aclrtMemset(dz, fbytes, 0, fbytes));
    for (int round = 0; round < 2; round++) {
        AddBigTiling big = {};
        big.totalLength = round == 0 ? (uint32_t)(n / 2) : (uint32_t)n;
        big.tileNum = round == 0 ? 1 : 2;
        big.scale = 1.0f;
        big.magic = 0x5eed5eed5eed5eedULL;
        CHECK(ACLRT_LAUNCH_KERNEL(add_custom_big_tiling)(blockDim, stream, dx, dy, dz, &big));
        CHECK(aclrtSynchronizeStream(stream));
        CHECK(aclrtMemcpy(fz, fbytes, dz, fbytes, ACL_MEMCPY_DEVICE_TO_HOST));
        // add_custom_big_tiling splits totalLength over the blocks from the start of x, y, z.
        size_t done = big.totalLength, bbad = 0;
        for (size_t i = 0; i < n; i++) {
            float want = i < done ? fx[i] + fy[i] : 0.0f;
            if (fz[i] != want && bbad++ < 5) {
                fprintf(stderr, "big tiling round %d: z[%zu] = %g\n", round, i, fz[i]);
            }
        }
        printf("add_custom_big_tiling (48-byte tiling {%u, %u} by value): %s\n", big.totalLength,
               big.tileNum, bbad ? "WRONG" : "correct");
        bad += bbad;
    }
    CHECK(aclrtFree(dx));
    CHECK(aclrtFree(dy));
    CHECK(aclrtFree(dz));
    CHECK(aclrtFreeHost(fx));
    CHECK(aclrtFreeHost(fy));
    CHECK(aclrtFreeHost(fz));

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
