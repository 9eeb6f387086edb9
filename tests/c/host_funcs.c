/*
 * host_funcs.c — host functions in stream order: aclrtLaunchHostFunc on a stream no thread
 * subscribed runs the function on a thread of the runtime's own, as ACL's does; on a stream subscribed with
 * aclrtSubscribeHostFunc it runs on the subscribed thread, inside its aclrtProcessHostFunc
 * loop. Either way the stream's later work waits for it.
 *
 * Usage: host_funcs [kernels-dir]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"

static atomic_int stop;
static pthread_t worker;
static atomic_int ran_on_worker, ran_on_main, ran_elsewhere;
static pthread_t main_thread;

static void where(void *args) {
    atomic_int *counter = args;
    atomic_fetch_add(counter, 1);
    if (pthread_equal(pthread_self(), worker)) {
        atomic_fetch_add(&ran_on_worker, 1);
    } else if (pthread_equal(pthread_self(), main_thread)) {
        atomic_fetch_add(&ran_on_main, 1);
    } else {
        atomic_fetch_add(&ran_elsewhere, 1);
    }
}

static void *loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        aclError e = aclrtProcessHostFunc(10);
        if (e != ACL_SUCCESS && e != ACL_ERROR_RT_REPORT_TIMEOUT &&
            e != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            fprintf(stderr, "aclrtProcessHostFunc returned %d\n", e);
            exit(1);
        }
    }
    return NULL;
}

int main(void) {
    main_thread = pthread_self();
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream plain, served;
    CHECK(aclrtCreateStream(&plain));
    CHECK(aclrtCreateStream(&served));

    /* Nobody subscribed: the function runs on a thread of the runtime's own, in stream order,
     * and the stream waits for it. */
    atomic_int count = 0;
    CHECK(aclrtLaunchHostFunc(plain, where, &count));
    uint32_t task = 0;
    CHECK(aclrtGetThreadLastTaskId(&task));
    EXPECT(task == 1);
    CHECK(aclrtLaunchHostFunc(plain, where, &count));
    CHECK(aclrtGetThreadLastTaskId(&task));
    EXPECT(task == 2);
    CHECK(aclrtSynchronizeStream(plain));
    EXPECT(atomic_load(&count) == 2 && atomic_load(&ran_elsewhere) == 2);
    EXPECT(atomic_load(&ran_on_main) == 0);

    /* A subscribed worker thread runs them. */
    EXPECT_CODE(aclrtProcessHostFunc(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    if (pthread_create(&worker, NULL, loop, NULL) != 0) {
        return 1;
    }
    CHECK(aclrtSubscribeHostFunc((uint64_t)worker, served));
    EXPECT_CODE(aclrtSubscribeHostFunc((uint64_t)worker, served), ACL_ERROR_REPEAT_SUBSCRIBE);
    void *buf;
    CHECK(aclrtMalloc(&buf, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemsetAsync(buf, 4096, 7, 4096, served));
    for (int i = 0; i < 5; i++) {
        CHECK(aclrtLaunchHostFunc(served, where, &count));
    }
    CHECK(aclrtMemsetAsync(buf, 4096, 9, 4096, served));
    CHECK(aclrtSynchronizeStream(served));
    EXPECT(atomic_load(&count) == 7);
    EXPECT(atomic_load(&ran_on_worker) == 5 && atomic_load(&ran_elsewhere) == 2);
    unsigned char out[16];
    CHECK(aclrtMemcpy(out, sizeof out, buf, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(out[0] == 9 && out[15] == 9);

    EXPECT_CODE(aclrtLaunchHostFunc(served, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtUnSubscribeHostFunc((uint64_t)worker + 1, served),
                ACL_ERROR_STREAM_NOT_SUBSCRIBE);
    CHECK(aclrtUnSubscribeHostFunc((uint64_t)worker, served));
    atomic_store(&stop, 1);
    pthread_join(worker, NULL);

    CHECK(aclrtFree(buf));
    CHECK(aclrtDestroyStreamForce(plain));
    CHECK(aclrtDestroyStreamForce(served));
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("host_funcs: ok\n");
    return 0;
}
