/*
 * timeouts_prints.c — kernel time limits in simulated time, and kernel prints on stdout.
 *  - aclrtSetOpExecuteTimeOutWithMs(20): a kernel that never ends (spin_forever) fails with
 *    ACL_ERROR_RT_AICORE_TIMEOUT after 20 ms of simulated time (and little wall time);
 *  - a long honest kernel (a one-block vector add of 3M floats, tens of millions of
 *    instructions) completes under the default timeout;
 *  - the getters and the other setters agree;
 *  - what a kernel prints (div_zero(10) prints 100) reaches this program's stdout when the
 *    synchronize returns, between what the program printed before and after.
 *
 * Usage: timeouts_prints [kernels-dir]
 */
#include "check.h"

enum { N = 3 << 20 };

int main(int argc, char **argv) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    aclrtBinHandle faults, vbin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "faults.o"), NULL, &faults));
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &vbin));
    aclrtFuncHandle spin, div_zero, vadd;
    CHECK(aclrtBinaryGetFunction(faults, "spin_forever", &spin));
    CHECK(aclrtBinaryGetFunction(faults, "div_zero", &div_zero));
    CHECK(aclrtBinaryGetFunction(vbin, "vadd_f32", &vadd));

    uint32_t ms = 0;
    CHECK(aclrtGetOpExecuteTimeout(&ms));
    EXPECT(ms == 1091000); /* ACL's A2 default */
    CHECK(aclrtSetOpExecuteTimeOutWithMs(20));
    CHECK(aclrtGetOpExecuteTimeout(&ms));
    EXPECT(ms == 20);

    aclrtEvent start, end;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEvent(&end));
    CHECK(aclrtRecordEvent(start, stream));
    CHECK(aclrtLaunchKernel(spin, 1, NULL, 0, stream));
    CHECK(aclrtRecordEvent(end, stream));
    EXPECT_CODE(aclrtSynchronizeStream(stream), ACL_ERROR_RT_AICORE_TIMEOUT);
    float elapsed = 0;
    CHECK(aclrtEventElapsedTime(&elapsed, start, end));
    printf("timeouts_prints: spin_forever stopped after %.3f simulated ms\n", elapsed);
    EXPECT(elapsed >= 20.0f && elapsed < 21.0f);

    uint64_t actual = 0;
    CHECK(aclrtSetOpExecuteTimeOutV2(2500, &actual));
    EXPECT(actual == 2500);
    CHECK(aclrtGetOpExecuteTimeout(&ms));
    EXPECT(ms == 2);
    CHECK(aclrtSetOpExecuteTimeOut(5000)); /* past the maximum: clamped */
    CHECK(aclrtGetOpExecuteTimeout(&ms));
    EXPECT(ms == 1091000);
    CHECK(aclrtSetOpExecuteTimeOut(0)); /* the default */
    CHECK(aclrtGetOpExecuteTimeout(&ms));
    EXPECT(ms == 1091000);
    CHECK(aclrtSetOpWaitTimeout(30));

    /* A long honest kernel completes. */
    const size_t bytes = (size_t)N * sizeof(float);
    void *a, *c;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(a, bytes, 0, bytes));
    VaddArgs args = {a, a, c, N};
    CHECK(aclrtRecordEvent(start, stream));
    CHECK(aclrtLaunchKernel(vadd, 1, &args, sizeof args, stream));
    CHECK(aclrtRecordEvent(end, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtEventElapsedTime(&elapsed, start, end));
    printf("timeouts_prints: a one-block add of %d floats ran %.3f simulated ms\n", N, elapsed);
    EXPECT(elapsed > 20.0f); /* it would have failed under the 20 ms limit */

    /* Kernel prints come out at the synchronize, in order with the program's own. */
    int64_t ten = 10;
    CHECK(aclrtLaunchKernel(div_zero, 1, &ten, sizeof ten, stream));
    printf("timeouts_prints: before the synchronize\n");
    CHECK(aclrtSynchronizeStream(stream));
    printf("timeouts_prints: after the synchronize\n");

    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(end));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(c));
    CHECK(aclrtBinaryUnLoad(faults));
    CHECK(aclrtBinaryUnLoad(vbin));
    CHECK(aclrtDestroyStreamForce(stream));
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("timeouts_prints: ok\n");
    return 0;
}
