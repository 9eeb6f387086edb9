/*
 * acl/acl_rt.h — the ACL runtime API of npusim, a simulated NPU: init, devices, contexts,
 * streams, events, notifies, memory, kernels, host functions and failures.
 *
 * Written for npusim from ACL's documented declarations: names, parameter types, enum values
 * and error codes are ACL's (CANN 8.x), so a program written against ACL's runtime API compiles
 * against this header (or acl/acl.h) and links libnpusim_acl instead of the real runtime. Only
 * the subset below exists; where a call has no meaning in a simulator, its comment says what
 * npusim does (what real hardware would observably do). See acl/acl.h for the npusim notes.
 */
#ifndef NPUSIM_ACL_ACL_RT_H_
#define NPUSIM_ACL_ACL_RT_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"
#include "acl_rt_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclrtMemPool;
typedef struct aclrtExceptionInfo aclrtExceptionInfo;

typedef void (*aclrtCallback)(void *userData);
typedef void (*aclrtExceptionInfoCallback)(aclrtExceptionInfo *exceptionInfo);

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

/* aclrtCreateNotify flags: accepted, no effect in the model. */
#define ACL_NOTIFY_DEFAULT 0x00000000U
#define ACL_NOTIFY_DEVICE_USE_ONLY 0x00000001U

/* The version aclrtGetVersion reports: the ACL runtime API version this header follows. */
#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 17
#define ACL_PATCH_VERSION 0

typedef enum aclrtRunMode { ACL_DEVICE, ACL_HOST } aclrtRunMode;

typedef enum aclrtEventStatus {
    ACL_EVENT_STATUS_COMPLETE = 0,
    ACL_EVENT_STATUS_NOT_READY = 1,
    ACL_EVENT_STATUS_RESERVED = 2
} aclrtEventStatus;

/* aclrtGetMemInfo. The simulated device has HBM and no DDR: the DDR kinds report 0 and 0. */
typedef enum aclrtMemAttr {
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    ACL_DDR_MEM_HUGE,
    ACL_DDR_MEM_NORMAL,
    ACL_HBM_MEM_HUGE,
    ACL_HBM_MEM_NORMAL,
    ACL_DDR_MEM_P2P_HUGE,
    ACL_DDR_MEM_P2P_NORMAL,
    ACL_HBM_MEM_P2P_HUGE,
    ACL_HBM_MEM_P2P_NORMAL,
    ACL_HBM_MEM_HUGE1G,
    ACL_HBM_MEM_P2P_HUGE1G,
    ACL_MEM_NORMAL,
    ACL_MEM_HUGE,
    ACL_MEM_HUGE1G,
    ACL_MEM_P2P_NORMAL,
    ACL_MEM_P2P_HUGE,
    ACL_MEM_P2P_HUGE1G
} aclrtMemAttr;

typedef enum aclrtDeviceStatus {
    ACL_RT_DEVICE_STATUS_NORMAL = 0,
    ACL_RT_DEVICE_STATUS_ABNORMAL,
    ACL_RT_DEVICE_STATUS_END = 0xFFFF
} aclrtDeviceStatus;

/* Device resource limits: an npusim AI core is one cube core with two vector cores. */
typedef enum {
    ACL_RT_DEV_RES_CUBE_CORE = 0,
    ACL_RT_DEV_RES_VECTOR_CORE
} aclrtDevResLimitType;

/* aclrtGetDeviceInfo attributes npusim answers (others: ACL_ERROR_RT_FEATURE_NOT_SUPPORT). */
typedef enum {
    ACL_DEV_ATTR_AICPU_CORE_NUM = 1,            /* 0: the model has no AI CPU */
    ACL_DEV_ATTR_AICORE_CORE_NUM = 101,
    ACL_DEV_ATTR_CUBE_CORE_NUM = 102,
    ACL_DEV_ATTR_VECTOR_CORE_NUM = 201,         /* two per AI core */
    ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE = 204,    /* the unified buffer per core, bytes */
    ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE = 301,   /* HBM bytes */
    ACL_DEV_ATTR_L2_CACHE_SIZE = 302
} aclrtDevAttr;

