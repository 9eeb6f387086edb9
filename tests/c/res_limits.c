/*
 * res_limits.c — device resource limits really limit the cores a kernel gets: a vector add of
 * 4 blocks on the small preset's 4 AI cores, timed with events, takes about four times as long
 * once the cube cores are limited to 1 (its blocks then share one core), twice as long with 4
 * vector cores (two AI cores); resetting the limits restores the speed.
 *
 * Usage: res_limits [kernels-dir]
 */
#include "check.h"

enum { N = 1 << 18 };

static float timed_add(aclrtFuncHandle vadd, VaddArgs *args, aclrtStream stream) {
    aclrtEvent start, end;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEvent(&end));
    CHECK(aclrtRecordEvent(start, stream));
    CHECK(aclrtLaunchKernel(vadd, 4, args, sizeof *args, stream));
    CHECK(aclrtRecordEvent(end, stream));
    CHECK(aclrtSynchronizeStream(stream));
    float ms = 0;
    CHECK(aclrtEventElapsedTime(&ms, start, end));
    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(end));
    return ms;
}

int main(int argc, char **argv) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));
    const size_t bytes = N * sizeof(float);
    void *a, *c;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(a, bytes, 0, bytes));
    VaddArgs args = {a, a, c, N};

    uint32_t v;
    CHECK(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, &v));
    EXPECT(v == 4);
    /* The small preset's AI cores run vector code themselves: 4 vector cores. */
    CHECK(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_VECTOR_CORE, &v));
    EXPECT(v == 4);
    float full = timed_add(vadd, &args, stream);

    CHECK(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 1));
    CHECK(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, &v));
    EXPECT(v == 1);
    CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &v));
    EXPECT(v == 1);
    float one_core = timed_add(vadd, &args, stream);
    printf("res_limits: 4 cores %.4f ms, 1 core %.4f ms\n", full, one_core);
    EXPECT(one_core > 3.0f * full);

    CHECK(aclrtResetDeviceResLimit(0));
    CHECK(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_VECTOR_CORE, 2));
    float two_cores = timed_add(vadd, &args, stream);
    printf("res_limits: 2 vector cores (2 AI cores) %.4f ms\n", two_cores);
    EXPECT(two_cores > 1.5f * full && two_cores < 0.75f * one_core);

    CHECK(aclrtResetDeviceResLimit(0));
    CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_VECTOR_CORE, &v));
    EXPECT(v == 4);
    float again = timed_add(vadd, &args, stream);
    EXPECT(again < 1.2f * full);

    /* Refused values. */
    EXPECT_CODE(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 5), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtSetDeviceResLimit(0, (aclrtDevResLimitType)2, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtSetDeviceResLimit(4, ACL_RT_DEV_RES_CUBE_CORE, 1),
                ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_CODE(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, NULL), ACL_ERROR_INVALID_PARAM);

    CHECK(aclrtFree(a));
    CHECK(aclrtFree(c));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStreamForce(stream));
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("res_limits: ok\n");
    return 0;
}
