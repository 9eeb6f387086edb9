/*
 * acl/acl.h — the ACL API of npusim, a simulated NPU. Includes acl/acl_rt.h (the runtime API),
 * which includes acl/acl_base.h and acl/acl_rt_allocator.h, as CANN lays them out; a program
 * may include any of them alone. npusim has the runtime API only (no acl_op.h, acl_mdl.h).
 *
 * Build and link (from the repository root):
 *     cargo build --release -p npusim-acl
 *     cc prog.c $(cargo run -q --release -p npusim-acl --bin npusim-acl-config -- --cflags --libs)
 * npusim-acl-config prints the include and link flags for the target directory in use
 * (CARGO_TARGET_DIR or target/); --static links libnpusim_acl.a instead.
 *
 * npusim specifics, in short (details in acl/src/ and the README):
 *  - Configuration at aclInit comes from the environment: NPUSIM_DEVICES (default 1),
 *    NPUSIM_PRESET (910b | small), NPUSIM_TRACE (write the simulated timeline there, as
 *    Chrome trace JSON, at aclFinalize), NPUSIM_KERNEL_WALL_LIMIT (seconds of wall-clock time
 *    one binary kernel launch may take before it is stopped as a runaway; default 120, 0 off).
 *    aclInit's JSON file is not interpreted.
 *  - Handles are opaque numbers checked on every use: NULL is ACL_ERROR_INVALID_PARAM, a
 *    handle this library did not hand out or that was destroyed ACL_ERROR_RT_PARAM_INVALID.
 *    A NULL aclrtStream names the current context's default stream.
 *  - Device pointers are simulated device addresses: never dereference them on the host.
 *  - Time is simulated: timeouts of synchronizes and kernels are simulated time, and the
 *    device advances while a host thread waits on it (a synchronize, or a query that polls).
 *  - Contexts start in ACL's default failure mode, ACL_CONTINUE_ON_FAILURE.
 *  - No function aborts the process: an internal failure is ACL_ERROR_RT_INTERNAL_ERROR.
 */
#ifndef NPUSIM_ACL_ACL_H_
#define NPUSIM_ACL_ACL_H_

#include "acl_rt.h"

#endif /* NPUSIM_ACL_ACL_H_ */
