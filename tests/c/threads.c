/*
 * threads.c — two host threads, each with its own context (on its own device: the program
 * asks for two with NPUSIM_DEVICES=2), its own stream, binary and memory, running vector adds
 * at the same time. The current context is per thread; a thread cannot use the other's
 * stream (ACL_ERROR_RT_STREAM_CONTEXT) nor destroy the other's context while it is current
 * there (ACL_ERROR_RT_CONTEXT_RELEASE_ERROR).
 *
 * Usage: threads [kernels-dir]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

enum { N = 8192, ROUNDS = 4 };

typedef struct {
    int id;
    const char *kernel;
    aclrtContext ctx;
    aclrtStream stream;
} Worker;

static Worker workers[2];
static pthread_barrier_t barrier;

static void *run(void *arg) {
    Worker *me = arg;
    Worker *peer = &workers[1 - me->id];
    const size_t bytes = N * sizeof(float);

    CHECK(aclrtCreateContext(&me->ctx, me->id));
    aclrtContext current;
    CHECK(aclrtGetCurrentContext(&current));
    EXPECT(current == me->ctx);
    int32_t dev = -1;
    CHECK(aclrtGetDevice(&dev));
    EXPECT(dev == me->id);
    CHECK(aclrtCreateStream(&me->stream));

    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(me->kernel, NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));
    float *ha, *hb, *hc;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&hb, bytes));
    CHECK(aclrtMallocHost((void **)&hc, bytes));
    void *da, *db, *dc;
    CHECK(aclrtMalloc(&da, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&db, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dc, bytes, ACL_MEM_MALLOC_HUGE_FIRST));

    pthread_barrier_wait(&barrier); /* both contexts and streams exist */
    EXPECT_CODE(aclrtSynchronizeStream(peer->stream), ACL_ERROR_RT_STREAM_CONTEXT);
    EXPECT_CODE(aclrtDestroyContext(peer->ctx), ACL_ERROR_RT_CONTEXT_RELEASE_ERROR);
    pthread_barrier_wait(&barrier); /* nobody destroys anything before both checked */

    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < N; i++) {
            ha[i] = (float)i + 1000.0f * (float)me->id;
            hb[i] = (float)(round + 1);
        }
        CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, me->stream));
        CHECK(aclrtMemcpyAsync(db, bytes, hb, bytes, ACL_MEMCPY_HOST_TO_DEVICE, me->stream));
        VaddArgs args = {da, db, dc, N};
        CHECK(aclrtLaunchKernel(vadd, 2, &args, sizeof args, me->stream));
        CHECK(aclrtMemcpyAsync(hc, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST, me->stream));
        CHECK(aclrtSynchronizeStream(me->stream));
        for (size_t i = 0; i < N; i++) {
            if (hc[i] != ha[i] + hb[i]) {
                fprintf(stderr, "thread %d round %d: c[%zu] = %f, expected %f\n", me->id, round,
                        i, hc[i], ha[i] + hb[i]);
                exit(1);
            }
        }
    }
    CHECK(aclrtGetCurrentContext(&current));
    EXPECT(current == me->ctx);

    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hb));
    CHECK(aclrtFreeHost(hc));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStream(me->stream));
    CHECK(aclrtDestroyContext(me->ctx));
    /* The thread is left without a context until it sets one. */
    aclrtStream s;
    EXPECT_CODE(aclrtCreateStream(&s), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_CODE(aclrtSetCurrentContext(me->ctx), ACL_ERROR_RT_PARAM_INVALID);
    return NULL;
}

int main(int argc, char **argv) {
    setenv("NPUSIM_DEVICES", "2", 1);
    CHECK(aclInit(NULL));
    uint32_t count = 0;
    CHECK(aclrtGetDeviceCount(&count));
    EXPECT(count == 2);
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        workers[i].id = i;
        workers[i].kernel = kernel_path(argc, argv, "vector_add.o");
        EXPECT(pthread_create(&threads[i], NULL, run, &workers[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        EXPECT(pthread_join(threads[i], NULL) == 0);
    }
    pthread_barrier_destroy(&barrier);

    /* The main thread has its own current context: device 1's primary once it says so. */
    aclrtContext main_ctx;
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtGetCurrentContext(&main_ctx));
    EXPECT(main_ctx != workers[0].ctx && main_ctx != workers[1].ctx);
    int32_t dev = -1;
    CHECK(aclrtGetDevice(&dev));
    EXPECT(dev == 1);
    EXPECT_CODE(aclrtDestroyContext(main_ctx), ACL_ERROR_RT_CONTEXT_RELEASE_ERROR); /* primary */
    CHECK(aclrtResetDevice(1));
    CHECK(aclFinalize());
    printf("threads: ok\n");
    return 0;
}
