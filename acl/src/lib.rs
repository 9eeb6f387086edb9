//! The C API of npusim: ACL's runtime functions (`aclInit`, `aclrtSetDevice`,
//! `aclrtCreateStream`, `aclrtMalloc`, `aclrtMemcpyAsync`, `aclrtLaunchKernel`, ...) with ACL's
//! names, signatures, handle types and error codes, over a simulated NPU. A C or C++ program
//! written against ACL's runtime API builds against `acl/include/acl/acl.h` and links
//! `libnpusim_acl` (`.so` or `.a`) instead of the real runtime, and runs without hardware.
//!
//! # Using it from C, in two commands
//!
//! ```sh
//! cargo build --release -p npusim-acl
//! cc examples/c/quickstart.c $(cargo run -q --release -p npusim-acl --bin npusim-acl-config -- --cflags --libs) -o quickstart
//! ```
//!
//! `npusim-acl-config` prints the flags for the target directory in use (`CARGO_TARGET_DIR`
//! included); `--static` links `libnpusim_acl.a` for a self-contained binary. The headers are
//! laid out as CANN's: `acl/acl.h` includes `acl/acl_rt.h`, which includes `acl/acl_base.h`
//! and `acl/acl_rt_allocator.h`; each compiles alone.
//!
//! # How the C API maps onto npusim
//!
//! 1. **Session.** `aclInit` builds one [`npusim_engine::Runtime`] for the process, configured
//!    by `NPUSIM_DEVICES`, `NPUSIM_PRESET`, `NPUSIM_TRACE` and `NPUSIM_KERNEL_WALL_LIMIT`
//!    (see [`session`]);
//!    `aclFinalize` drops it.
//! 2. **Contexts** are npusim's, and so is the thread-local current context:
//!    `aclrtSetDevice` makes a device's primary context current, `aclrtCreateContext` makes
//!    the new context current ([`context`]). Contexts start in ACL's default failure mode,
//!    continue-on-failure.
//! 3. **Handles** (`aclrtContext`, `aclrtStream`, `aclrtEvent`, `aclrtNotify`,
//!    `aclrtBinHandle`, `aclrtFuncHandle`, `aclrtArgsHandle`, `aclrtParamHandle`,
//!    `aclrtMemPool`) are opaque numbers looked up in tables, never
//!    dereferenced ([`handles`]): NULL is ACL_ERROR_INVALID_PARAM, a handle this library did
//!    not hand out or that was destroyed is ACL_ERROR_RT_PARAM_INVALID, and a handle of another
//!    context is the runtime's ACL_ERROR_RT_STREAM_CONTEXT.
//! 4. **Memory.** Device pointers are npusim device addresses; pinned host memory is an
//!    npusim pinned buffer shared with C ([`host`], [`memory`]).
//! 5. **Errors.** Every function runs inside `catch_unwind`: a panic is
//!    ACL_ERROR_RT_INTERNAL_ERROR, never an abort. Asynchronous failures (a kernel fault) come
//!    back at the next synchronize with their ACL codes, and to the exception callback
//!    ([`exception`]). `aclGetRecentErrMsg` gives each thread the messages of its failed calls
//!    ([`error`]).
//! 6. **Time** is simulated: timeouts of synchronizes and kernels are simulated time, event
//!    timestamps simulated microseconds; the device advances while a host thread waits on it
//!    (synchronize, or a query that polls). Kernel prints reach stdout at synchronize.
//! 7. **Limits** (`aclrtSetDeviceResLimit`, `aclrtSetOpExecuteTimeOut`) are the runtime's
//!    device limits: a cap on the AI cores a kernel gets, applied at dispatch, and the kernel
//!    timeout, checked by the binary-kernel watchdog ([`query`]).
//! 8. **The stream sanitizer** (`NPUSIM_SANITIZE`) checks the program's happens-before per
//!    host thread; `npusimSanitizerRelease` / `npusimSanitizerAcquire` /
//!    `npusimSanitizerHostSync` tell it of synchronization between threads it cannot see
//!    ([`sanitizer`]).
//! 9. **After a fault** under ACL_STOP_ON_FAILURE the context refuses new work, while cleanup
//!    (free, destroy, unsubscribe, unload) succeeds, as in ACL.
//!
//! The functions are listed, with their C prototypes, in the modules below and in the header.

#![warn(missing_docs)]
#![allow(non_snake_case)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("npusim-acl encodes its handles in 64-bit pointers");

pub mod args;
pub mod callback;
pub mod context;
pub mod device;
pub mod error;
pub mod event;
pub mod exception;
pub mod float16;
pub mod handles;
pub mod host;
pub mod kernel;
pub mod memory;
pub mod notify;
pub mod pool;
pub mod query;
pub mod sanitizer;
pub mod session;
pub mod stream;
pub mod types;

mod reports;
mod state;
