/*
 * acl/acl.h — the ACL runtime API of npusim, a simulated NPU.
 *
 * Written for npusim from ACL's documented signatures: the function names, parameter types,
 * handle types, enum values and error codes are ACL's, so a program written against ACL's
 * runtime API (aclInit, aclrt*) compiles against this header and links libnpusim_acl
 * (.so or .a) instead of the real runtime. Only the subset below exists.
 *
 * Build and link (from the repository root):
 *     cargo build --release -p npusim-acl
 *     cc prog.c -Iacl/include -Ltarget/release -lnpusim_acl -Wl,-rpath,$PWD/target/release
 *
 * npusim specifics, in short (details in acl/src/ and the README):
 *  - Configuration at aclInit comes from the environment: NPUSIM_DEVICES (default 1),
 *    NPUSIM_PRESET (910b | small), NPUSIM_TRACE (write the simulated timeline there, as
 *    Chrome trace JSON, at aclFinalize). aclInit's JSON file is not interpreted.
 *  - Handles are opaque numbers checked on every use: NULL is ACL_ERROR_INVALID_PARAM, a
 *    handle this library did not hand out or that was destroyed ACL_ERROR_RT_PARAM_INVALID.
 *    A NULL aclrtStream names the current context's default stream.
 *  - Device pointers are simulated device addresses: never dereference them on the host.
 *  - Time is simulated: timeouts of synchronizes are simulated milliseconds, and the device
 *    advances while a host thread waits on it (a synchronize, or a query that polls).
 *  - Contexts start in ACL's default failure mode, ACL_CONTINUE_ON_FAILURE.
 *  - No function aborts the process: an internal failure is ACL_ERROR_RT_INTERNAL_ERROR.
 */
#ifndef NPUSIM_ACL_ACL_H_
#define NPUSIM_ACL_ACL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ---------------------------------------------------------------------------- */

typedef int aclError;
typedef void *aclrtContext;
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtBinHandle;
typedef void *aclrtFuncHandle;
typedef void *aclrtMemPool;
typedef struct aclrtExceptionInfo aclrtExceptionInfo;

typedef void (*aclrtCallback)(void *userData);
typedef void (*aclrtExceptionInfoCallback)(aclrtExceptionInfo *exceptionInfo);

/* ---- error codes (ACL's numbers) ---------------------------------------------------- */

#define ACL_SUCCESS 0
#define ACL_ERROR_NONE 0

#define ACL_ERROR_INVALID_PARAM 100000        /* a NULL or out-of-range argument */
#define ACL_ERROR_UNINITIALIZE 100001         /* called before aclInit */
#define ACL_ERROR_REPEAT_INITIALIZE 100002    /* aclInit while initialized */
#define ACL_ERROR_INVALID_FILE 100003         /* a file that cannot be read */
#define ACL_ERROR_WRITE_FILE 100004           /* NPUSIM_TRACE could not be written */
#define ACL_ERROR_PARSE_FILE 100006           /* a malformed kernel binary */
#define ACL_ERROR_REPEAT_SUBSCRIBE 100033     /* the stream already has a report thread */
#define ACL_ERROR_STREAM_NOT_SUBSCRIBE 100034 /* the stream is not served by that thread */
#define ACL_ERROR_THREAD_NOT_SUBSCRIBE 100035 /* aclrtProcessReport on a thread serving none */
#define ACL_ERROR_WAIT_CALLBACK_TIMEOUT 100036 /* aclrtProcessReport saw no callback in time */
#define ACL_ERROR_REPEAT_FINALIZE 100037      /* aclFinalize while not initialized */

