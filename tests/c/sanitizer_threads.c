/*
 * sanitizer_threads.c — two host threads and the stream sanitizer's annotations; run with
 * NPUSIM_SANITIZE=report or error (or without: it runs the same and checks its results).
 *
 * Each thread chooses device 0 (thread 0 first), then barriers order their calls. The barrier is invisible
 * to the sanitizer, which sees each thread's calls and the runtime's own synchronization only.
 * Round 1 (the bug): thread 0 copies into all of da, then thread 1 into its second half, with
 * nothing the sanitizer can see between them: one race, naming both host threads and their
 * aclrtMemcpy calls (under `error`, thread 1's copy fails with ACL_ERROR_RT_DEVICE_MEM_ERROR).
 * Round 2 (the fix): the same on db, with npusimSanitizerRelease after thread 0's copy and
 * npusimSanitizerAcquire before thread 1's — the barrier told to the sanitizer. After joining
 * the threads, main calls npusimSanitizerHostSync before it reads db and frees both buffers.
 *
 * Usage: sanitizer_threads
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <string.h>

#include "check.h"

enum { N = 4096, KEY = 7 };

static void *da, *db;
static pthread_barrier_t barrier;
static int error_mode;

static void *run(void *arg) {
    int me = *(int *)arg;
    static unsigned char ones[N], twos[N / 2];
    memset(ones, 1, sizeof ones);
    memset(twos, 2, sizeof twos);
    /* One after the other, so that the sanitizer numbers them in order (host thread 1, 2). */
    if (me == 0) CHECK(aclrtSetDevice(0));
    pthread_barrier_wait(&barrier);
    if (me == 1) CHECK(aclrtSetDevice(0));
    pthread_barrier_wait(&barrier); /* both threads are known to the sanitizer */

    /* Round 1: no synchronization the sanitizer can see. */
    if (me == 0) CHECK(aclrtMemcpy(da, N, ones, N, ACL_MEMCPY_HOST_TO_DEVICE));
    pthread_barrier_wait(&barrier);
    if (me == 1) {
        aclError e = aclrtMemcpy((char *)da + N / 2, N / 2, twos, N / 2, ACL_MEMCPY_HOST_TO_DEVICE);
        EXPECT(e == (error_mode ? ACL_ERROR_RT_DEVICE_MEM_ERROR : ACL_SUCCESS));
    }
    pthread_barrier_wait(&barrier);

    /* Round 2: the hand-off at the barrier, told to the sanitizer. */
    if (me == 0) {
        CHECK(aclrtMemcpy(db, N, ones, N, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(npusimSanitizerRelease(KEY));
    }
    pthread_barrier_wait(&barrier);
    if (me == 1) {
        CHECK(npusimSanitizerAcquire(KEY));
        CHECK(aclrtMemcpy((char *)db + N / 2, N / 2, twos, N / 2, ACL_MEMCPY_HOST_TO_DEVICE));
    }
    return NULL;
}

int main(void) {
    const char *mode = getenv("NPUSIM_SANITIZE");
    error_mode = mode && strcmp(mode, "error") == 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtMalloc(&da, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&db, N, ACL_MEM_MALLOC_HUGE_FIRST));
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t threads[2];
    int ids[2] = {0, 1};
    for (int i = 0; i < 2; i++) EXPECT(pthread_create(&threads[i], NULL, run, &ids[i]) == 0);
    for (int i = 0; i < 2; i++) EXPECT(pthread_join(threads[i], NULL) == 0);
    pthread_barrier_destroy(&barrier);

    /* The joins are invisible too: without this, reading db and freeing the buffers would be
     * reported against the threads' copies. */
    CHECK(npusimSanitizerHostSync());
    unsigned char out[N];
    CHECK(aclrtMemcpy(out, N, db, N, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(out[0] == 1 && out[N / 2 - 1] == 1 && out[N / 2] == 2 && out[N - 1] == 2);
    CHECK(aclrtFree(da));
    CHECK(aclrtFree(db));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("sanitizer_threads: ok\n");
    return 0;
}
