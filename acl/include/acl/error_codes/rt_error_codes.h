/*
 * acl/error_codes/rt_error_codes.h — the runtime's error codes (ACL's numbers), for npusim.
 * Written for npusim from ACL's documented values. Included by acl/acl_base.h.
 */
#ifndef NPUSIM_ACL_ERROR_CODES_RT_ERROR_CODES_H_
#define NPUSIM_ACL_ERROR_CODES_RT_ERROR_CODES_H_

#define ACL_RT_SUCCESS 0

#define ACL_ERROR_RT_PARAM_INVALID 107000           /* an unknown handle or a refused value */
#define ACL_ERROR_RT_INVALID_DEVICEID 107001        /* no such device */
#define ACL_ERROR_RT_CONTEXT_NULL 107002            /* the thread's current context is gone */
#define ACL_ERROR_RT_STREAM_CONTEXT 107003          /* an object of another context */
#define ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID 107006 /* time of an event never recorded */
#define ACL_ERROR_RT_THREAD_SUBSCRIBE 107012        /* aclrtProcessReport / aclrtProcessHostFunc
                                                       on a thread serving no stream */
#define ACL_ERROR_RT_STREAM_NO_CB_REG 107015        /* aclrtLaunchCallback, stream unsubscribed */
#define ACL_ERROR_RT_INVALID_MEMORY_TYPE 107016     /* host memory of the wrong kind, or freed */
#define ACL_ERROR_RT_INVALID_HANDLE 107017          /* an object destroyed in the runtime */
#define ACL_ERROR_RT_WAIT_TIMEOUT 107019            /* a wait that can never finish */
#define ACL_ERROR_RT_STREAM_ABORT 107023            /* a task aborted after an earlier failure */
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000     /* a call or case npusim does not model,
                                                       or CANN does not support */
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001       /* host memory or a pool's maxSize exhausted */
#define ACL_ERROR_RT_MEMORY_FREE 207002             /* a free of a pointer not allocated */
#define ACL_ERROR_RT_DEVICE_OOM 207018              /* device memory exhausted */
#define ACL_ERROR_RT_INTERNAL_ERROR 507000          /* a bug in npusim, or a host function that
                                                       panicked (Rust); the process goes on */
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE 507006      /* time of an event not yet fired */
#define ACL_ERROR_RT_CONTEXT_RELEASE_ERROR 507007   /* a context that cannot be destroyed now */
#define ACL_ERROR_RT_REPORT_TIMEOUT 507012          /* a callback not back within the wait limit;
                                                       aclrtProcessReport: nothing came due */
#define ACL_ERROR_RT_AICORE_TIMEOUT 507014          /* a kernel ran past its (simulated) timeout */
#define ACL_ERROR_RT_AICORE_EXCEPTION 507015        /* a kernel faulted (e.g. a bad address) */
#define ACL_ERROR_RT_AICORE_TRAP_EXCEPTION 507016   /* a kernel trapped (e.g. divide by zero) */
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046     /* aclrtSynchronizeStreamWithTimeout */
#define ACL_ERROR_RT_EVENT_SYNC_TIMEOUT 507047      /* aclrtSynchronizeEventWithTimeout */
#define ACL_ERROR_RT_DEVICE_MEM_ERROR 507053        /* NPUSIM_SANITIZE=error: a task the stream
                                                       sanitizer found racing, using freed
                                                       memory or reusing it unordered */

#endif /* NPUSIM_ACL_ERROR_CODES_RT_ERROR_CODES_H_ */
