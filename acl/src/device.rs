//! Devices: `aclrtSetDevice` makes a device's primary (default) context current on the calling
//! thread, shared by every thread that sets the same device; `aclrtResetDevice` undoes it, and
//! when the last `aclrtSetDevice` of the device is matched, releases what C made in the primary
//! context and clears its sticky error, so the device can be used afresh.

use npusim_engine::{DevicePtr, NpuError};

use crate::error::{AclError, AclResult, call, non_null};
use crate::state::{Session, config_from_env, session};
use crate::types::*;

/// Checks a C device id against the runtime's devices.
pub(crate) fn device_index(s: &Session, id: i32) -> AclResult<u32> {
    let count = s.rt.device_count();
    u32::try_from(id)
        .ok()
        .filter(|&d| d < count)
        .ok_or_else(|| {
            AclError::new(
                ACL_ERROR_RT_INVALID_DEVICEID,
                format!(
                    "device {id} does not exist (the runtime has {count}; NPUSIM_DEVICES sets it)"
                ),
            )
        })
}

/// `aclError aclrtSetDevice(int32_t deviceId)`: makes the primary context of `deviceId`
/// current on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    call("aclrtSetDevice", || {
        let s = session()?;
        let d = device_index(&s, deviceId)?;
        s.rt.contexts().set_device(d)?;
        s.device_refs.lock().unwrap_or_else(|p| p.into_inner())[d as usize] += 1;
        Ok(())
    })
}

/// `aclError aclrtResetDevice(int32_t deviceId)`: matches one `aclrtSetDevice`. The last one
/// waits for the device's work, then destroys the streams, events, binaries and allocations C
/// made in the primary context and clears its sticky error (the primary context itself stays,
/// usable after the next `aclrtSetDevice`). Contexts made by `aclrtCreateContext` are not
/// touched: destroy them first, as ACL asks.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    call("aclrtResetDevice", || reset(deviceId, false))
}

/// `aclError aclrtResetDeviceForce(int32_t deviceId)`: resets the device as the last
/// `aclrtResetDevice` does, however many `aclrtSetDevice` calls are unmatched.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
    call("aclrtResetDeviceForce", || reset(deviceId, true))
}

fn reset(device_id: i32, force: bool) -> AclResult<()> {
    let s = session()?;
    let d = device_index(&s, device_id)? as usize;
    {
        let mut refs = s.device_refs.lock().unwrap_or_else(|p| p.into_inner());
        refs[d] = if force { 0 } else { refs[d].saturating_sub(1) };
        if refs[d] > 0 {
            return Ok(());
        }
    }
    let key = s.primaries[d];
    let ctx = s.tables().contexts[&key].ctx;
    s.rt.contexts().push(ctx)?;
    let result = reset_primary(&s, key);
    s.rt.contexts().pop();
    s.flush_prints();
    result
}

/// Releases what C made in primary context `key`, which is current.
fn reset_primary(s: &Session, key: u64) -> AclResult<()> {
    s.rt.contexts().reset()?;
    // Its errors go with the state they belong to.
    let _ = s.rt.synchronize_device();
    s.reports.forget_context(key);
    let owned = s.tables().take_owned(key, false);
    for st in owned.streams.into_iter().chain(owned.copy_stream) {
        let _ = s.rt.streams().destroy(st);
    }
    for e in owned.events {
        let _ = s.rt.events().destroy(e);
    }
    for b in owned.binaries {
        let _ = s.rt.binaries().unload(b);
    }
    s.host_funcs.forget_context(key);
    for a in owned.allocs {
        // A fault released the context's memory already: nothing left to free then.
        match s.rt.memory().free(DevicePtr(a)) {
            Ok(()) | Err(NpuError::BadFree { .. }) | Err(NpuError::InvalidPointer { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    s.rt.contexts().reset()?;
    Ok(())
}

/// `aclError aclrtGetDevice(int32_t *deviceId)`: the device of the current context.
///
/// # Safety
/// `deviceId` is NULL or points to an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    call("aclrtGetDevice", || {
        non_null(deviceId, "deviceId")?;
        let d = session()?.rt.contexts().current_device()?;
        // SAFETY: checked non-NULL; the caller passes a writable int32_t.
        unsafe { deviceId.write(d as i32) };
        Ok(())
    })
}

/// `aclError aclrtGetDeviceCount(uint32_t *count)`: the number of simulated devices
/// (`NPUSIM_DEVICES`, read now if `aclInit` has not been called yet).
///
/// # Safety
/// `count` is NULL or points to a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    call("aclrtGetDeviceCount", || {
        non_null(count, "count")?;
        let n = match session() {
            Ok(s) => s.rt.device_count(),
            Err(_) => config_from_env()?.runtime.devices,
        };
        // SAFETY: checked non-NULL; the caller passes a writable uint32_t.
        unsafe { count.write(n) };
        Ok(())
    })
}

/// `aclError aclrtSynchronizeDevice(void)`: waits for every stream of the current context's
/// device; returns the first error of the current context's streams (or its sticky error).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    call("aclrtSynchronizeDevice", || {
        let s = session()?;
        let result = s.rt.synchronize_device();
        s.flush_prints();
        Ok(result?)
    })
}

/// `aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)`: as `aclrtSynchronizeDevice`,
/// giving up after `timeout` milliseconds (-1: never) of *simulated* device time with
/// ACL_ERROR_RT_STREAM_SYNC_TIMEOUT; the work stays queued.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError {
    call("aclrtSynchronizeDeviceWithTimeout", || {
        let s = session()?;
        let _flush = crate::stream::FlushOnDrop(&s);
        if timeout != -1 && timeout <= 0 {
            return Err(AclError::param(format!(
                "timeout {timeout}: expected -1 (for ever) or a positive number of milliseconds"
            )));
        }
        let result = if timeout > 0 {
            s.rt.synchronize_device_timeout(npusim_engine::SimTime::from_ms(timeout as u64))
        } else {
            s.rt.synchronize_device()
        };
        match result {
            Err(e @ NpuError::WaitTimeout { .. }) => Err(AclError::new(
                ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                format!("{e} (the device was not done within {timeout} ms)"),
            )),
            other => Ok(other?),
        }
    })
}
