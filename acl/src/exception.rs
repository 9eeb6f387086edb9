//! The exception-info callback: told about every failing task (its device, stream, task and
//! error code), as `aclrtSetExceptionInfoCallback`. It runs on the host thread that drove the
//! frame in which the task failed (a synchronize, usually), outside the runtime's lock, so it
//! may call the API. The `aclrtExceptionInfo` it gets is valid only during the call, and the
//! `aclrtGet*FromExceptionInfo` accessors check that: given anything else, they return
//! 0xFFFFFFFF, as for NULL.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

use crate::error::{AclError, AclResult, call, call_value, non_null};
use crate::handles::{serial, to_ptr};
use crate::state::{Session, session};
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
        crate::reports::thread_id() as u32
    }
}

/// Installs the session's engine exception hook: it records each failure for
/// `aclrtGetErrorVerbose` and hands it to the C callback, if one is registered.
pub(crate) fn install(s: &Arc<Session>) {
    // Weak: the runtime owns this closure, and the session owns the runtime.
    let weak = Arc::downgrade(s);
    s.rt.contexts().set_exception_callback(Some(Arc::new(
        move |info: &npusim_engine::ExceptionInfo| {
            let Some(s) = weak.upgrade() else {
                return;
            };
            if let Some(slot) = s
                .last_fault
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(info.device as usize)
            {
                *slot = Some(info.error_code);
            }
            let Some(cb) = *s.user_exception.lock().unwrap_or_else(|p| p.into_inner()) else {
                return;
            };
            let stream_id = s
                .tables()
                .stream_keys
                .get(&info.stream)
                .map_or(0, |&k| serial(k) as u32);
            let launch = s
                .launches
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(info.stream, info.task_seq);
            drop(s);
            let mut c = aclrtExceptionInfo {
                task_id: info.task_seq as u32,
                stream_id,
                thread_id: os_thread_id(),
                device_id: info.device,
                error_code: info.error_code as u32,
                func: launch.as_ref().map_or(0, |l| l.0),
                args: launch.map(|l| l.1),
            };
            // One pointer for both: the accessors get back exactly what the callback got.
            let ptr: *mut aclrtExceptionInfo = &mut c;
            let previous = CURRENT.replace(ptr);
            // SAFETY: a callback C registered, given an info that lives for the call.
            unsafe { cb(ptr) };
            CURRENT.set(previous);
        },
    )));
}

/// `aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback)`: registers
/// the callback (NULL removes it). The stream id it reports is the small number of the stream
/// handle's serial, 0 for a context's default stream.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetExceptionInfoCallback(callback: aclrtExceptionInfoCallback) -> aclError {
    call("aclrtSetExceptionInfoCallback", || {
        let s = session()?;
        *s.user_exception.lock().unwrap_or_else(|p| p.into_inner()) = callback;
        Ok(())
    })
}

/// `aclError aclrtExceptionInfoCallbackRegister(aclrtExceptionInfoCallback callback)`: the
/// newer name of `aclrtSetExceptionInfoCallback` (NULL is ACL_ERROR_INVALID_PARAM here).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtExceptionInfoCallbackRegister(
    callback: aclrtExceptionInfoCallback,
) -> aclError {
    call("aclrtExceptionInfoCallbackRegister", || {
        let cb = callback.ok_or_else(|| AclError::null("callback"))?;
        *session()?
            .user_exception
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(cb);
        Ok(())
    })
}

/// `aclError aclrtExceptionInfoCallbackUnregister(aclrtExceptionInfoCallback callback)`:
/// removes `callback` if it is the one registered. As CANN documents, a callback that is not
/// registered is left alone and the call succeeds; NULL is ACL_ERROR_INVALID_PARAM.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtExceptionInfoCallbackUnregister(
    callback: aclrtExceptionInfoCallback,
) -> aclError {
    call("aclrtExceptionInfoCallbackUnregister", || {
        let cb = callback.ok_or_else(|| AclError::null("callback"))?;
        let s = session()?;
        let mut current = s.user_exception.lock().unwrap_or_else(|p| p.into_inner());
        if current.map(|c| c as usize) == Some(cb as usize) {
            *current = None;
        }
        Ok(())
    })
}

/// The live info `info` is, or ACL_ERROR_INVALID_PARAM.
fn live<'a>(info: *const aclrtExceptionInfo) -> AclResult<&'a aclrtExceptionInfo> {
    if info.is_null() {
        return Err(AclError::null("info"));
    }
    if info != CURRENT.get() {
        return Err(AclError::param(
            "info is not the exception info being handed to the callback on this thread",
        ));
    }
    // SAFETY: `info` is the live info this thread is handing to the callback.
    Ok(unsafe { &*info })
}

