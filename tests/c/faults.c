/*
 * faults.c — a kernel that faults (null_deref in examples/kernels/faults.o: a load from
 * address 0) in one context while a vector add in another context of the same device runs to
 * completion. The fault comes back at synchronize as ACL_ERROR_RT_AICORE_EXCEPTION, and to the
 * exception callback; the other context never notices.
 *  - Context A is in ACL_STOP_ON_FAILURE: the fault aborts its queued work and leaves a sticky
 *    error its later calls return.
 *  - Context C is in the default ACL_CONTINUE_ON_FAILURE: only the faulting task fails; the
 *    kernel after it on the same stream runs, and the context stays usable.
 *
 * Usage: faults [kernels-dir]
 */
#include <string.h>

#include "check.h"

enum { N = 65536 };

static int exceptions;
static uint32_t last_code, last_device, last_task, last_stream;

static void on_exception(aclrtExceptionInfo *info) {
    exceptions++;
    last_code = aclrtGetErrorCodeFromExceptionInfo(info);
    last_device = aclrtGetDeviceIdFromExceptionInfo(info);
    last_task = aclrtGetTaskIdFromExceptionInfo(info);
    last_stream = aclrtGetStreamIdFromExceptionInfo(info);
    EXPECT(aclrtGetThreadIdFromExceptionInfo(info) != 0xFFFFFFFFu);
}

int main(int argc, char **argv) {
    const size_t bytes = N * sizeof(float);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetExceptionInfoCallback(on_exception));
    EXPECT(aclrtGetErrorCodeFromExceptionInfo(NULL) == 0xFFFFFFFFu);

    /* Context B: a long vector add. */
    aclrtContext b;
    CHECK(aclrtCreateContext(&b, 0));
    aclrtStream sb;
    CHECK(aclrtCreateStream(&sb));
    aclrtBinHandle bin_b;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin_b));
    aclrtFuncHandle vadd_b;
    CHECK(aclrtBinaryGetFunction(bin_b, "vadd_f32", &vadd_b));
    float *ha, *hc;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&hc, bytes));
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)i;
    }
    void *da, *dc;
    CHECK(aclrtMalloc(&da, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dc, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, sb));
    VaddArgs args_b = {da, da, dc, N};
    CHECK(aclrtLaunchKernel(vadd_b, 2, &args_b, sizeof args_b, sb));
    CHECK(aclrtMemcpyAsync(hc, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST, sb));

    /* Context A, stop-on-failure: a faulting kernel, then work that must not run. */
    aclrtContext a;
    CHECK(aclrtCreateContext(&a, 0));
    aclrtStream sa;
    CHECK(aclrtCreateStream(&sa));
    CHECK(aclrtSetStreamFailureMode(sa, ACL_STOP_ON_FAILURE));
    aclrtBinHandle faults_a;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "faults.o"), NULL, &faults_a));
    aclrtFuncHandle null_deref;
    CHECK(aclrtBinaryGetFunction(faults_a, "null_deref", &null_deref));
    void *buf_a;
    CHECK(aclrtMalloc(&buf_a, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtLaunchKernel(null_deref, 1, NULL, 0, sa));
    CHECK(aclrtMemsetAsync(buf_a, 4096, 1, 4096, sa));

    /* A's fault comes back at its synchronize, with its code. */
    EXPECT_CODE(aclrtSynchronizeStream(sa), ACL_ERROR_RT_AICORE_EXCEPTION);
    const char *msg = aclGetRecentErrMsg();
    EXPECT(msg != NULL && strstr(msg, "aclrtSynchronizeStream") != NULL);
    EXPECT(aclGetRecentErrMsg() == NULL); /* read once */
    EXPECT(exceptions >= 1 && last_code == ACL_ERROR_RT_AICORE_EXCEPTION && last_device == 0);
    EXPECT(last_task == 1 && last_stream != 0);
    /* Sticky: A's later calls fail with it. */
    void *p;
    EXPECT_CODE(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_AICORE_EXCEPTION);
    EXPECT_CODE(aclrtSynchronizeStream(sa), ACL_ERROR_RT_AICORE_EXCEPTION);

    /* B finishes, correct, as if nothing happened. */
    CHECK(aclrtSetCurrentContext(b));
    CHECK(aclrtSynchronizeStream(sb));
    for (size_t i = 0; i < N; i++) {
        if (hc[i] != 2.0f * (float)i) {
            fprintf(stderr, "context B: c[%zu] = %f, expected %f\n", i, hc[i], 2.0f * (float)i);
            return 1;
        }
    }
    CHECK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(p));

    /* Context C, continue-on-failure (the default): the fault fails its task alone. */
    aclrtContext c;
    CHECK(aclrtCreateContext(&c, 0));
    aclrtStream sc;
    CHECK(aclrtCreateStream(&sc));
    aclrtBinHandle bin_c, faults_c;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin_c));
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "faults.o"), NULL, &faults_c));
    aclrtFuncHandle vadd_c, null_deref_c;
    CHECK(aclrtBinaryGetFunction(bin_c, "vadd_f32", &vadd_c));
    CHECK(aclrtBinaryGetFunction(faults_c, "null_deref", &null_deref_c));
    /* (A function handle of context A may be launched here too, as ACL allows on the same
     * device: see kernel_args.c.) */
    void *dc_a, *dc_c;
    CHECK(aclrtMalloc(&dc_a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dc_c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpyAsync(dc_a, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, sc));
    CHECK(aclrtLaunchKernel(null_deref_c, 1, NULL, 0, sc));
    VaddArgs args_c = {dc_a, dc_a, dc_c, N};
    CHECK(aclrtLaunchKernel(vadd_c, 4, &args_c, sizeof args_c, sc));
    memset(hc, 0, bytes);
    CHECK(aclrtMemcpyAsync(hc, bytes, dc_c, bytes, ACL_MEMCPY_DEVICE_TO_HOST, sc));
    int before = exceptions;
    EXPECT_CODE(aclrtSynchronizeStream(sc), ACL_ERROR_RT_AICORE_EXCEPTION);
    EXPECT(exceptions == before + 1 && last_task == 2);
    EXPECT(hc[N - 1] == 2.0f * (float)(N - 1)); /* the kernel after the fault ran */
    CHECK(aclrtSynchronizeStream(sc));            /* the error was reported once */
    CHECK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST)); /* and nothing is sticky */
    CHECK(aclrtFree(p));

    CHECK(aclrtDestroyContext(c));
    CHECK(aclrtDestroyContext(a)); /* a faulted context can still be destroyed */
    CHECK(aclrtSetCurrentContext(b));
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hc));
    CHECK(aclrtDestroyContext(b));
    CHECK(aclrtSetExceptionInfoCallback(NULL));
    CHECK(aclFinalize());
    printf("faults: ok (%d exceptions reported)\n", exceptions);
    return 0;
}
