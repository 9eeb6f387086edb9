/*
 * events_notifies.c — event status, timestamps and timed synchronizes, and notifies joining
 * two streams, in the shape of CANN's samples.
 *  - An event never recorded is NOT_READY (the vendor sample's documented output); once its
 *    record fired, COMPLETE.
 *  - aclrtEventGetTimestamp gives simulated microseconds: a later record has a later stamp,
 *    and the difference agrees with aclrtEventElapsedTime.
 *  - aclrtSynchronizeEventWithTimeout gives up after simulated milliseconds with
 *    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, and succeeds with -1.
 *  - A notify recorded after a kernel on one stream holds another stream's copy until the
 *    kernel is done, whether the wait was enqueued after the record or before it; a wait
 *    whose record never comes is reported, not hung on.
 *
 * Usage: events_notifies [kernels-dir]
 */
#include "check.h"

enum { N = 1 << 20 };

int main(int argc, char **argv) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream s1, s2;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &bin));
    aclrtFuncHandle vadd;
    CHECK(aclrtBinaryGetFunction(bin, "vadd_f32", &vadd));
    const size_t bytes = N * sizeof(float);
    float *host;
    CHECK(aclrtMallocHost((void **)&host, bytes));
    for (size_t i = 0; i < N; i++) {
        host[i] = (float)(i % 1000);
    }
    void *a, *c;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(a, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    /* Status: never recorded is NOT_READY; a fired record is COMPLETE. */
    aclrtEvent start, end;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEventWithFlag(&end, ACL_EVENT_TIME_LINE));
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    CHECK(aclrtQueryEventStatus(start, &st));
    EXPECT(st == ACL_EVENT_RECORDED_STATUS_NOT_READY);
    uint64_t t0, t1;
    EXPECT_CODE(aclrtEventGetTimestamp(start, &t0), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);

    /* A one-block add of a million floats takes milliseconds of simulated time. */
    VaddArgs args = {a, a, c, N};
    CHECK(aclrtRecordEvent(start, s1));
    CHECK(aclrtLaunchKernel(vadd, 1, &args, sizeof args, s1));
    CHECK(aclrtRecordEvent(end, s1));
    EXPECT_CODE(aclrtEventGetTimestamp(end, &t1), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    EXPECT_CODE(aclrtSynchronizeEventWithTimeout(end, 1), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    EXPECT_CODE(aclrtSynchronizeEventWithTimeout(end, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtSynchronizeDeviceWithTimeout(1), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK(aclrtSynchronizeEventWithTimeout(end, -1));
    CHECK(aclrtQueryEventStatus(end, &st));
    EXPECT(st == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK(aclrtEventGetTimestamp(start, &t0));
    CHECK(aclrtEventGetTimestamp(end, &t1));
    float ms;
    CHECK(aclrtEventElapsedTime(&ms, start, end));
    printf("events_notifies: kernel from %llu us to %llu us (%.3f ms)\n",
           (unsigned long long)t0, (unsigned long long)t1, ms);
    EXPECT(t1 > t0 + 1000); /* more than the 1 ms that timed out */
    double diff_ms = (double)(t1 - t0) / 1000.0;
    EXPECT(diff_ms > ms - 0.01 && diff_ms < ms + 0.01);
    /* A reset event is never-recorded again. */
    CHECK(aclrtResetEvent(start, s1));
    CHECK(aclrtQueryEventStatus(start, &st));
    EXPECT(st == ACL_EVENT_RECORDED_STATUS_NOT_READY);

    /* A notify: s2's copy of c waits for s1's kernel that writes it; first with the record
     * enqueued before the wait, then with the wait enqueued first, as a consumer stream set
     * up ahead of its producer would. */
    aclrtNotify notify;
    CHECK(aclrtCreateNotify(&notify, ACL_NOTIFY_DEFAULT));
    uint32_t id;
    CHECK(aclrtGetNotifyId(notify, &id));
    EXPECT(id != 0);
    for (int round = 0; round < 2; round++) {
        CHECK(aclrtMemsetAsync(c, bytes, 0, bytes, s1));
        CHECK(aclrtSynchronizeStream(s1));
        if (round == 1) {
            CHECK(aclrtWaitAndResetNotify(notify, s2, 1000));
            CHECK(aclrtMemcpyAsync(host, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s2));
        }
        CHECK(aclrtLaunchKernel(vadd, 1, &args, sizeof args, s1));
        CHECK(aclrtRecordNotify(notify, s1));
        uint32_t task = 0;
        CHECK(aclrtGetThreadLastTaskId(&task));
        EXPECT(task >= 1);
        if (round == 0) {
            CHECK(aclrtWaitAndResetNotify(notify, s2, 1000));
            CHECK(aclrtMemcpyAsync(host, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s2));
        }
        CHECK(aclrtSynchronizeStream(s2));
        for (size_t i = 0; i < N; i++) {
            if (host[i] != 2.0f * (float)(i % 1000)) {
                fprintf(stderr, "round %d: c[%zu] = %f: the copy did not wait for the kernel\n",
                        round, i, host[i]);
                return 1;
            }
        }
    }
    /* Both records were consumed: a third wait has no record to come, which the synchronize
     * reports instead of hanging; the stream still goes by force. */
    CHECK(aclrtWaitAndResetNotify(notify, s2, 10));
    EXPECT_CODE(aclrtSynchronizeStream(s2), ACL_ERROR_RT_WAIT_TIMEOUT);
    CHECK(aclrtDestroyStreamForce(s2));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtDestroyNotify(notify));
    EXPECT_CODE(aclrtRecordNotify(notify, s1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtCreateNotify(NULL, 0), ACL_ERROR_INVALID_PARAM);

    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(end));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(c));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStreamForce(s1));
    CHECK(aclrtDestroyStreamForce(s2));
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("events_notifies: ok\n");
    return 0;
}
