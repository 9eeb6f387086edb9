/*
 * fault_cleanup.c — the shape of CANN's callback_exception sample: a report thread, a stream
 * in ACL_STOP_ON_FAILURE, a kernel that faults. The exception callback learns the failing
 * task, its function handle and its arguments; aclrtGetErrorVerbose and
 * aclrtGetThreadLastTaskId agree. Then the cleanup a program does after a failure works, as in
 * ACL: aclrtFree, aclrtDestroyStream, aclrtUnSubscribeReport, aclrtBinaryUnLoad and
 * aclrtDestroyContext succeed; only work on the failed context reports the error.
 *
 * Usage: fault_cleanup [kernels-dir]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

static atomic_int stop;
static atomic_int callbacks;
static aclrtFuncHandle seen_func;
static uint32_t seen_args_len, seen_task, seen_code;
static int32_t seen_divisor = -1;

static void on_exception(aclrtExceptionInfo *info) {
    seen_code = aclrtGetErrorCodeFromExceptionInfo(info);
    seen_task = aclrtGetTaskIdFromExceptionInfo(info);
    void *args = NULL;
    if (aclrtGetArgsFromExceptionInfo(info, &args, &seen_args_len) == ACL_SUCCESS && args) {
        seen_divisor = (int32_t)((const uint64_t *)args)[0];
    }
    if (aclrtGetFuncHandleFromExceptionInfo(info, &seen_func) != ACL_SUCCESS) {
        seen_func = NULL;
    }
}

static void *report_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        (void)aclrtProcessReport(10);
    }
    return NULL;
}

static void on_report(void *data) {
    (void)data;
    atomic_fetch_add(&callbacks, 1);
}

int main(int argc, char **argv) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtExceptionInfoCallbackUnregister(on_exception)); /* not registered: nothing to do */
    CHECK(aclrtExceptionInfoCallbackRegister(on_exception));
    CHECK(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE));
    pthread_t reporter;
    if (pthread_create(&reporter, NULL, report_loop, NULL) != 0) {
        return 1;
    }
    CHECK(aclrtSubscribeReport((uint64_t)reporter, stream));

    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "faults.o"), NULL, &bin));
    aclrtFuncHandle div_zero;
    CHECK(aclrtBinaryGetFunction(bin, "div_zero", &div_zero));
    void *dev;
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    void *pinned;
    CHECK(aclrtMallocHost(&pinned, 4096));
    aclrtEvent event;
    CHECK(aclrtCreateEvent(&event));
    aclrtStream spare;
    CHECK(aclrtCreateStream(&spare));

    aclrtErrorInfo verbose;
    CHECK(aclrtGetErrorVerbose(0, &verbose));
    EXPECT(verbose.errorType == ACL_RT_NO_ERROR);

    CHECK(aclrtLaunchCallback(on_report, NULL, ACL_CALLBACK_BLOCK, stream));
    int64_t divisor = 0;
    CHECK(aclrtLaunchKernel(div_zero, 1, &divisor, sizeof divisor, stream));
    uint32_t task = 0;
    CHECK(aclrtGetThreadLastTaskId(&task));
    EXPECT(task == 2);
    CHECK(aclrtMemsetAsync(dev, 4096, 0, 4096, stream)); /* aborted by the fault */
    EXPECT_CODE(aclrtSynchronizeStream(stream), ACL_ERROR_RT_AICORE_TRAP_EXCEPTION);
    EXPECT(atomic_load(&callbacks) == 1);

    /* What the callback learned. */
    EXPECT(seen_code == ACL_ERROR_RT_AICORE_TRAP_EXCEPTION);
    EXPECT(seen_task == task);
    EXPECT(seen_func == div_zero);
    EXPECT(seen_args_len == 8 && seen_divisor == 0);
    CHECK(aclrtGetErrorVerbose(0, &verbose));
    EXPECT(verbose.errorType == ACL_RT_ERROR_AICORE && verbose.hasDetail == 1);
    EXPECT(verbose.detail.aicoreErrType == ACL_RT_AICORE_ERROR_SW);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_RT_AICORE_TRAP_EXCEPTION);

    CHECK(aclrtExceptionInfoCallbackUnregister(on_exception));

    /* Work on the failed context reports the error... */
    void *more;
    EXPECT_CODE(aclrtMalloc(&more, 64, ACL_MEM_MALLOC_HUGE_FIRST),
                ACL_ERROR_RT_AICORE_TRAP_EXCEPTION);
    /* ...and cleanup succeeds, as the vendor sample's does. */
    CHECK(aclrtFree(dev));
    CHECK(aclrtFreeHost(pinned));
    CHECK(aclrtDestroyEvent(event));
    CHECK(aclrtUnSubscribeReport((uint64_t)reporter, stream));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtDestroyStreamForce(spare));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyContext(context));
    atomic_store(&stop, 1);
    pthread_join(reporter, NULL);

    /* Another context of the device never noticed. */
    CHECK(aclrtCreateContext(&context, 0));
    CHECK(aclrtMalloc(&more, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(more));
    CHECK(aclrtDestroyContext(context));

    /* The same in the device's primary context: cleanup succeeds, and aclrtResetDeviceForce
     * clears the fault, so the device is usable again. */
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtSetDevice(0)); /* two unmatched: the forced reset resets anyway */
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE));
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "faults.o"), NULL, &bin));
    CHECK(aclrtBinaryGetFunction(bin, "div_zero", &div_zero));
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtLaunchKernel(div_zero, 1, &divisor, sizeof divisor, stream));
    EXPECT_CODE(aclrtSynchronizeStream(stream), ACL_ERROR_RT_AICORE_TRAP_EXCEPTION);
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(dev));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("Run the callback_exception sample successfully\n");
    printf("fault_cleanup: ok\n");
    return 0;
}
