/*
 * ascendc_chevron.cpp — the host side of a CANN kernel-invocation sample, in the shape Huawei's
 * samples give it: one main.cpp for both builds.
 *  - The NPU build launches through the kernel file's own `<<<>>>` wrapper: it declares
 *    add_chevron_do as such samples' main.cpp does and calls it; scripts/npusim-ascendc.sh
 *    compiled the wrapper for the host.
 *  - The CPU twin-debug build (ASCENDC_CPU_DEBUG) uses tikicpulib.h: AscendC::GmAlloc memory
 *    and ICPU_RUN_KF; on npusim the kernel still runs on the simulated NPU.
 * Both check z = x + y (float) against the CPU.
 *
 * Build and run, from the repository root (one command each):
 *     make -f examples/c/ascendc.mk KERNEL=examples/ascendc/add_chevron.cpp STEM=add_chevron \
 *         MAIN=examples/c/ascendc_chevron.cpp run
 *     make -f examples/c/ascendc.mk KERNEL=examples/ascendc/add_chevron.cpp STEM=add_chevron \
 *         MAIN=examples/c/ascendc_chevron.cpp RUN_MODE=cpu run
 */
#include <stdint.h>
#include <stdio.h>

#include "tiling/platform/platform_ascendc.h"
#ifndef ASCENDC_CPU_DEBUG
#include "acl/acl.h"
extern void add_chevron_do(uint32_t blockDim, void *l2ctrl, void *stream, uint8_t *x,
                           uint8_t *y, uint8_t *z, uint32_t n);
#else
#include "tikicpulib.h"
extern "C" __global__ __aicore__ void add_chevron(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t n);
#endif

#define CHECK(call)                                                                          \
    do {                                                                                     \
        aclError err_ = (aclError)(call);                                                    \
        if (err_ != ACL_SUCCESS) {                                                           \
            fprintf(stderr, "%s failed with %d\n", #call, err_);                             \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

static uint32_t check(const float *hx, const float *hy, const float *hz, uint32_t n) {
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (hz[i] != hx[i] + hy[i] && bad++ < 5) fprintf(stderr, "z[%u] = %g\n", i, hz[i]);
    }
    return bad;
}

int main() {
    // The platform a host tiling function sees (before aclInit, as samples ask it): 8 blocks,
    // or fewer on a device with fewer vector cores.
    platform_ascendc::PlatformAscendC *platform =
        platform_ascendc::PlatformAscendCManager::GetInstance();
    uint64_t ub = 0;
    platform->GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    uint32_t cores = platform->GetCoreNumAiv();
    if (cores == 0 || ub == 0) {
        fprintf(stderr, "the platform API reports no vector cores or no UB\n");
        return 1;
    }
    printf("platform: %u AIC, %u AIV cores, %llu bytes of UB\n", platform->GetCoreNumAic(), cores,
           (unsigned long long)ub);
    const uint32_t blockDim = cores < 8 ? cores : 8;
    const uint32_t n = 8 * 1024;
    const size_t bytes = n * sizeof(float);
#ifdef ASCENDC_CPU_DEBUG
    float *x = (float *)AscendC::GmAlloc(bytes);
    float *y = (float *)AscendC::GmAlloc(bytes);
    float *z = (float *)AscendC::GmAlloc(bytes);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = (float)(i % 31) * 0.5f;
        y[i] = (float)(i % 17) - 4.0f;
    }
    AscendC::SetKernelMode(KernelMode::AIV_MODE);
    ICPU_RUN_KF(add_chevron, blockDim, (uint8_t *)x, (uint8_t *)y, (uint8_t *)z, n);
    uint32_t bad = check(x, y, z, n);
    printf("add_chevron (float, %u elements, %u blocks, ICPU_RUN_KF): %s\n", n, blockDim,
           bad ? "WRONG" : "correct");
    AscendC::GmFree(x);
    AscendC::GmFree(y);
    AscendC::GmFree(z);
    return bad ? 1 : 0;
#else
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    float *hx, *hy, *hz;
    CHECK(aclrtMallocHost((void **)&hx, bytes));
    CHECK(aclrtMallocHost((void **)&hy, bytes));
    CHECK(aclrtMallocHost((void **)&hz, bytes));
    for (uint32_t i = 0; i < n; i++) {
        hx[i] = (float)(i % 31) * 0.5f;
        hy[i] = (float)(i % 17) - 4.0f;
    }
    void *x, *y, *z;
    CHECK(aclrtMalloc(&x, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&y, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&z, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(x, bytes, hx, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(y, bytes, hy, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    add_chevron_do(blockDim, nullptr, stream, (uint8_t *)x, (uint8_t *)y, (uint8_t *)z, n);
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(hz, bytes, z, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    uint32_t bad = check(hx, hy, hz, n);
    printf("add_chevron_do (float, %u elements, %u blocks, <<<>>> launch): %s\n", n, blockDim,
           bad ? "WRONG" : "correct");
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
#endif
}
