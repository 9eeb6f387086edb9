//! Contexts. The current context is per thread (npusim's own thread-local context stack): a
//! thread that never chose one uses device 0's primary context. `aclrtCreateContext` makes the
//! new context current; `aclrtDestroyContext` leaves the threads that had it current with no
//! context (their calls fail with ACL_ERROR_RT_CONTEXT_NULL until they set one).
//!
//! Every context starts in ACL's default failure mode, ACL_CONTINUE_ON_FAILURE: a failing task
//! fails alone and its error comes back at the next synchronize. Under ACL_STOP_ON_FAILURE
//! (`aclrtSetStreamFailureMode`) a fault aborts the context's queued work, releases its device
//! memory and leaves a sticky error its later calls return (until `aclrtResetDevice` for a
//! primary context); other contexts are never affected.

use npusim_engine::FailureMode;

use crate::error::{call, non_null};
use crate::state::{context_key, session};
use crate::types::*;
use crate::{device::device_index, handles::to_ptr};

/// `aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)`: a new context on
/// `deviceId`, with its own address space and default stream, current on this thread.
///
/// # Safety
/// `context` is NULL or points to an `aclrtContext`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateContext(context: *mut aclrtContext, deviceId: i32) -> aclError {
    call("aclrtCreateContext", || {
        non_null(context, "context")?;
        let s = session()?;
        let d = device_index(&s, deviceId)?;
        let ctx = s.rt.contexts().create(d)?;
        s.rt.contexts().set_failure_mode(FailureMode::Continue)?;
        let key = s.tables().add_context(ctx);
        // SAFETY: checked non-NULL; the caller passes a writable aclrtContext.
        unsafe { context.write(to_ptr(key)) };
        Ok(())
    })
}

/// `aclError aclrtDestroyContext(aclrtContext context)`: destroys a context made by
/// `aclrtCreateContext`, with its streams, events, binaries and memory. Its queued tasks are
/// aborted (running ones finish first). Refused (ACL_ERROR_RT_CONTEXT_RELEASE_ERROR) for a
/// primary context and for a context another thread has current.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyContext(context: aclrtContext) -> aclError {
    call("aclrtDestroyContext", || {
        let s = session()?;
        let (key, ctx) = context_key(&s, context, "context")?;
        s.rt.contexts().destroy(ctx)?;
        s.reports.forget_context(key);
        // The runtime released everything the context owned.
        s.tables().take_owned(key, true);
        Ok(())
    })
}

/// `aclError aclrtSetCurrentContext(aclrtContext context)`: makes `context` current on this
/// thread.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    call("aclrtSetCurrentContext", || {
        let s = session()?;
        let (_, ctx) = context_key(&s, context, "context")?;
        s.rt.contexts().set_current(ctx)?;
        Ok(())
    })
}

/// `aclError aclrtGetCurrentContext(aclrtContext *context)`: this thread's current context.
///
/// # Safety
/// `context` is NULL or points to an `aclrtContext`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    call("aclrtGetCurrentContext", || {
        non_null(context, "context")?;
        let (key, _) = session()?.current_ctx()?;
        // SAFETY: checked non-NULL; the caller passes a writable aclrtContext.
        unsafe { context.write(to_ptr(key)) };
        Ok(())
    })
}

/// `aclError aclrtCtxGetCurrentDefaultStream(aclrtStream *stream)`: a handle of the current
/// context's default stream, the stream a NULL `aclrtStream` names (the same handle each time).
/// It works wherever a stream does, and cannot be destroyed.
///
/// # Safety
/// `stream` is NULL or points to an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCtxGetCurrentDefaultStream(stream: *mut aclrtStream) -> aclError {
    call("aclrtCtxGetCurrentDefaultStream", || {
        non_null(stream, "stream")?;
        let s = session()?;
        let (ctx, _) = s.current_ctx()?;
        let st = s.rt.contexts().default_stream()?;
        let key = s.tables().default_stream(st, ctx);
        // SAFETY: checked non-NULL; the caller passes a writable aclrtStream.
        unsafe { stream.write(to_ptr(key)) };
        Ok(())
    })
}
