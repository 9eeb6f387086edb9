/*
 * callbacks.c — host callbacks the ACL way: a report thread loops on aclrtProcessReport; the
 * main thread subscribes it to a stream and launches callbacks there, after a kernel. The
 * callbacks run on the report thread, in stream order; a blocking one has run by the time the
 * stream's synchronize returns. Also the error codes of the subscription calls.
 *
 * Usage: callbacks [kernels-dir]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"

enum { N = 4096 };

static atomic_int stop;
static atomic_int order[8];
static atomic_int calls;
static pthread_t report_thread;
static atomic_int wrong_thread;
static float *host_c;
static atomic_int saw_result;

static void *report_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        aclError e = aclrtProcessReport(20);
        if (e != ACL_SUCCESS && e != ACL_ERROR_RT_REPORT_TIMEOUT &&
            e != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            fprintf(stderr, "aclrtProcessReport returned %d\n", e);
            exit(1);
        }
        if (e == ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void on_done(void *user) {
    int tag = (int)(intptr_t)user;
    if (!pthread_equal(pthread_self(), report_thread)) {
        atomic_store(&wrong_thread, 1);
    }
    /* The kernel and the copy before it on the stream are done. */
    if (tag == 1 && host_c[N - 1] == 2.0f * (float)(N - 1)) {
        atomic_store(&saw_result, 1);
    }
    int i = atomic_fetch_add(&calls, 1);
    if (i < 8) {
        atomic_store(&order[i], tag);
    }
}

int main(int argc, char **argv) {
    const size_t bytes = N * sizeof(float);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream, lonely;
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtCreateStream(&lonely));
    EXPECT(pthread_create(&report_thread, NULL, report_loop, NULL) == 0);
    uint64_t tid = (uint64_t)report_thread;
    CHECK(aclrtSubscribeReport(tid, stream));
    EXPECT_CODE(aclrtSubscribeReport(tid, stream), ACL_ERROR_REPEAT_SUBSCRIBE);
    EXPECT_CODE(aclrtLaunchCallback(on_done, NULL, ACL_CALLBACK_BLOCK, lonely),
                ACL_ERROR_RT_STREAM_NO_CB_REG);
    EXPECT_CODE(aclrtLaunchCallback(NULL, NULL, ACL_CALLBACK_BLOCK, stream),
                ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE); /* main serves none */

    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));
    float *ha;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&host_c, bytes));
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)i;
    }
    void *da, *dc;
    CHECK(aclrtMalloc(&da, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dc, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    VaddArgs args = {da, da, dc, N};
    CHECK(aclrtLaunchKernel(vadd, 2, &args, sizeof args, stream));
    CHECK(aclrtMemcpyAsync(host_c, bytes, dc, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtLaunchCallback(on_done, (void *)(intptr_t)1, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtLaunchCallback(on_done, (void *)(intptr_t)2, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtLaunchCallback(on_done, (void *)(intptr_t)3, ACL_CALLBACK_NO_BLOCK, stream));
    EXPECT(atomic_load(&calls) == 0); /* nothing ran: the stream has not reached them */

    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(atomic_load(&calls) >= 2); /* the blocking ones ran before synchronize returned */
    for (int spins = 0; atomic_load(&calls) < 3 && spins < 5000; spins++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    EXPECT(atomic_load(&calls) == 3);
    EXPECT(atomic_load(&order[0]) == 1 && atomic_load(&order[1]) == 2 &&
           atomic_load(&order[2]) == 3);
    EXPECT(atomic_load(&saw_result) == 1);
    EXPECT(atomic_load(&wrong_thread) == 0);

    /* Unsubscribed: callbacks can no longer be launched there. */
    EXPECT_CODE(aclrtUnSubscribeReport(tid + 1, stream), ACL_ERROR_STREAM_NOT_SUBSCRIBE);
    CHECK(aclrtUnSubscribeReport(tid, stream));
    EXPECT_CODE(aclrtLaunchCallback(on_done, NULL, ACL_CALLBACK_BLOCK, stream),
                ACL_ERROR_RT_STREAM_NO_CB_REG);

    atomic_store(&stop, 1);
    EXPECT(pthread_join(report_thread, NULL) == 0);
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(host_c));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtDestroyStream(lonely));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("callbacks: ok\n");
    return 0;
}
