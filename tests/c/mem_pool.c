/*
 * mem_pool.c — stream-ordered allocation: memory from an aclrtMemPool is freed with
 * aclrtMemPoolFreeAsync right behind a kernel that reads it, before the kernel has run. The
 * pool must not hand that memory out again while the kernel can still read it: new
 * allocations made meanwhile get other addresses, and are filled with garbage at once; the
 * kernel's result is still right. Also: the pool's maxSize, and a free of foreign memory.
 *
 * Usage: mem_pool [kernels-dir]
 */
#include <stdint.h>

#include "check.h"

enum { N = 16384 };

static int overlaps(void *p, void *q, size_t bytes) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + bytes && b < a + bytes;
}

int main(int argc, char **argv) {
    const size_t bytes = N * sizeof(float);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream, other;
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtCreateStream(&other));
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));

    aclrtMemPoolProps props = {0};
    props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    props.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    props.location.id = 0;
    props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    props.maxSize = 8 * bytes;
    aclrtMemPool pool;
    CHECK(aclrtMemPoolCreate(&pool, &props));

    float *ha, *hb, *hc;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&hb, bytes));
    CHECK(aclrtMallocHost((void **)&hc, bytes));
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)i;
        hb[i] = 1.0f;
    }

    void *a, *b, *c;
    CHECK(aclrtMemPoolMallocAsync(&a, bytes, pool, stream));
    CHECK(aclrtMemPoolMallocAsync(&b, bytes, pool, stream));
    CHECK(aclrtMemPoolMallocAsync(&c, bytes, pool, stream));
    CHECK(aclrtMemcpyAsync(a, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtMemcpyAsync(b, bytes, hb, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    VaddArgs args = {a, b, c, N};
    CHECK(aclrtLaunchKernel(vadd, 1, &args, sizeof args, stream));
    /* Freed behind the kernel, which has not run. */
    CHECK(aclrtMemPoolFreeAsync(a, stream));
    CHECK(aclrtMemPoolFreeAsync(b, stream));
    aclrtStreamStatus status;
    CHECK(aclrtStreamQuery(stream, &status));
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY);

    /* New memory, at once, filled with garbage on another stream that nothing orders. */
    void *x, *y;
    CHECK(aclrtMemPoolMallocAsync(&x, bytes, pool, other));
    CHECK(aclrtMemPoolMallocAsync(&y, bytes, pool, other));
    EXPECT(!overlaps(x, a, bytes) && !overlaps(x, b, bytes));
    EXPECT(!overlaps(y, a, bytes) && !overlaps(y, b, bytes));
    CHECK(aclrtMemsetAsync(x, bytes, 0xff, bytes, other));
    CHECK(aclrtMemsetAsync(y, bytes, 0xff, bytes, other));

    CHECK(aclrtMemcpyAsync(hc, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtSynchronizeStream(other));
    for (size_t i = 0; i < N; i++) {
        if (hc[i] != ha[i] + hb[i]) {
            fprintf(stderr, "c[%zu] = %f, expected %f\n", i, hc[i], ha[i] + hb[i]);
            return 1;
        }
    }

    /* Now that the kernel is done, the pool does reuse a or b (so the checks above that it
     * did not, while the kernel was queued, are not vacuous). */
    void *z;
    CHECK(aclrtMemPoolMallocAsync(&z, bytes, pool, stream));
    EXPECT(overlaps(z, a, bytes) || overlaps(z, b, bytes));
    CHECK(aclrtMemPoolFreeAsync(z, stream));

    /* The pool's bound: c, x, y (3 of 8) are in use. */
    void *big;
    EXPECT_CODE(aclrtMemPoolMallocAsync(&big, 6 * bytes, pool, stream),
                ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK(aclrtMemPoolMallocAsync(&big, 5 * bytes, pool, stream));
    CHECK(aclrtMemPoolFreeAsync(big, stream));

    /* Only pool memory goes back to a pool; a freed pointer is not freed twice. */
    void *plain;
    CHECK(aclrtMalloc(&plain, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_CODE(aclrtMemPoolFreeAsync(plain, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtMemPoolFreeAsync(a, stream), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtFree(plain));

    /* Destroying the pool frees what is still allocated from it (c, x, y). */
    CHECK(aclrtMemPoolFreeAsync(c, stream));
    CHECK(aclrtMemPoolDestroy(pool));
    EXPECT_CODE(aclrtMemPoolMallocAsync(&big, bytes, pool, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtMemPoolCreate(&pool, NULL), ACL_ERROR_INVALID_PARAM);
    props.location.id = 5;
    EXPECT_CODE(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_INVALID_PARAM);

    CHECK(aclrtSynchronizeDevice());
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hb));
    CHECK(aclrtFreeHost(hc));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtDestroyStream(other));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("mem_pool: ok\n");
    return 0;
}