typedef enum aclrtLastErrLevel { ACL_RT_THREAD_LEVEL = 0 } aclrtLastErrLevel;

typedef enum {
    ACL_RT_NO_ERROR = 0,
    ACL_RT_ERROR_MEMORY = 1,
    ACL_RT_ERROR_L2 = 2,
    ACL_RT_ERROR_AICORE = 3,
    ACL_RT_ERROR_LINK = 4,
    ACL_RT_ERROR_L3_PORT = 5,
    ACL_RT_ERROR_OTHERS = 0xFFFF
} aclrtErrorType;

typedef enum aclrtAicoreErrorType {
    ACL_RT_AICORE_ERROR_UNKNOWN,
    ACL_RT_AICORE_ERROR_SW,
    ACL_RT_AICORE_ERROR_HW_LOCAL
} aclrtAicoreErrorType;

typedef enum aclrtLaunchKernelAttrId {
    ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE = 1,
    ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE = 2,
    ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE = 3,
    ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET = 4,
    ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH = 5,
    ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP = 6,
    ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT = 7,
    ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US = 8,
    ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING = 9
} aclrtLaunchKernelAttrId;

typedef enum { ACL_RT_ENGINE_TYPE_AIC = 0, ACL_RT_ENGINE_TYPE_AIV } aclrtEngineType;

/* ---- structs -------------------------------------------------------------------------- */

typedef struct aclrtUtilizationExtendInfo aclrtUtilizationExtendInfo;
/* aclrtGetDeviceUtilizationRate: percentages over the simulated run so far. */
typedef struct aclrtUtilizationInfo {
    int32_t cubeUtilization;   /* AI-core busy time over AI cores x device time */
    int32_t vectorUtilization; /* the same (an npusim core runs both) */
    int32_t aicpuUtilization;  /* 0: no AI CPU in the model */
    int32_t memoryUtilization; /* bytes allocated over HBM bytes */
    aclrtUtilizationExtendInfo *utilizationExtend; /* reserved: NULL */
} aclrtUtilizationInfo;

typedef struct aclrtMemUceInfo {
    void *addr;
    size_t len;
    size_t reserved[14];
} aclrtMemUceInfo;

typedef struct {
    size_t arraySize;
    aclrtMemUceInfo memUceInfoArray[20];
} aclrtMemUceInfoArray;

typedef union aclrtErrorInfoDetail {
    aclrtMemUceInfoArray uceInfo;
    aclrtAicoreErrorType aicoreErrType;
} aclrtErrorInfoDetail;

/* aclrtGetErrorVerbose: the device's latest failure. */
typedef struct aclrtErrorInfo {
    uint8_t tryRepair;
    uint8_t hasDetail;
    uint8_t reserved[2];
    aclrtErrorType errorType;
    aclrtErrorInfoDetail detail;
} aclrtErrorInfo;

typedef struct {
    uint32_t timeoutLow;
    uint32_t timeoutHigh;
} aclrtTimeoutUs;

typedef union aclrtLaunchKernelAttrValue {
    uint8_t schemMode;
    uint32_t dynUBufSize;
    aclrtEngineType engineType;
    uint32_t blockDimOffset;
    uint8_t isBlockTaskPrefetch;
    uint8_t isDataDump;
    uint16_t timeout; /* seconds */
    aclrtTimeoutUs timeoutUs;
    uint8_t enableProfiling;
    uint32_t rsv[4];
} aclrtLaunchKernelAttrValue;

typedef struct aclrtLaunchKernelAttr {
    aclrtLaunchKernelAttrId id;
    aclrtLaunchKernelAttrValue value;
} aclrtLaunchKernelAttr;