#define ACL_ERROR_RT_PARAM_INVALID 107000          /* an unknown handle or a refused value */
#define ACL_ERROR_RT_INVALID_DEVICEID 107001       /* no such device */
#define ACL_ERROR_RT_CONTEXT_NULL 107002           /* the thread's current context is gone */
#define ACL_ERROR_RT_STREAM_CONTEXT 107003         /* an object of another context */
#define ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID 107006 /* elapsed time of an unrecorded event */
#define ACL_ERROR_RT_STREAM_NO_CB_REG 107015       /* aclrtLaunchCallback, stream unsubscribed */
#define ACL_ERROR_RT_INVALID_MEMORY_TYPE 107016    /* host memory of the wrong kind, or freed */
#define ACL_ERROR_RT_INVALID_HANDLE 107017         /* an object destroyed in the runtime */
#define ACL_ERROR_RT_WAIT_TIMEOUT 107019           /* a wait that can never finish */
#define ACL_ERROR_RT_STREAM_ABORT 107023           /* a task aborted after an earlier failure */
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001      /* a memory pool's maxSize is reached */
#define ACL_ERROR_RT_MEMORY_FREE 207002            /* a free of a pointer not allocated */
#define ACL_ERROR_RT_DEVICE_OOM 207018             /* device memory exhausted */
#define ACL_ERROR_RT_INTERNAL_ERROR 507000         /* a bug in npusim; the process goes on */
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE 507006
#define ACL_ERROR_RT_CONTEXT_RELEASE_ERROR 507007  /* a context that cannot be destroyed now */
#define ACL_ERROR_RT_AICORE_TIMEOUT 507014         /* a kernel exceeded its time budget */
#define ACL_ERROR_RT_AICORE_EXCEPTION 507015       /* a kernel faulted (e.g. a bad address) */
#define ACL_ERROR_RT_AICORE_TRAP_EXCEPTION 507016  /* a kernel trapped (e.g. divide by zero) */
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046    /* aclrtSynchronizeStreamWithTimeout */

/* ---- enums and flags ----------------------------------------------------------------- */

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
    ACL_MEM_MALLOC_HUGE1G_ONLY,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100, /* accepted and ignored */
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000 /* accepted and ignored */
} aclrtMemMallocPolicy;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEFAULT, /* direction from the pointers */
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE
} aclrtMemcpyKind;

typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef enum aclrtCallbackBlockType {
    ACL_CALLBACK_NO_BLOCK,
    ACL_CALLBACK_BLOCK
} aclrtCallbackBlockType;

typedef enum aclrtMemLocationType {
    ACL_MEM_LOCATION_TYPE_HOST = 0, /* not supported for pools */
    ACL_MEM_LOCATION_TYPE_DEVICE = 1
} aclrtMemLocationType;

typedef enum aclrtMemAllocationType { ACL_MEM_ALLOCATION_TYPE_PINNED = 0 } aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
    ACL_MEM_HANDLE_TYPE_NONE = 0,
    ACL_MEM_HANDLE_TYPE_POSIX = 2
} aclrtMemHandleType;

/* aclrtCreateEventWithFlag: every npusim event synchronizes and keeps timestamps. */
#define ACL_EVENT_SYNC 0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE 0x00000008U

/* aclrtCreateStreamWithConfig flags: accepted, no effect in the model. */
#define ACL_STREAM_FAST_LAUNCH 0x00000001U
#define ACL_STREAM_FAST_SYNC 0x00000002U
#define ACL_STREAM_PERSISTENT 0x00000004U
#define ACL_STREAM_HUGE 0x00000008U

/* aclrtSetStreamFailureMode */
#define ACL_CONTINUE_ON_FAILURE 0x00000000U
#define ACL_STOP_ON_FAILURE 0x00000001U

/* ---- structs -------------------------------------------------------------------------- */

typedef struct aclrtMemLocation {
    uint32_t id;               /* device id */
    aclrtMemLocationType type; /* ACL_MEM_LOCATION_TYPE_DEVICE */
} aclrtMemLocation;

typedef struct aclrtMemPoolProps {
    aclrtMemAllocationType allocType;
    aclrtMemHandleType handleType;
    aclrtMemLocation location;
    size_t maxSize; /* most bytes allocated from the pool at once; 0: no bound */
    unsigned char reserved[32];
} aclrtMemPoolProps;

typedef enum aclrtBinaryLoadOptionType {
    ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD = 1,
    ACL_RT_BINARY_LOAD_OPT_MAGIC = 2,
    ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE = 3
} aclrtBinaryLoadOptionType;

typedef union aclrtBinaryLoadOptionValue {
    uint32_t isLazyLoad;
    uint32_t magic;
    int32_t cpuKernelMode;
    uint32_t rsv[4];
} aclrtBinaryLoadOptionValue;

typedef struct aclrtBinaryLoadOption {
    aclrtBinaryLoadOptionType type;
    aclrtBinaryLoadOptionValue value;
} aclrtBinaryLoadOption;

/* Load options are accepted and ignored: npusim kernel objects need none. */
typedef struct aclrtBinaryLoadOptions {
    aclrtBinaryLoadOption *options;
    size_t numOpt;
} aclrtBinaryLoadOptions;

