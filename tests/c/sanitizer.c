/*
 * sanitizer.c — run with NPUSIM_SANITIZE=report or error. Stream s1 copies a into da; stream
 * s2 runs c = a + b on da with no event between (the bug), then the same again with an event
 * recorded on s1 and waited for on s2 (the fix). Under `report` every call succeeds and the
 * sanitizer prints one race report (naming aclrtMemcpyAsync and aclrtLaunchKernel and their
 * call numbers) and, at aclFinalize, the count; under `error` the racing kernel fails with
 * ACL_ERROR_RT_DEVICE_MEM_ERROR, reported at s2's synchronize, and the fixed round succeeds.
 *
 * Usage: sanitizer [kernels-dir]
 */
#include <string.h>

#include "check.h"

enum { N = 4096 };

int main(int argc, char **argv) {
    const char *mode = getenv("NPUSIM_SANITIZE");
    int error_mode = mode && strcmp(mode, "error") == 0;
    const size_t bytes = N * sizeof(float);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));

    float *ha;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    for (size_t i = 0; i < N; i++) ha[i] = (float)i;
    void *da, *db, *dc;
    CHECK(aclrtMalloc(&da, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&db, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dc, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(db, bytes, 0, bytes));

    /* The bug: nothing orders s2's kernel after s1's copy. */
    CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    VaddArgs args = {da, db, dc, N};
    CHECK(aclrtLaunchKernel(vadd, 2, &args, sizeof args, s2));
    CHECK(aclrtSynchronizeStream(s1));
    if (error_mode) {
        EXPECT_CODE(aclrtSynchronizeStream(s2), ACL_ERROR_RT_DEVICE_MEM_ERROR);
    } else {
        CHECK(aclrtSynchronizeStream(s2));
    }

    /* The fix: an event recorded after the copy, waited for before the kernel. */
    aclrtEvent copied;
    CHECK(aclrtCreateEvent(&copied));
    CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtRecordEvent(copied, s1));
    CHECK(aclrtStreamWaitEvent(s2, copied));
    CHECK(aclrtLaunchKernel(vadd, 2, &args, sizeof args, s2));
    CHECK(aclrtSynchronizeStream(s2));
    float *hc;
    CHECK(aclrtMallocHost((void **)&hc, bytes));
    CHECK(aclrtMemcpy(hc, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < N; i++) EXPECT(hc[i] == (float)i);

    CHECK(aclrtFree(da));
    CHECK(aclrtFree(db));
    CHECK(aclrtFree(dc));
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hc));
    CHECK(aclrtDestroyEvent(copied));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("sanitizer: ok\n");
    return 0;
}
