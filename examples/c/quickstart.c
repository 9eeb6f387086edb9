/*
 * quickstart.c — vector add on a simulated NPU, through npusim's ACL API.
 *
 * What happens: the program initializes ACL, picks device 0, creates a stream, allocates
 * device memory and pinned host memory, loads the committed kernel binary
 * examples/kernels/vector_add.o and gets its function vadd_f32. It queues two copies in, the
 * kernel and a copy out on the stream, between two events (every call returns at once), then
 * synchronizes: the simulated device runs the four tasks. It checks the result against the
 * CPU and prints the simulated time between the events.
 *
 * Build and run, from the repository root:
 *     cargo build --release -p npusim-acl
 *     cc examples/c/quickstart.c \
 *        $(cargo run -q --release -p npusim-acl --bin npusim-acl-config -- --cflags --libs) \
 *        -o quickstart
 *     ./quickstart
 * (npusim-acl-config knows the target directory, CARGO_TARGET_DIR included; --static links
 * libnpusim_acl.a instead.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        aclError err_ = (call);                                                              \
        if (err_ != ACL_SUCCESS) {                                                           \
            const char *msg_ = aclGetRecentErrMsg();                                         \
            fprintf(stderr, "%s failed with %d: %s\n", #call, err_, msg_ ? msg_ : "");        \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(int argc, char **argv) {
    const char *kernel = argc > 1 ? argv[1] : "examples/kernels/vector_add.o";
    const size_t n = 1 << 16;
    const size_t bytes = n * sizeof(float);

    /* 1. Runtime, device, stream. */
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));

    /* 2. Memory: device buffers, and pinned host buffers (so the copies are asynchronous). */
    void *a, *b, *c;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    float *ha, *hb, *hc;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&hb, bytes));
    CHECK(aclrtMallocHost((void **)&hc, bytes));
    for (size_t i = 0; i < n; i++) {
        ha[i] = (float)i;
        hb[i] = (float)(n - i) * 0.5f;
    }

    /* 3. The kernel: vadd_f32(a, b, c, n), compiled for the simulated AI core. */
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel, NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));

    /* 4. Queue everything: copies in, the launch (one 8-byte slot per argument), copy out. */
    aclrtEvent start, end;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEvent(&end));
    CHECK(aclrtRecordEvent(start, stream));
    CHECK(aclrtMemcpyAsync(a, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtMemcpyAsync(b, bytes, hb, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    struct {
        void *a, *b, *c;
        uint64_t n;
    } args = {a, b, c, n};
    CHECK(aclrtLaunchKernel(vadd, 8, &args, sizeof args, stream));
    CHECK(aclrtMemcpyAsync(hc, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtRecordEvent(end, stream));

    /* 5. Synchronize: the simulated device runs the queued work now. */
    CHECK(aclrtSynchronizeStream(stream));

    /* 6. Check against the CPU, and read the simulated time. */
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        wrong += hc[i] != ha[i] + hb[i];
    }
    float ms = 0;
    CHECK(aclrtEventElapsedTime(&ms, start, end));
    printf("vector add of %zu floats on a simulated NPU: %s; %.3f ms of simulated time\n", n,
           wrong == 0 ? "all correct" : "WRONG", ms);

    /* 7. Release everything. */
    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(end));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hb));
    CHECK(aclrtFreeHost(hc));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFree(c));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return wrong == 0 ? 0 : 1;
}