/* Launch attributes: ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT (seconds) and _TIMEOUT_US give the
 * launch its own AI-core timeout in simulated time, in place of the device's
 * (aclrtSetOpExecuteTimeOut); 0 keeps the device's. The others are accepted and have no effect
 * in the model. */
typedef struct aclrtLaunchKernelCfg {
    aclrtLaunchKernelAttr *attrs;
    size_t numAttrs;
} aclrtLaunchKernelCfg;

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

ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath); /* configPath: NULL, or a readable file */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
/* The messages of this thread's failed calls since the last call, newest first, one per line;
 * clears them. NULL when there are none. Valid until this thread's next call. */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);
/* ACL_MAJOR_VERSION.ACL_MINOR_VERSION.ACL_PATCH_VERSION. */
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion,
                                             int32_t *patchVersion);
/* ACL_HOST: an npusim program runs on the host. */
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode *runMode);

/* ---- devices --------------------------------------------------------------------------- */

ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);   /* makes the device's primary context current */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId); /* last one: releases the primary context's objects */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);
/* Resets the device whatever the number of aclrtSetDevice calls (as the last aclrtResetDevice). */
ACL_FUNC_VISIBILITY aclError aclrtResetDeviceForce(int32_t deviceId);
/* timeout: simulated milliseconds, or -1 for ever; ACL_ERROR_RT_STREAM_SYNC_TIMEOUT after it. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout);
/* Device memory of the current context's device: free and total bytes. */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);
/* ACL_RT_DEVICE_STATUS_NORMAL for every simulated device (a kernel fault is not a device fault). */
ACL_FUNC_VISIBILITY aclError aclrtQueryDeviceStatus(int32_t deviceId, aclrtDeviceStatus *deviceStatus);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo *utilizationInfo);
/* Priorities 0 (greatest, dispatched first) to 7 (least), as aclrtCreateStreamWithConfig takes. */
ACL_FUNC_VISIBILITY aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority, int32_t *greatestPriority);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value);
/* Resource limits: the most cube (AI) or vector cores one kernel of this process gets on the
 * device; a kernel's blocks then share that many cores. Takes effect for kernels dispatched from
 * then on. Get returns the limit in force (the device's cores when none is set). */
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t *value);
ACL_FUNC_VISIBILITY aclError aclrtSetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t value);
ACL_FUNC_VISIBILITY aclError aclrtResetDeviceResLimit(int32_t deviceId);
/* The limit in force for the current thread's context's device. */
ACL_FUNC_VISIBILITY aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value);

/* ---- contexts ------------------------------------------------------------------------- */

ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId); /* and makes it current */
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext *context);
/* A handle of the current context's default stream (the stream NULL names); it cannot be
 * destroyed. */
ACL_FUNC_VISIBILITY aclError aclrtCtxGetCurrentDefaultStream(aclrtStream *stream);

/* ---- streams -------------------------------------------------------------------------- */

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
/* priority: lower is dispatched first (honoured by npusim); flag: accepted, no effect. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
/* As aclrtDestroyStream, and succeeds even when the stream's work failed or can never finish
 * (npusim lets queued work that can run finish first). */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStreamForce(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
/* timeout: simulated milliseconds, or -1 for ever. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
/* NOT_READY also advances the device by one frame, so a polling loop ends. */
ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
/* Applies to every stream of the stream's context, as ACL documents. */
ACL_FUNC_VISIBILITY aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);

/* ---- events --------------------------------------------------------------------------- */

ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent *event);
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
/* timeout: simulated milliseconds, or -1 for ever; ACL_ERROR_RT_EVENT_SYNC_TIMEOUT after it. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);
/* NOT_READY until the latest record fired, and for an event never recorded; a NOT_READY answer
 * advances the device by one frame, so a polling loop ends. */
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);
/* When the latest record fired, in microseconds of simulated device time since aclInit. */
ACL_FUNC_VISIBILITY aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp);

/* ---- notifies --------------------------------------------------------------------------- */