/* ---- init ------------------------------------------------------------------------------ */

aclError aclInit(const char *configPath); /* configPath: NULL, or a readable file */
aclError aclFinalize(void);
/* The messages of this thread's failed calls since the last call, newest first, one per line;
 * clears them. NULL when there are none. Valid until this thread's next call. */
const char *aclGetRecentErrMsg(void);

/* ---- devices --------------------------------------------------------------------------- */

aclError aclrtSetDevice(int32_t deviceId);   /* makes the device's primary context current */
aclError aclrtResetDevice(int32_t deviceId); /* last one: releases the primary context's objects */
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtGetDeviceCount(uint32_t *count);
aclError aclrtSynchronizeDevice(void);

/* ---- contexts ------------------------------------------------------------------------- */

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId); /* and makes it current */
aclError aclrtDestroyContext(aclrtContext context);
aclError aclrtSetCurrentContext(aclrtContext context);
aclError aclrtGetCurrentContext(aclrtContext *context);

/* ---- streams -------------------------------------------------------------------------- */

aclError aclrtCreateStream(aclrtStream *stream);
/* priority: lower is dispatched first (honoured by npusim); flag: accepted, no effect. */
aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
/* timeout: simulated milliseconds, or -1 for ever. */
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
/* NOT_READY also advances the device by one frame, so a polling loop ends. */
aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
/* Applies to every stream of the stream's context, as ACL documents. */
aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);

/* ---- events --------------------------------------------------------------------------- */

aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);

/* ---- memory --------------------------------------------------------------------------- */

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *devPtr); /* reused only after the queued work that names it is done */
aclError aclrtMallocHost(void **hostPtr, size_t size); /* pinned, zeroed */
aclError aclrtFreeHost(void *hostPtr);
/* Synchronous; waits for nothing but itself (synchronize the producing stream first). */
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
/* Asynchronous with aclrtMallocHost memory; with other host memory it returns once the
 * memory is no longer needed (host-to-device: staged; device-to-host: waited for). */
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream);
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream);

/* Stream-ordered allocation: a pool of the current context (location.id its device). */
aclError aclrtMemPoolCreate(aclrtMemPool *memPool, const aclrtMemPoolProps *poolProps);
aclError aclrtMemPoolDestroy(const aclrtMemPool memPool);
aclError aclrtMemPoolMallocAsync(void **ptr, size_t size, aclrtMemPool memPool, aclrtStream stream);
aclError aclrtMemPoolFreeAsync(void *ptr, aclrtStream stream);

/* ---- kernels -------------------------------------------------------------------------- */

/* Kernel objects for the simulated AI core: see examples/kernels/ and device/sdk/npusim.h. */
aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options,
                                 aclrtBinHandle *binHandle);
aclError aclrtBinaryLoadFromData(const void *data, size_t length,
                                 const aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle);
aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName,
                                aclrtFuncHandle *funcHandle);
aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle);
/* argsData: one 8-byte slot per kernel argument, in order (a pointer or an integer, zero- or
 * sign-extended), in host memory or in device memory of the current context; argsSize is a
 * multiple of 8. E.g. struct { void *a, *b, *c; uint64_t n; } args for vadd_f32(a, b, c, n). */
aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void *argsData,
                           size_t argsSize, aclrtStream stream);
/* npusim extension: as aclrtLaunchKernel; bit i of floatMask marks slot i as a float argument
 * (its value in the slot's low 4 bytes), passed in a float register. */
aclError npusimLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void *argsData,
                            size_t argsSize, uint64_t floatMask, aclrtStream stream);

/* ---- host callbacks ------------------------------------------------------------------- */

/* threadId: the pthread_t of the thread that will call aclrtProcessReport. */
aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream);
/* timeout: wall-clock milliseconds, or -1 for ever. Runs one callback that came due. */
aclError aclrtProcessReport(int32_t timeout);
aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);

/* ---- failures ------------------------------------------------------------------------- */

/* Told about every failing task; runs on the host thread that drove the device (e.g. the one
 * that synchronizes). NULL removes it. The info is valid only during the call. */
aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback);
uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetThreadIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo *info);

#ifdef __cplusplus
}
#endif

#endif /* NPUSIM_ACL_ACL_H_ */
