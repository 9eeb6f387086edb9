/*
 * callback_timeouts.c — host callbacks that cannot hang a program: a stream subscribed to a
 * thread that never calls aclrtProcessReport makes aclrtSynchronizeStreamWithTimeout return
 * ACL_ERROR_RT_STREAM_SYNC_TIMEOUT and aclrtSynchronizeStream ACL_ERROR_RT_REPORT_TIMEOUT (after
 * NPUSIM_CALLBACK_TIMEOUT_MS, which the test sets short), and unsubscribing runs the callback so
 * the stream finishes. A callback that synchronizes its own stream gets ACL_ERROR_RT_WAIT_TIMEOUT
 * at once instead of waiting for itself.
 *
 * Usage: callback_timeouts [kernels-dir]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"

static atomic_int stop;
static atomic_int ran;
static atomic_int reentrant_code = -1;
static aclrtStream served;

static void *idle_loop(void *arg) {
    (void)arg;
    /* Subscribed, but never serves its reports. */
    while (!atomic_load(&stop)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *report_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        aclError e = aclrtProcessReport(20);
        if (e != ACL_SUCCESS && e != ACL_ERROR_RT_REPORT_TIMEOUT &&
            e != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            fprintf(stderr, "aclrtProcessReport returned %d\n", e);
            exit(1);
        }
    }
    return NULL;
}

static void note(void *user) {
    (void)user;
    atomic_fetch_add(&ran, 1);
}

static void sync_own_stream(void *user) {
    (void)user;
    atomic_store(&reentrant_code, (int)aclrtSynchronizeStream(served));
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtCreateStream(&served));

    pthread_t idle, reporter;
    EXPECT(pthread_create(&idle, NULL, idle_loop, NULL) == 0);
    EXPECT(pthread_create(&reporter, NULL, report_loop, NULL) == 0);
    CHECK(aclrtSubscribeReport((uint64_t)idle, stream));
    CHECK(aclrtSubscribeReport((uint64_t)reporter, served));

    /* Nobody serves the subscription: the synchronizes give up instead of hanging. */
    CHECK(aclrtLaunchCallback(note, NULL, ACL_CALLBACK_BLOCK, stream));
    double t0 = seconds();
    EXPECT_CODE(aclrtSynchronizeStreamWithTimeout(stream, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    EXPECT_CODE(aclrtSynchronizeStream(stream), ACL_ERROR_RT_REPORT_TIMEOUT);
    EXPECT(seconds() - t0 < 30.0);
    EXPECT(atomic_load(&ran) == 0);
    aclrtStreamStatus status;
    CHECK(aclrtStreamQuery(stream, &status));
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY); /* the callback's task is pending */
    /* Unsubscribing runs the callback here; then the stream finishes. */
    CHECK(aclrtUnSubscribeReport((uint64_t)idle, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(atomic_load(&ran) == 1);

    /* A callback waiting for its own stream is told at once. */
    CHECK(aclrtLaunchCallback(sync_own_stream, NULL, ACL_CALLBACK_BLOCK, served));
    CHECK(aclrtLaunchCallback(note, NULL, ACL_CALLBACK_BLOCK, served));
    t0 = seconds();
    CHECK(aclrtSynchronizeStream(served));
    EXPECT(seconds() - t0 < 10.0);
    EXPECT(atomic_load(&reentrant_code) == ACL_ERROR_RT_WAIT_TIMEOUT);
    EXPECT(atomic_load(&ran) == 2);

    CHECK(aclrtUnSubscribeReport((uint64_t)reporter, served));
    atomic_store(&stop, 1);
    EXPECT(pthread_join(idle, NULL) == 0);
    EXPECT(pthread_join(reporter, NULL) == 0);
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtDestroyStream(served));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("callback_timeouts: ok\n");
    return 0;
}