/* A notify joins two streams of a context: aclrtRecordNotify marks a point in one stream;
 * aclrtWaitAndResetNotify makes another stream's later work wait until the next record not yet
 * consumed is reached (enqueued before the wait or after it), and consumes it. Records and waits
 * pair up in order (a hardware notify is a flag; programs that record once per wait cannot tell).
 * timeout (ms of simulated time; 0: aclrtSetOpWaitTimeout's, or for ever): a wait blocked
 * longer fails with ACL_ERROR_RT_WAIT_TIMEOUT, reported at the stream's next synchronize, and
 * the stream goes on; a wait with no timeout whose record never comes is reported by the next
 * synchronize as ACL_ERROR_RT_WAIT_TIMEOUT too. */
ACL_FUNC_VISIBILITY aclError aclrtCreateNotify(aclrtNotify *notify, uint64_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyNotify(aclrtNotify notify);
ACL_FUNC_VISIBILITY aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t timeout);
ACL_FUNC_VISIBILITY aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t *notifyId);

/* ---- memory --------------------------------------------------------------------------- */

ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr); /* reused only after the queued work that names it is done */
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size); /* pinned, zeroed */
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);
/* Synchronous; waits for nothing but itself (synchronize the producing stream first). */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
/* Asynchronous with aclrtMallocHost memory; with other host memory it returns once the
 * memory is no longer needed (host-to-device: staged; device-to-host: waited for).
 * ACL_MEMCPY_HOST_TO_HOST is ACL_ERROR_RT_FEATURE_NOT_SUPPORT, as in CANN (use aclrtMemcpy). */
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream);

/* Stream-ordered allocation: a pool of the current context (location.id its device). */
ACL_FUNC_VISIBILITY aclError aclrtMemPoolCreate(aclrtMemPool *memPool, const aclrtMemPoolProps *poolProps);
ACL_FUNC_VISIBILITY aclError aclrtMemPoolDestroy(const aclrtMemPool memPool);
ACL_FUNC_VISIBILITY aclError aclrtMemPoolMallocAsync(void **ptr, size_t size, aclrtMemPool memPool, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMemPoolFreeAsync(void *ptr, aclrtStream stream);

/* ---- kernels -------------------------------------------------------------------------- */

typedef void *aclrtBinHandle;
typedef void *aclrtFuncHandle;
typedef void *aclrtArgsHandle;
typedef void *aclrtParamHandle;

/* A function handle may be launched in any context of the device its binary was loaded on, as
 * in ACL (npusim loads the binary into the launching context on first use there). */

/* Kernel objects for the simulated AI core: see examples/kernels/ and device/sdk/npusim.h. */
ACL_FUNC_VISIBILITY aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options,
                                 aclrtBinHandle *binHandle);
ACL_FUNC_VISIBILITY aclError aclrtBinaryLoadFromData(const void *data, size_t length,
                                 const aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle);
ACL_FUNC_VISIBILITY aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName,
                                aclrtFuncHandle *funcHandle);
ACL_FUNC_VISIBILITY aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle);
/* argsData: one 8-byte slot per kernel argument, in order (a pointer or an integer, zero- or
 * sign-extended), in host memory or in device memory of the current context; argsSize is a
 * multiple of 8. E.g. struct { void *a, *b, *c; uint64_t n; } args for vadd_f32(a, b, c, n). */
ACL_FUNC_VISIBILITY aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void *argsData,
                           size_t argsSize, aclrtStream stream);
/* npusim extension: as aclrtLaunchKernel; bit i of floatMask marks slot i as a float argument
 * (its value in the slot's low 4 bytes), passed in a float register. */
ACL_FUNC_VISIBILITY aclError npusimLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void *argsData,
                            size_t argsSize, uint64_t floatMask, aclrtStream stream);

