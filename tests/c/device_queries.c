/*
 * device_queries.c — a runtime program in the shape of CANN's samples (init, device, context,
 * streams, work, *Force teardown, finalize) that asks the runtime about itself: run mode,
 * version, SoC name, memory, device status, utilization, priorities, device attributes, the
 * default stream of the current context, and the thread's last error.
 *
 * Usage: device_queries [kernels-dir]
 */
#include <string.h>

#include "check.h"
#include "tiling/platform/platform_ascendc.h"

enum { N = 65536 };

int main(int argc, char **argv) {
    /* Before aclInit: no session, no SoC name; the run mode is known (CANN's samples ask it
     * first) and so are the half conversions of samples' data_utils.h. */
    EXPECT(aclrtGetSocName() == NULL);
    aclrtRunMode mode = ACL_DEVICE;
    CHECK(aclrtGetRunMode(&mode));
    EXPECT(mode == ACL_HOST);
    EXPECT(aclFloatToFloat16(1.5f) == 0x3e00);
    EXPECT(aclFloat16ToFloat(0x3e00) == 1.5f);
    EXPECT_CODE(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_SUCCESS);
    EXPECT_CODE(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    aclrtStream early;
    EXPECT_CODE(aclrtCreateStream(&early), ACL_ERROR_UNINITIALIZE);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_UNINITIALIZE);

    /* The platform figures a host tiling function asks for, before aclInit: the preset's. */
    uint64_t aic = 0, aiv = 0, ub = 0, l0c = 0;
    CHECK(npusimPlatformValue(NPUSIM_PLATFORM_AIC_CORES, &aic));
    CHECK(npusimPlatformValue(NPUSIM_PLATFORM_AIV_CORES, &aiv));
    CHECK(npusimPlatformValue(NPUSIM_PLATFORM_UB_BYTES, &ub));
    CHECK(npusimPlatformValue(NPUSIM_PLATFORM_L0C_BYTES, &l0c));
    EXPECT(aic == 4 && aiv == 4 && ub > 0 && l0c > 0); /* NPUSIM_PRESET=small */
    EXPECT_CODE(npusimPlatformValue(10, &aic), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(npusimPlatformValue(NPUSIM_PLATFORM_UB_BYTES, NULL), ACL_ERROR_INVALID_PARAM);

    CHECK(aclInit(NULL));
    const int32_t device = 0;
    CHECK(aclrtSetDevice(device));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, device));
    aclrtStream stream;
    CHECK(aclrtCreateStreamWithConfig(&stream, 7, ACL_STREAM_FAST_LAUNCH));

    CHECK(aclrtGetRunMode(&mode));
    EXPECT(mode == ACL_HOST);
    int32_t major, minor, patch;
    CHECK(aclrtGetVersion(&major, &minor, &patch));
    EXPECT(major == ACL_MAJOR_VERSION && minor == ACL_MINOR_VERSION && patch == ACL_PATCH_VERSION);
    const char *soc = aclrtGetSocName();
    EXPECT(soc != NULL && strcmp(soc, "small") == 0); /* NPUSIM_PRESET=small */

    /* Device attributes of the small preset: 4 AI cores, 1 GiB of HBM. */
    int64_t v;
    CHECK(aclrtGetDeviceInfo(device, ACL_DEV_ATTR_AICORE_CORE_NUM, &v));
    EXPECT(v == 4);
    CHECK(aclrtGetDeviceInfo(device, ACL_DEV_ATTR_CUBE_CORE_NUM, &v));
    EXPECT(v == 4);
    /* Its AI cores run vector code themselves (no separate vector cores): 4. */
    CHECK(aclrtGetDeviceInfo(device, ACL_DEV_ATTR_VECTOR_CORE_NUM, &v));
    EXPECT(v == 4);
    CHECK(aclrtGetDeviceInfo(device, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, &v));
    EXPECT(v == (int64_t)1 << 30);
    CHECK(aclrtGetDeviceInfo(device, ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE, &v));
    EXPECT(v > 0 && (uint64_t)v == ub); /* the platform API answered the same before init */
    EXPECT_CODE(aclrtGetDeviceInfo(device, (aclrtDevAttr)401, &v), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_CODE(aclrtGetDeviceInfo(9, ACL_DEV_ATTR_AICORE_CORE_NUM, &v), ACL_ERROR_RT_INVALID_DEVICEID);

    int32_t least, greatest;
    CHECK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(least == 7 && greatest == 0);

    aclrtDeviceStatus status;
    CHECK(aclrtQueryDeviceStatus(device, &status));
    EXPECT(status == ACL_RT_DEVICE_STATUS_NORMAL);
    EXPECT_CODE(aclrtQueryDeviceStatus(3, &status), ACL_ERROR_RT_INVALID_DEVICEID);

    /* Memory: HBM only; an allocation shows in the free bytes. DDR reports nothing. */
    size_t free0, total0, free1, total1;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total0));
    EXPECT(total0 == (size_t)1 << 30 && free0 <= total0);
    void *big;
    CHECK(aclrtMalloc(&big, 64 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total1));
    EXPECT(total1 == total0 && free1 + (64 << 20) <= free0);
    CHECK(aclrtGetMemInfo(ACL_DDR_MEM, &free1, &total1));
    EXPECT(free1 == 0 && total1 == 0);
    EXPECT_CODE(aclrtGetMemInfo((aclrtMemAttr)99, &free1, &total1), ACL_ERROR_INVALID_PARAM);

    /* The current context's default stream has a handle, works as a stream, and stays. */
    aclrtStream def, def2;
    CHECK(aclrtCtxGetCurrentDefaultStream(&def));
    CHECK(aclrtCtxGetCurrentDefaultStream(&def2));
    EXPECT(def != NULL && def == def2);

    /* Work on both streams, then utilization is above zero and at most 100. */
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));
    const size_t bytes = N * sizeof(float);
    void *a, *c, *c2;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c2, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemsetAsync(a, bytes, 0, bytes, def));
    /* The second stream reads `a` only after the memset (an event), and writes its own output
     * (the stream sanitizer finds the race otherwise). */
    aclrtEvent set;
    CHECK(aclrtCreateEvent(&set));
    CHECK(aclrtRecordEvent(set, def));
    CHECK(aclrtStreamWaitEvent(stream, set));
    VaddArgs args = {a, a, c, N};
    VaddArgs args2 = {a, a, c2, N};
    CHECK(aclrtLaunchKernel(vadd, 4, &args, sizeof args, def));
    CHECK(aclrtLaunchKernel(vadd, 4, &args2, sizeof args2, stream));
    EXPECT_CODE(aclrtSynchronizeDeviceWithTimeout(0), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtSynchronizeDeviceWithTimeout(-1));
    aclrtUtilizationInfo util = {0};
    CHECK(aclrtGetDeviceUtilizationRate(device, &util));
    EXPECT(util.cubeUtilization > 0 && util.cubeUtilization <= 100);
    EXPECT(util.vectorUtilization == util.cubeUtilization && util.aicpuUtilization == 0);
    EXPECT(util.memoryUtilization >= 6 && util.memoryUtilization <= 100); /* 64 MiB of 1 GiB */
    util.utilizationExtend = (aclrtUtilizationExtendInfo *)&util;
    EXPECT_CODE(aclrtGetDeviceUtilizationRate(device, &util), ACL_ERROR_INVALID_PARAM);

    /* The default stream cannot be destroyed, even by force. */
    EXPECT_CODE(aclrtDestroyStream(def), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtDestroyStreamForce(def), ACL_ERROR_INVALID_PARAM);

    /* The last error of this thread: peek keeps it, get takes it. */
    EXPECT(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_SUCCESS);
    EXPECT(aclrtGetLastError((aclrtLastErrLevel)5) == ACL_ERROR_INVALID_PARAM);
    (void)aclGetRecentErrMsg();

    /* Teardown, the CANN samples' way. */
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(c));
    CHECK(aclrtFree(c2));
    CHECK(aclrtDestroyEvent(set));
    CHECK(aclrtFree(big));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStreamForce(stream));
    EXPECT_CODE(aclrtDestroyStreamForce(stream), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDeviceForce(device));
    CHECK(aclFinalize());
    /* After aclFinalize: the run mode is still known; the SoC name is gone with the session. */
    mode = ACL_DEVICE;
    CHECK(aclrtGetRunMode(&mode));
    EXPECT(mode == ACL_HOST);
    EXPECT(aclrtGetSocName() == NULL);
    printf("device_queries: ok\n");
    return 0;
}
