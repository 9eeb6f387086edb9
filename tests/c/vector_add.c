/*
 * vector_add.c — the committed binary kernel vadd_f32 (examples/kernels/vector_add.o) through
 * the ACL API: pinned host memory and asynchronous copies, a launch with its argument buffer
 * in host memory and then in device memory, synchronous copies from ordinary malloc memory,
 * ACL_MEMCPY_DEFAULT, memsets, and the teardown calls. Checks every result and return code.
 *
 * Usage: vector_add [kernels-dir]
 */
#include <math.h>
#include <string.h>

#include "check.h"

enum { N = 4099 };

static void expect_sum(const float *c, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (c[i] != a[i] + b[i]) {
            fprintf(stderr, "c[%zu] = %f, expected %f\n", i, c[i], a[i] + b[i]);
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    const size_t bytes = N * sizeof(float);
    CHECK(aclInit(NULL));
    uint32_t count = 0;
    CHECK(aclrtGetDeviceCount(&count));
    EXPECT(count >= 1);
    CHECK(aclrtSetDevice(0));
    int32_t dev = -1;
    CHECK(aclrtGetDevice(&dev));
    EXPECT(dev == 0);

    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));

    /* Device memory, with three policies. */
    void *da, *db, *dc;
    CHECK(aclrtMalloc(&da, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&db, bytes, ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK(aclrtMalloc(&dc, bytes, ACL_MEM_MALLOC_HUGE_FIRST_P2P));

    /* Pinned host memory, filled by the host. */
    float *ha, *hb, *hc;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&hb, bytes));
    CHECK(aclrtMallocHost((void **)&hc, bytes));
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)i * 0.5f;
        hb[i] = 3.0f - (float)i;
        hc[i] = -1.0f;
    }

    /* The kernel. */
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd, again;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &again));
    EXPECT(vadd == again);

    /* 1. Asynchronous: copy in, launch, copy out, all queued; then synchronize. */
    CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtMemcpyAsync(db, bytes, hb, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    VaddArgs args = {da, db, dc, N};
    CHECK(aclrtLaunchKernel(vadd, 8, &args, sizeof args, stream));
    CHECK(aclrtMemcpyAsync(hc, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    EXPECT(hc[0] == -1.0f); /* nothing ran yet: the copy writes when it runs */
    aclrtStreamStatus status;
    CHECK(aclrtStreamQuery(stream, &status));
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY);
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtStreamQuery(stream, &status));
    EXPECT(status == ACL_STREAM_STATUS_COMPLETE);
    expect_sum(hc, ha, hb, N);

    /* 2. Synchronous copies from ordinary memory, the argument buffer in device memory, and
     *    the default stream (NULL). */
    float *pa = malloc(bytes), *pb = malloc(bytes), *pc = malloc(bytes);
    for (size_t i = 0; i < N; i++) {
        pa[i] = sinf((float)i);
        pb[i] = (float)(i % 7);
    }
    CHECK(aclrtMemcpy(da, bytes, pa, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(db, bytes, pb, bytes, ACL_MEMCPY_DEFAULT)); /* direction from pointers */
    void *dargs;
    CHECK(aclrtMalloc(&dargs, sizeof args, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dargs, sizeof args, &args, sizeof args, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtLaunchKernel(vadd, 3, dargs, sizeof args, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    CHECK(aclrtMemcpy(pc, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    expect_sum(pc, pa, pb, N);

    /* Pinned memory at an offset: exactly that part moves, both ways. */
    for (size_t i = 0; i < N; i++) {
        hc[i] = -1.0f;
    }
    const size_t part = 50 * sizeof(float);
    CHECK(aclrtMemcpyAsync(hc + 100, part, (char *)dc + 100 * sizeof(float), part,
                           ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(hc[99] == -1.0f && hc[150] == -1.0f);
    for (size_t i = 100; i < 150; i++) {
        EXPECT(hc[i] == pa[i] + pb[i]);
    }
    CHECK(aclrtMemcpyAsync(dc, part, ha + 7, part, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(pc, part, dc, part, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(pc, ha + 7, part) == 0);

    /* 3. Device-to-device copy and memsets. */
    CHECK(aclrtMemcpy(db, bytes, da, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(aclrtMemcpy(pc, bytes, db, bytes, ACL_MEMCPY_DEFAULT));
    EXPECT(memcmp(pc, pa, bytes) == 0);
    CHECK(aclrtMemset(dc, bytes, 0, bytes));
    CHECK(aclrtMemsetAsync(dc, bytes, 0x7f, 16, stream));
    CHECK(aclrtMemcpyAsync(hc, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    const unsigned char *raw = (const unsigned char *)hc;
    EXPECT(raw[0] == 0x7f && raw[15] == 0x7f && raw[16] == 0 && raw[bytes - 1] == 0);
    CHECK(aclrtMemset(hc, bytes, 0, bytes)); /* pinned host memory too */
    EXPECT(hc[0] == 0.0f);

    /* A launch argument buffer must be whole slots. */
    EXPECT_CODE(aclrtLaunchKernel(vadd, 1, &args, 12, stream), ACL_ERROR_INVALID_PARAM);

    /* Teardown. */
    free(pa);
    free(pb);
    free(pc);
    CHECK(aclrtBinaryUnLoad(bin));
    EXPECT_CODE(aclrtLaunchKernel(vadd, 1, &args, sizeof args, stream),
                ACL_ERROR_RT_PARAM_INVALID); /* its functions went with it */
    CHECK(aclrtFree(dargs));
    CHECK(aclrtFree(da));
    CHECK(aclrtFree(db));
    CHECK(aclrtFree(dc));
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hb));
    CHECK(aclrtFreeHost(hc));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("vector_add: ok\n");
    return 0;
}