/* The argument builder (ACL's newer launch API). Each aclrtKernelArgsAppend adds one kernel
 * argument: 1, 2, 4 or 8 bytes (an integer or a pointer; 4 bytes are sign-extended, as RISC-V
 * passes them), or a 16-byte struct of integers (two slots). A float argument is appended with
 * npusimKernelArgsAppendFloat (the slot's type must be known to pass it in a float register).
 * A placeholder argument passes the device address of a buffer the caller fills through
 * aclrtKernelArgsGetPlaceHolderBuffer (e.g. a tiling struct of any size): it is copied to device
 * memory at each launch, stream-ordered, and freed once the kernel is done. An args handle
 * lives until its binary is unloaded or its context goes. */
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsGetHandleMemSize(aclrtFuncHandle funcHandle, size_t *memSize);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsGetMemSize(aclrtFuncHandle funcHandle, size_t userArgsSize,
                                   size_t *actualArgsSize);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle *argsHandle);
/* userHostMem is not used by npusim (the handle keeps its own copy). */
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsInitByUserMem(aclrtFuncHandle funcHandle, aclrtArgsHandle argsHandle,
                                      void *userHostMem, size_t actualArgsSize);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void *param, size_t paramSize,
                               aclrtParamHandle *paramHandle);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle,
                                          aclrtParamHandle *paramHandle);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsGetPlaceHolderBuffer(aclrtArgsHandle argsHandle,
                                             aclrtParamHandle paramHandle, size_t dataSize,
                                             void **bufferAddr);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle,
                                   void *param, size_t paramSize);
ACL_FUNC_VISIBILITY aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle);
/* reserve: NULL. cfg may be NULL. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks,
                                     aclrtStream stream, aclrtLaunchKernelCfg *cfg,
                                     aclrtArgsHandle argsHandle, void *reserve);
/* npusim extension: appends a float argument (passed in a float register). */
ACL_FUNC_VISIBILITY aclError npusimKernelArgsAppendFloat(aclrtArgsHandle argsHandle, float value,
                                     aclrtParamHandle *paramHandle);

/* ---- kernel time limits ----------------------------------------------------------------- */

/* How long one kernel may run, in SIMULATED time, before it fails with
 * ACL_ERROR_RT_AICORE_TIMEOUT. Process-wide, every device. Default and maximum 1091 s (ACL's
 * A2 figures); 0 sets the default; larger values are clamped to the maximum. Besides it, a
 * wall-clock guard (NPUSIM_KERNEL_WALL_LIMIT seconds, default 120, 0 = off) ends a binary
 * kernel launch the simulator has executed that long: it only stops runaway loops. */
ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOut(uint32_t timeout);          /* seconds */
ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOutWithMs(uint32_t timeout);    /* milliseconds */
ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout); /* microseconds */
ACL_FUNC_VISIBILITY aclError aclrtGetOpExecuteTimeout(uint32_t *const timeoutMs);
/* How long a stream waits on an event or notify (seconds of simulated time; 0: for ever), on
 * every device. A wait blocked longer fails with ACL_ERROR_RT_WAIT_TIMEOUT, reported at the
 * stream's next synchronize; the stream then goes on. */
ACL_FUNC_VISIBILITY aclError aclrtSetOpWaitTimeout(uint32_t timeout);

/* ---- kernel prints ---------------------------------------------------------------------- */

/* What kernels print (the SDK's npu_print_*) reaches this process's stdout when a synchronize
 * (stream, device or event) returns, one line each, "[kernel block n] text", as a device's
 * printf reaches the host. */

/* ---- host callbacks ------------------------------------------------------------------- */

/* threadId: the pthread_t of the thread that will call aclrtProcessReport. */
ACL_FUNC_VISIBILITY aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream);
/* timeout: wall-clock milliseconds, or -1 for ever. Runs one callback that came due;
 * ACL_ERROR_RT_REPORT_TIMEOUT if none did, ACL_ERROR_RT_THREAD_SUBSCRIBE on a thread that
 * serves no stream. */
ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout);
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);

/* ---- host functions ------------------------------------------------------------------- */

