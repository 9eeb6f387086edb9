//! The exception-info callback: told about every failing task (its device, stream, task and
//! error code), as `aclrtSetExceptionInfoCallback`. It runs on the host thread that drove the
//! frame in which the task failed (a synchronize, usually), outside the runtime's lock, so it
//! may call the API. The `aclrtExceptionInfo` it gets is valid only during the call, and the
//! `aclrtGet*FromExceptionInfo` accessors check that: given anything else, they return
//! 0xFFFFFFFF, as for NULL.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::{call, call_value};
use crate::handles::serial;
use crate::session::session;
use crate::types::*;

thread_local! {
    /// The info being handed to the callback on this thread, if any.
    static CURRENT: Cell<*const aclrtExceptionInfo> = const { Cell::new(std::ptr::null()) };
}

/// The calling thread's OS id.
fn os_thread_id() -> u32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        crate::callback::thread_id() as u32
    }
}

/// `aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback)`: registers
/// the callback (NULL removes it). The stream id it reports is the small number of the stream
/// handle's serial, 0 for a context's default stream.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetExceptionInfoCallback(callback: aclrtExceptionInfoCallback) -> aclError {
    call("aclrtSetExceptionInfoCallback", || {
        let s = session()?;
        let Some(cb) = callback else {
            s.rt.set_exception_callback(None);
            return Ok(());
        };
        // Weak: the runtime owns this closure, and the session owns the runtime.
        let weak = Arc::downgrade(&s);
        s.rt.set_exception_callback(Some(Arc::new(
            move |info: &npusim_engine::ExceptionInfo| {
                let stream_id = weak
                    .upgrade()
                    .and_then(|s| s.tables().stream_keys.get(&info.stream).copied())
                    .map_or(0, |k| serial(k) as u32);
                let mut c = aclrtExceptionInfo {
                    task_id: info.task_seq as u32,
                    stream_id,
                    thread_id: os_thread_id(),
                    device_id: info.device,
                    error_code: info.error_code as u32,
                };
                // One pointer for both: the accessors get back exactly what the callback got.
                let ptr: *mut aclrtExceptionInfo = &mut c;
                let previous = CURRENT.replace(ptr);
                // SAFETY: a callback C registered, given an info that lives for the call.
                unsafe { cb(ptr) };
                CURRENT.set(previous);
            },
        )));
        Ok(())
    })
}

fn field(
    name: &'static str,
    info: *const aclrtExceptionInfo,
    get: fn(&aclrtExceptionInfo) -> u32,
) -> u32 {
    call_value(name, u32::MAX, || {
        let current = CURRENT.get();
        if info.is_null() || info != current {
            return u32::MAX;
        }
        // SAFETY: `info` is the live info this thread is handing to the callback.
        get(unsafe { &*info })
    })
}

/// `uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the failing
/// task's sequence number on its stream (1-based).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetTaskIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    field("aclrtGetTaskIdFromExceptionInfo", info, |i| i.task_id)
}

/// `uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the failing
/// task's stream id (0 for a default stream).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetStreamIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    field("aclrtGetStreamIdFromExceptionInfo", info, |i| i.stream_id)
}

/// `uint32_t aclrtGetThreadIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the OS id of
/// the thread that is delivering the exception.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetThreadIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    field("aclrtGetThreadIdFromExceptionInfo", info, |i| i.thread_id)
}

/// `uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the device.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetDeviceIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    field("aclrtGetDeviceIdFromExceptionInfo", info, |i| i.device_id)
}

/// `uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo *info)`: the ACL
/// error code of the failure (e.g. 507015 ACL_ERROR_RT_AICORE_EXCEPTION).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetErrorCodeFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    field("aclrtGetErrorCodeFromExceptionInfo", info, |i| i.error_code)
}
