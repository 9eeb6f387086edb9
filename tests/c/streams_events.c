/*
 * streams_events.c — two streams joined by an event. Stream s1 computes c = a + b; stream s2
 * waits on an event recorded after that kernel, then computes d = c + c and copies d out. Only
 * s2 is synchronized: the event alone orders the two streams. Then: elapsed time between
 * records, a polling loop on an event, an event reset, and an event destroyed while a wait on
 * it is still queued (the wait still holds).
 *
 * Usage: streams_events [kernels-dir]
 */
#include "check.h"

enum { N = 16384 };

static void expect_double_sum(const float *d, const float *a, const float *b) {
    for (size_t i = 0; i < N; i++) {
        float want = (a[i] + b[i]) + (a[i] + b[i]);
        if (d[i] != want) {
            fprintf(stderr, "d[%zu] = %f, expected %f\n", i, d[i], want);
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    const size_t bytes = N * sizeof(float);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2;
    /* s2 has the higher priority (0): without the event its kernel would go first. */
    CHECK(aclrtCreateStreamWithConfig(&s1, 1, ACL_STREAM_FAST_LAUNCH));
    CHECK(aclrtCreateStream(&s2));

    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));

    float *ha, *hb, *hd;
    CHECK(aclrtMallocHost((void **)&ha, bytes));
    CHECK(aclrtMallocHost((void **)&hb, bytes));
    CHECK(aclrtMallocHost((void **)&hd, bytes));
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)(i % 100);
        hb[i] = 0.25f * (float)(i % 13);
    }
    void *da, *db, *dc, *dd;
    CHECK(aclrtMalloc(&da, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&db, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dc, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dd, bytes, ACL_MEM_MALLOC_HUGE_FIRST));

    aclrtEvent start, mid, end;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEventWithFlag(&mid, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    CHECK(aclrtCreateEvent(&end));

    /* s1: c = a + b, on one block (slow), then the event. */
    CHECK(aclrtRecordEvent(start, s1));
    CHECK(aclrtMemcpyAsync(da, bytes, ha, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtMemcpyAsync(db, bytes, hb, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    VaddArgs first = {da, db, dc, N};
    CHECK(aclrtLaunchKernel(vadd, 1, &first, sizeof first, s1));
    CHECK(aclrtRecordEvent(mid, s1));

    /* s2: waits for the event, d = c + c, copy out. */
    CHECK(aclrtStreamWaitEvent(s2, mid));
    VaddArgs second = {dc, dc, dd, N};
    CHECK(aclrtLaunchKernel(vadd, 4, &second, sizeof second, s2));
    CHECK(aclrtMemcpyAsync(hd, bytes, dd, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s2));
    CHECK(aclrtRecordEvent(end, s2));

    CHECK(aclrtSynchronizeStream(s2));
    expect_double_sum(hd, ha, hb);
    aclrtEventRecordedStatus st;
    CHECK(aclrtQueryEventStatus(mid, &st));
    EXPECT(st == ACL_EVENT_RECORDED_STATUS_COMPLETE); /* s2 could only go on after it */

    float to_mid = 0, to_end = 0;
    CHECK(aclrtEventElapsedTime(&to_mid, start, mid));
    CHECK(aclrtEventElapsedTime(&to_end, start, end));
    EXPECT(to_mid > 0.0f && to_end > to_mid);
    printf("s1 copies + kernel: %.3f ms (simulated); through s2's copy out: %.3f ms\n", to_mid,
           to_end);

    /* Polling an event ends: each NOT_READY answer advances the device. */
    aclrtEvent poll;
    CHECK(aclrtCreateEvent(&poll));
    CHECK(aclrtLaunchKernel(vadd, 1, &first, sizeof first, s1));
    CHECK(aclrtRecordEvent(poll, s1));
    long polls = 0;
    do {
        CHECK(aclrtQueryEventStatus(poll, &st));
        polls++;
    } while (st != ACL_EVENT_RECORDED_STATUS_COMPLETE && polls < 1000000);
    EXPECT(st == ACL_EVENT_RECORDED_STATUS_COMPLETE && polls > 1);
    CHECK(aclrtSynchronizeEvent(poll));

    /* A reset event is as new: not ready (as ACL reports an event never recorded), and
     * without a timestamp. */
    CHECK(aclrtResetEvent(mid, s2));
    CHECK(aclrtQueryEventStatus(mid, &st));
    EXPECT(st == ACL_EVENT_RECORDED_STATUS_NOT_READY);
    EXPECT_CODE(aclrtEventElapsedTime(&to_mid, start, mid), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    CHECK(aclrtRecordEvent(mid, s1)); /* and reusable */
    CHECK(aclrtSynchronizeEvent(mid));

    /* An event destroyed while a wait on it is queued: the wait still holds. s1 recomputes c
     * from new inputs on one slow block; s2 must see the new c. */
    for (size_t i = 0; i < N; i++) {
        hb[i] += 1.0f;
    }
    aclrtEvent gone;
    CHECK(aclrtCreateEvent(&gone));
    CHECK(aclrtMemcpyAsync(db, bytes, hb, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtLaunchKernel(vadd, 1, &first, sizeof first, s1));
    CHECK(aclrtRecordEvent(gone, s1));
    CHECK(aclrtStreamWaitEvent(s2, gone));
    CHECK(aclrtDestroyEvent(gone));
    EXPECT_CODE(aclrtSynchronizeEvent(gone), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtLaunchKernel(vadd, 4, &second, sizeof second, s2));
    CHECK(aclrtMemcpyAsync(hd, bytes, dd, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s2));
    CHECK(aclrtSynchronizeStream(s2));
    expect_double_sum(hd, ha, hb);

    CHECK(aclrtSynchronizeDevice());
    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(mid));
    CHECK(aclrtDestroyEvent(end));
    CHECK(aclrtDestroyEvent(poll));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtFreeHost(ha));
    CHECK(aclrtFreeHost(hb));
    CHECK(aclrtFreeHost(hd));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("streams_events: ok\n");
    return 0;
}