typedef void (*aclrtHostFunc)(void *args);
/* fn(args) runs in stream order; the stream's later work waits for it. On a stream subscribed
 * with aclrtSubscribeHostFunc it runs on that thread, in its aclrtProcessHostFunc loop; on any
 * other stream, on a thread of the runtime's own, as ACL's does. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args);
ACL_FUNC_VISIBILITY aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream);
/* timeout: wall-clock milliseconds, or -1 for ever. Runs one host function that came due. */
ACL_FUNC_VISIBILITY aclError aclrtProcessHostFunc(int32_t timeout);
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream);

/* ---- failures ------------------------------------------------------------------------- */

/* Told about every failing task; runs on the host thread that drove the device (e.g. the one
 * that synchronizes). NULL removes it. The info is valid only during the call. */
ACL_FUNC_VISIBILITY aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback);
/* The newer names: Register as Set (NULL refused); Unregister removes the callback given
 * (one not registered: nothing to do, ACL_SUCCESS, as in CANN; NULL refused). */
ACL_FUNC_VISIBILITY aclError aclrtExceptionInfoCallbackRegister(aclrtExceptionInfoCallback callback);
ACL_FUNC_VISIBILITY aclError aclrtExceptionInfoCallbackUnregister(aclrtExceptionInfoCallback callback);
ACL_FUNC_VISIBILITY uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo *info);
ACL_FUNC_VISIBILITY uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo *info);
ACL_FUNC_VISIBILITY uint32_t aclrtGetThreadIdFromExceptionInfo(const aclrtExceptionInfo *info);
ACL_FUNC_VISIBILITY uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo *info);
ACL_FUNC_VISIBILITY uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo *info);
/* The failing kernel's argument slots: npusim gives a host copy, valid during the callback. */
ACL_FUNC_VISIBILITY aclError aclrtGetArgsFromExceptionInfo(const aclrtExceptionInfo *info, void **devArgsPtr,
                                       uint32_t *devArgsLen);
ACL_FUNC_VISIBILITY aclError aclrtGetFuncHandleFromExceptionInfo(const aclrtExceptionInfo *info,
                                             aclrtFuncHandle *func);

/* The code of this thread's latest failed call (ACL_SUCCESS if none): Get clears it, Peek
 * does not. Level: ACL_RT_THREAD_LEVEL. */
ACL_FUNC_VISIBILITY aclError aclrtGetLastError(aclrtLastErrLevel level);
ACL_FUNC_VISIBILITY aclError aclrtPeekAtLastError(aclrtLastErrLevel level);
/* The device's latest task failure (ACL_RT_NO_ERROR if none): a kernel fault is
 * ACL_RT_ERROR_AICORE with detail ACL_RT_AICORE_ERROR_SW. */
ACL_FUNC_VISIBILITY aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo);
/* The task id (1-based sequence on its stream) of this thread's latest kernel launch, event
 * record, notify record, host function or callback: the id the exception info reports. */
ACL_FUNC_VISIBILITY aclError aclrtGetThreadLastTaskId(uint32_t *taskId);

/* npusim extensions: tell the stream sanitizer (NPUSIM_SANITIZE) of synchronization between
 * host threads that the runtime cannot see, as ThreadSanitizer's AnnotateHappensBefore/After.
 * Release publishes everything the calling thread is ordered after so far under key; Acquire
 * orders the calling thread after what was published under key; HostSync orders it after
 * everything every host thread did so far (after pthread_join or a barrier). No-ops that
 * succeed when the sanitizer is off. */
ACL_FUNC_VISIBILITY aclError npusimSanitizerRelease(uint64_t key);
ACL_FUNC_VISIBILITY aclError npusimSanitizerAcquire(uint64_t key);
ACL_FUNC_VISIBILITY aclError npusimSanitizerHostSync(void);

#ifdef __cplusplus
}
#endif

#endif /* NPUSIM_ACL_ACL_RT_H_ */
