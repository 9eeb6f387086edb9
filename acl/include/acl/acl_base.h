/*
 * acl/acl_base.h — the base types and error codes of npusim's ACL API.
 *
 * Written for npusim from ACL's documented declarations (CANN 8.x lays its headers out the same
 * way: acl/acl.h includes acl/acl_rt.h, which includes this file and acl/acl_rt_allocator.h).
 * Every header compiles on its own. See acl/acl.h for what npusim does differently.
 */
#ifndef NPUSIM_ACL_ACL_BASE_H_
#define NPUSIM_ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#include "error_codes/rt_error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACL_FUNC_VISIBILITY
#if defined(__GNUC__)
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define ACL_FUNC_VISIBILITY
#endif
#endif

/* ---- handles and base types ------------------------------------------------------------ */

typedef int aclError;
typedef uint16_t aclFloat16;
typedef void *aclrtContext;
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtNotify;
/* Allocator types of acl/acl_rt_allocator.h (npusim implements no allocator registration). */
typedef void *aclrtAllocatorDesc;
typedef void *aclrtAllocator;
typedef void *aclrtAllocatorBlock;
typedef void *aclrtAllocatorAddr;

/* ---- ACL error codes (ACL's numbers; the runtime's are in error_codes/rt_error_codes.h) -- */

#define ACL_SUCCESS 0
#define ACL_ERROR_NONE 0

#define ACL_ERROR_INVALID_PARAM 100000         /* a NULL or out-of-range argument */
#define ACL_ERROR_UNINITIALIZE 100001          /* called before aclInit */
#define ACL_ERROR_REPEAT_INITIALIZE 100002     /* aclInit while initialized */
#define ACL_ERROR_INVALID_FILE 100003          /* a file that cannot be read */
#define ACL_ERROR_WRITE_FILE 100004            /* NPUSIM_TRACE could not be written */
#define ACL_ERROR_PARSE_FILE 100006            /* a malformed kernel binary */
#define ACL_ERROR_REPEAT_SUBSCRIBE 100033      /* the stream already has a report thread */
#define ACL_ERROR_STREAM_NOT_SUBSCRIBE 100034  /* the stream is not served by that thread */
#define ACL_ERROR_THREAD_NOT_SUBSCRIBE 100035  /* deprecated: ACL_ERROR_RT_THREAD_SUBSCRIBE */
#define ACL_ERROR_WAIT_CALLBACK_TIMEOUT 100036 /* deprecated: ACL_ERROR_RT_REPORT_TIMEOUT */
#define ACL_ERROR_REPEAT_FINALIZE 100037       /* aclFinalize while not initialized */
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_API_NOT_SUPPORT 200001
#define ACL_ERROR_INVALID_DEVICE 200002
#define ACL_ERROR_FEATURE_UNSUPPORTED 200006
#define ACL_ERROR_INTERNAL_ERROR 500000
#define ACL_ERROR_FAILURE 500001
#define ACL_ERROR_RT_FAILURE 500003

/* The SoC name of the simulated device: "Ascend910B1" for the 910b preset, the preset's
 * name otherwise; NULL before aclInit. */
ACL_FUNC_VISIBILITY const char *aclrtGetSocName(void);

/* IEEE binary16 <-> float, as CANN's acl_base.h declares them (round to nearest even; NaN
 * stays NaN, overflow becomes infinity). Legal before aclInit: they touch no runtime state. */
ACL_FUNC_VISIBILITY float aclFloat16ToFloat(aclFloat16 value);
ACL_FUNC_VISIBILITY aclFloat16 aclFloatToFloat16(float value);

#ifdef __cplusplus
}
#endif

#endif /* NPUSIM_ACL_ACL_BASE_H_ */
