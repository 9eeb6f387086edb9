/*
 * errors.c — misuse gets ACL's error codes, never a crash: calls before aclInit, repeated
 * init / finalize, NULL arguments, garbage, destroyed and wrong-kind handles, bad sizes, bad
 * files, handles of a finished session; aclGetRecentErrMsg describes the failures.
 *
 * Usage: errors [kernels-dir]
 */
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
    /* Before aclInit. */
    EXPECT_CODE(aclrtSetDevice(0), ACL_ERROR_UNINITIALIZE);
    aclrtStream s;
    EXPECT_CODE(aclrtCreateStream(&s), ACL_ERROR_UNINITIALIZE);
    EXPECT_CODE(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    EXPECT_CODE(aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE);
    const char *msg = aclGetRecentErrMsg();
    EXPECT(msg != NULL && strstr(msg, "aclInit") != NULL && strstr(msg, "aclrtSetDevice") != NULL);

    CHECK(aclInit(NULL));
    EXPECT_CODE(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    EXPECT_CODE(aclrtSetDevice(7), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_CODE(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK(aclrtSetDevice(0));

    /* NULL where a pointer is required. */
    EXPECT_CODE(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtDestroyEvent(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtDestroyContext(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM);

    /* Garbage, destroyed and wrong-kind handles. */
    aclrtStream garbage = (aclrtStream)(uintptr_t)0xdeadbeef;
    EXPECT_CODE(aclrtSynchronizeStream(garbage), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtDestroyStream(garbage), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtSetCurrentContext(garbage), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtBinaryUnLoad(garbage), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtLaunchKernel(garbage, 1, NULL, 0, NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtSetStreamFailureMode(NULL, 9), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtCreateStream(&s));
    aclrtEvent e;
    CHECK(aclrtCreateEvent(&e));
    EXPECT_CODE(aclrtSynchronizeStream(e), ACL_ERROR_RT_PARAM_INVALID); /* an event */
    EXPECT_CODE(aclrtSynchronizeEvent(s), ACL_ERROR_RT_PARAM_INVALID); /* a stream */
    CHECK(aclrtDestroyStream(s));
    EXPECT_CODE(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID); /* destroyed */
    EXPECT_CODE(aclrtDestroyStream(s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtEventElapsedTime(NULL, e, e), ACL_ERROR_INVALID_PARAM);
    float ms;
    EXPECT_CODE(aclrtEventElapsedTime(&ms, e, e), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    CHECK(aclrtSynchronizeStream(NULL)); /* NULL is the default stream */

    /* Sizes and pointers the runtime refuses. */
    void *d;
    EXPECT_CODE(aclrtMalloc(&d, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMalloc(&d, 64, (aclrtMemMallocPolicy)0x55), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    char host[512];
    memset(host, 1, sizeof host);
    EXPECT_CODE(aclrtMemcpy(d, 128, host, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemcpy(d, 512, host, 512, ACL_MEMCPY_HOST_TO_DEVICE),
                ACL_ERROR_RT_PARAM_INVALID); /* past the allocation's end */
    EXPECT_CODE(aclrtMemcpy(d, 256, host, 256, (aclrtMemcpyKind)42), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemcpy(host, 256, (void *)(uintptr_t)0x1234, 256, ACL_MEMCPY_DEVICE_TO_HOST),
                ACL_ERROR_RT_PARAM_INVALID); /* not device memory */
    EXPECT_CODE(aclrtMemcpy(host, 256, d, 256, ACL_MEMCPY_HOST_TO_HOST),
                ACL_ERROR_INVALID_PARAM); /* d is device memory: the host cannot read it */
    EXPECT_CODE(aclrtMemset(d, 16, 0, 32), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtFree((void *)((char *)d + 8)), ACL_ERROR_RT_MEMORY_FREE);
    EXPECT_CODE(aclrtFreeHost(host), ACL_ERROR_RT_PARAM_INVALID); /* not aclrtMallocHost's */
    EXPECT_CODE(aclrtSynchronizeStreamWithTimeout(NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtFree(d));
    EXPECT_CODE(aclrtFree(d), ACL_ERROR_RT_MEMORY_FREE); /* twice */

    /* Kernel binaries. */
    aclrtBinHandle bin;
    EXPECT_CODE(aclrtBinaryLoadFromFile("/nonexistent/kernel.o", NULL, &bin),
                ACL_ERROR_INVALID_FILE);
    EXPECT_CODE(aclrtBinaryLoadFromData(host, sizeof host, NULL, &bin), ACL_ERROR_PARSE_FILE);
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle f;
    EXPECT_CODE(aclrtBinaryGetFunction(bin, "no_such_kernel", &f), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &f));
    EXPECT_CODE(aclrtLaunchKernel(f, 0, NULL, 0, NULL), ACL_ERROR_RT_PARAM_INVALID); /* 0 blocks */
    EXPECT_CODE(npusimLaunchKernel(f, 1, host, 16, 0x4, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtBinaryUnLoad(bin));

    /* Exception-info accessors outside a callback. */
    EXPECT(aclrtGetTaskIdFromExceptionInfo(NULL) == 0xFFFFFFFFu);
    EXPECT(aclrtGetDeviceIdFromExceptionInfo((const aclrtExceptionInfo *)host) == 0xFFFFFFFFu);

    msg = aclGetRecentErrMsg();
    EXPECT(msg != NULL && strstr(msg, "aclrtBinaryGetFunction") != NULL);
    EXPECT(aclGetRecentErrMsg() == NULL);

    /* Handles of a finished session name nothing in the next one. */
    CHECK(aclFinalize());
    EXPECT_CODE(aclrtDestroyEvent(e), ACL_ERROR_UNINITIALIZE);
    CHECK(aclInit(NULL));
    EXPECT_CODE(aclrtDestroyEvent(e), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclFinalize());
    printf("errors: ok\n");
    return 0;
}