/// `aclError aclrtGetArgsFromExceptionInfo(const aclrtExceptionInfo *info, void **devArgsPtr,
/// uint32_t *devArgsLen)`: the failing kernel's argument slots (8 bytes per argument). npusim
/// hands a host copy, valid during the callback; a failing task that was not a kernel launched
/// through C has none (NULL and 0).
///
/// # Safety
/// `devArgsPtr` and `devArgsLen` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetArgsFromExceptionInfo(
    info: *const aclrtExceptionInfo,
    devArgsPtr: *mut *mut c_void,
    devArgsLen: *mut u32,
) -> aclError {
    call("aclrtGetArgsFromExceptionInfo", || {
        non_null(devArgsPtr, "devArgsPtr")?;
        non_null(devArgsLen, "devArgsLen")?;
        let i = live(info)?;
        let (ptr, len) = match &i.args {
            Some(a) => (a.as_ptr() as *mut c_void, a.len() as u32),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: checked non-NULL; the caller passes writable pointers.
        unsafe {
            devArgsPtr.write(ptr);
            devArgsLen.write(len);
        }
        Ok(())
    })
}

/// `aclError aclrtGetFuncHandleFromExceptionInfo(const aclrtExceptionInfo *info,
/// aclrtFuncHandle *func)`: the failing kernel's function handle; ACL_ERROR_RT_PARAM_INVALID
/// when the failing task was not a kernel launched through C.
///
/// # Safety
/// `func` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetFuncHandleFromExceptionInfo(
    info: *const aclrtExceptionInfo,
    func: *mut aclrtFuncHandle,
) -> aclError {
    call("aclrtGetFuncHandleFromExceptionInfo", || {
        non_null(func, "func")?;
        let i = live(info)?;
        if i.func == 0 {
            return Err(AclError::new(
                ACL_ERROR_RT_PARAM_INVALID,
                "the failing task is not a kernel launched through this library",
            ));
        }
        // SAFETY: checked non-NULL.
        unsafe { func.write(to_ptr(i.func)) };
        Ok(())
    })
}

/// `aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo)`: the device's
/// latest task failure: ACL_RT_ERROR_AICORE (detail ACL_RT_AICORE_ERROR_SW, a software fault)
/// for a kernel timeout, exception or trap, ACL_RT_ERROR_OTHERS for any other failure,
/// ACL_RT_NO_ERROR when none happened.
///
/// # Safety
/// `errorInfo` is NULL or points to an `aclrtErrorInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetErrorVerbose(
    deviceId: i32,
    errorInfo: *mut aclrtErrorInfo,
) -> aclError {
    call("aclrtGetErrorVerbose", || {
        non_null(errorInfo, "errorInfo")?;
        let s = session()?;
        let d = crate::device::device_index(&s, deviceId)?;
        let code = s.last_fault.lock().unwrap_or_else(|p| p.into_inner())[d as usize];
        let mut out = aclrtErrorInfo {
            tryRepair: 0,
            hasDetail: 0,
            reserved: [0; 2],
            errorType: ACL_RT_NO_ERROR,
            detail: [0; 1 + 20 * 16],
        };
        match code {
            None => {}
            Some(
                ACL_ERROR_RT_AICORE_TIMEOUT
                | ACL_ERROR_RT_AICORE_EXCEPTION
                | ACL_ERROR_RT_AICORE_TRAP_EXCEPTION,
            ) => {
                out.errorType = ACL_RT_ERROR_AICORE;
                out.hasDetail = 1;
                out.detail[0] = ACL_RT_AICORE_ERROR_SW as u64;
            }
            Some(_) => out.errorType = ACL_RT_ERROR_OTHERS,
        }
        // SAFETY: checked non-NULL; the caller passes a writable aclrtErrorInfo.
        unsafe { errorInfo.write(out) };
        Ok(())
    })
}

/// `aclError aclrtGetThreadLastTaskId(uint32_t *taskId)`: the task id (its 1-based sequence
/// number on its stream, as the exception info reports it) of the calling thread's latest
/// kernel launch, event or notify record, host function or callback; 0 before any.
///
/// # Safety
/// `taskId` is NULL or points to a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetThreadLastTaskId(taskId: *mut u32) -> aclError {
    call("aclrtGetThreadLastTaskId", || {
        non_null(taskId, "taskId")?;
        session()?;
        // SAFETY: checked non-NULL.
        unsafe { taskId.write(crate::state::LAST_TASK.get() as u32) };
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
