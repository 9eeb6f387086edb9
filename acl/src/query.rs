//! Questions about the runtime and its devices (run mode, version, SoC name, memory, status,
//! utilization, attributes), the device resource limits (`aclrtSetDeviceResLimit`: how many AI
//! cores one kernel gets) and the kernel time limits (`aclrtSetOpExecuteTimeOut`: simulated
//! time). The limits are kept by the runtime (`Limits::set_core_limits`,
//! `Limits::set_kernel_timeout`) and applied by its dispatch and its kernel watchdog.

use std::ffi::{CString, c_char};
use std::sync::Mutex;

use npusim_engine::SimTime;

use crate::device::device_index;
use crate::error::{AclError, AclResult, call, call_value, non_null};
use crate::state::{Session, session};
use crate::types::*;

/// `aclError aclrtGetRunMode(aclrtRunMode *runMode)`: ACL_HOST: the program runs on the host,
/// beside the (simulated) device. Legal before `aclInit` and after `aclFinalize`, as CANN's
/// samples rely on (they ask the run mode first): the answer does not depend on a session.
///
/// # Safety
/// `runMode` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetRunMode(runMode: *mut u32) -> aclError {
    call("aclrtGetRunMode", || {
        non_null(runMode, "runMode")?;
        // SAFETY: checked non-NULL.
        unsafe { runMode.write(ACL_HOST) };
        Ok(())
    })
}

/// `aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t
/// *patchVersion)`: the ACL runtime API version the header follows (1.17.0).
///
/// # Safety
/// The pointers are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetVersion(
    majorVersion: *mut i32,
    minorVersion: *mut i32,
    patchVersion: *mut i32,
) -> aclError {
    call("aclrtGetVersion", || {
        non_null(majorVersion, "majorVersion")?;
        non_null(minorVersion, "minorVersion")?;
        non_null(patchVersion, "patchVersion")?;
        // SAFETY: checked non-NULL.
        unsafe {
            majorVersion.write(1);
            minorVersion.write(17);
            patchVersion.write(0);
        }
        Ok(())
    })
}

/// The SoC name strings handed out (they live for the process, as ACL's do).
static SOC_NAMES: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// `const char *aclrtGetSocName(void)`: "Ascend910B1" for the 910b preset, else the preset's
/// name; NULL before `aclInit`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    call_value("aclrtGetSocName", std::ptr::null(), || {
        let Ok(s) = session() else {
            return std::ptr::null();
        };
        let Ok(config) = s.rt.device_config(0) else {
            return std::ptr::null();
        };
        let name = match config.name.as_str() {
            "ascend-910b" => "Ascend910B1".to_string(),
            other => other.to_string(),
        };
        let mut names = SOC_NAMES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = names.iter().find(|n| n.to_bytes() == name.as_bytes()) {
            return n.as_ptr();
        }
        names.push(CString::new(name).unwrap_or_default());
        names.last().map_or(std::ptr::null(), |n| n.as_ptr())
    })
}

/// The device of the calling thread's current context.
fn current_device(s: &Session) -> AclResult<u32> {
    Ok(s.rt.contexts().current_device()?)
}

/// `aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)`: free and total
/// bytes of the current context's device memory. The simulated device has HBM only: the HBM
/// kinds and the kind-less ACL_MEM_* report it, the DDR kinds 0 and 0.
///
/// # Safety
/// `free` and `total` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetMemInfo(
    attr: u32,
    free: *mut usize,
    total: *mut usize,
) -> aclError {
    call("aclrtGetMemInfo", || {
        non_null(free, "free")?;
        non_null(total, "total")?;
        // ACL_DDR_MEM, _DDR_MEM_HUGE, _DDR_MEM_NORMAL, _DDR_MEM_P2P_HUGE, _DDR_MEM_P2P_NORMAL.
        let ddr = matches!(attr, 0 | 2 | 3 | 6 | 7);
        if attr > 17 {
            return Err(AclError::param(format!("unknown aclrtMemAttr {attr}")));
        }
        let s = session()?;
        let d = current_device(&s)?;
        let (f, t) = if ddr {
            (0, 0)
        } else {
            let info = s.rt.device(d)?.memory_info()?;
            (info.free, info.total)
        };
        // SAFETY: checked non-NULL.
        unsafe {
            free.write(f as usize);
            total.write(t as usize);
        }
        Ok(())
    })
}

/// `aclError aclrtQueryDeviceStatus(int32_t deviceId, aclrtDeviceStatus *deviceStatus)`:
/// ACL_RT_DEVICE_STATUS_NORMAL: a simulated device has no hardware faults (a kernel fault is
/// the task's and its context's, not the device's).
///
/// # Safety
/// `deviceStatus` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryDeviceStatus(deviceId: i32, deviceStatus: *mut u32) -> aclError {
    call("aclrtQueryDeviceStatus", || {
        non_null(deviceStatus, "deviceStatus")?;
        let s = session()?;
        device_index(&s, deviceId)?;
        // SAFETY: checked non-NULL.
        unsafe { deviceStatus.write(ACL_RT_DEVICE_STATUS_NORMAL) };
        Ok(())
    })
}

fn percent(part: u128, whole: u128) -> i32 {
    (part * 100)
        .checked_div(whole)
        .map_or(0, |p| p.min(100) as i32)
}

/// `aclError aclrtGetDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo
/// *utilizationInfo)`: over the simulated run so far, the AI cores' busy time over their
/// capacity (cube and vector alike: an npusim core runs both), and the device memory in use.
/// `utilizationExtend` must be NULL.
///
/// # Safety
/// `utilizationInfo` is NULL or points to an `aclrtUtilizationInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceUtilizationRate(
    deviceId: i32,
    utilizationInfo: *mut aclrtUtilizationInfo,
) -> aclError {
    call("aclrtGetDeviceUtilizationRate", || {
        non_null(utilizationInfo, "utilizationInfo")?;
        // SAFETY: checked non-NULL; the caller passes a readable aclrtUtilizationInfo.
        if !unsafe { (*utilizationInfo).utilizationExtend }.is_null() {
            return Err(AclError::param(
                "utilizationExtend is reserved: it must be NULL",
            ));
        }
        let s = session()?;
        let d = device_index(&s, deviceId)?;
        let config = s.rt.device_config(d)?;
        let stats = s.rt.stats();
        let busy = stats.units.get(d as usize).map_or(0, |u| u.core_busy_ns);
        let capacity = config.ai_cores as u128 * stats.device_now.as_ns() as u128;
        let core = percent(busy as u128, capacity);
        let used = stats.live_bytes.get(d as usize).copied().unwrap_or(0);
        let out = aclrtUtilizationInfo {
            cubeUtilization: core,
            vectorUtilization: core,
            aicpuUtilization: 0,
            memoryUtilization: percent(used as u128, config.hbm_bytes as u128),
            utilizationExtend: std::ptr::null_mut(),
        };
        // SAFETY: checked non-NULL.
        unsafe { utilizationInfo.write(out) };
        Ok(())
    })
}

/// `aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority, int32_t
/// *greatestPriority)`: 7 and 0: `aclrtCreateStreamWithConfig` priorities, lower first.
///
/// # Safety
/// The pointers are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetStreamPriorityRange(
    leastPriority: *mut i32,
    greatestPriority: *mut i32,
) -> aclError {
    call("aclrtDeviceGetStreamPriorityRange", || {
        non_null(leastPriority, "leastPriority")?;
        non_null(greatestPriority, "greatestPriority")?;
        session()?;
        // SAFETY: checked non-NULL.
        unsafe {
            leastPriority.write(7);
            greatestPriority.write(0);
        }
        Ok(())
    })
}

/// `aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)`: AI
/// (cube) cores, vector cores (two per AI core), AI CPUs (0), the unified buffer per core, HBM
/// bytes and the L2 size of the device's preset. Other attributes:
/// ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
///
/// # Safety
/// `value` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceInfo(deviceId: u32, attr: u32, value: *mut i64) -> aclError {
    call("aclrtGetDeviceInfo", || {
        non_null(value, "value")?;
        let s = session()?;
        let d = device_index(&s, i32::try_from(deviceId).unwrap_or(i32::MAX))?;
        let c = s.rt.device_config(d)?;
        let v: i64 = match attr {
            1 => 0,
            101 | 102 => c.ai_cores as i64,
            201 => c.vector_cores() as i64,
            204 => c.ub_bytes as i64,
            301 => c.hbm_bytes as i64,
            // The L2 the core model assumes: 192 MiB on the 910b preset.
            302 => 192 << 20,
            other => {
                return Err(AclError::new(
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    format!("aclrtDevAttr {other} is not modelled"),
                ));
            }
        };
        // SAFETY: checked non-NULL.
        unsafe { value.write(v) };
        Ok(())
    })
}

/// The limit in force of `kind` on device `d`.
fn res_limit(s: &Session, d: u32, kind: u32) -> AclResult<u32> {
    let limits = s.rt.limits().device(d)?;
    let cores = s.rt.device_config(d)?.ai_cores;
    match kind {
        ACL_RT_DEV_RES_CUBE_CORE => Ok(limits.cube_cores.unwrap_or(cores)),
        ACL_RT_DEV_RES_VECTOR_CORE => Ok(limits
            .vector_cores
            .unwrap_or(s.rt.device_config(d)?.vector_cores())),
        other => Err(AclError::param(format!(
            "aclrtDevResLimitType {other}: expected ACL_RT_DEV_RES_CUBE_CORE or \
             ACL_RT_DEV_RES_VECTOR_CORE"
        ))),
    }
}

/// `aclError aclrtGetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t
/// *value)`: the most cube or vector cores one kernel gets on the device (all of them when no
/// limit is set).
///
/// # Safety
/// `value` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceResLimit(
    deviceId: i32,
    type_: u32,
    value: *mut u32,
) -> aclError {
    call("aclrtGetDeviceResLimit", || {
        non_null(value, "value")?;
        let s = session()?;
        let d = device_index(&s, deviceId)?;
        let v = res_limit(&s, d, type_)?;
        // SAFETY: checked non-NULL.
        unsafe { value.write(v) };
        Ok(())
    })
}

/// `aclError aclrtSetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t
/// value)`: at most `value` cube (AI) or vector cores for each kernel of this process on the
/// device, from the next dispatched kernel on: its blocks share that many cores, so it takes
/// longer. A vector-core limit of v allows v / 2 AI cores on the 910B (v on a device whose AI
/// cores run vector code themselves). 0 or more than the device has:
/// ACL_ERROR_INVALID_PARAM.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDeviceResLimit(deviceId: i32, type_: u32, value: u32) -> aclError {
    call("aclrtSetDeviceResLimit", || {
        let s = session()?;
        let d = device_index(&s, deviceId)?;
        let cores = s.rt.device_config(d)?.ai_cores;
        let max = match type_ {
            ACL_RT_DEV_RES_CUBE_CORE => cores,
            ACL_RT_DEV_RES_VECTOR_CORE => s.rt.device_config(d)?.vector_cores(),
            _ => return res_limit(&s, d, type_).map(drop),
        };
        if !(1..=max).contains(&value) {
            return Err(AclError::param(format!(
                "a limit of {value} cores: device {d} has {max} of that kind"
            )));
        }
        let limits = s.rt.limits().device(d)?;
        let (cube, vector) = match type_ {
            ACL_RT_DEV_RES_CUBE_CORE => (Some(value), limits.vector_cores),
            _ => (limits.cube_cores, Some(value)),
        };
        s.rt.limits().set_core_limits(d, cube, vector)?;
        Ok(())
    })
}

/// `aclError aclrtResetDeviceResLimit(int32_t deviceId)`: lifts the device's limits.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDeviceResLimit(deviceId: i32) -> aclError {
    call("aclrtResetDeviceResLimit", || {
        let s = session()?;
        let d = device_index(&s, deviceId)?;
        s.rt.limits().set_core_limits(d, None, None)?;
        Ok(())
    })
}

/// `aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value)`: the
/// limit in force for the calling thread's kernels (its current context's device's).
///
/// # Safety
/// `value` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetResInCurrentThread(type_: u32, value: *mut u32) -> aclError {
    call("aclrtGetResInCurrentThread", || {
        non_null(value, "value")?;
        let s = session()?;
        let d = current_device(&s)?;
        let v = res_limit(&s, d, type_)?;
        // SAFETY: checked non-NULL.
        unsafe { value.write(v) };
        Ok(())
    })
}

/// The longest kernel timeout ACL allows (and its default): 1091 s.
const MAX_TIMEOUT_US: u64 = 1_091_000_000;

/// Sets the kernel timeout to `us` microseconds of simulated time (0: the default; clamped to
/// the maximum); returns what was set.
fn set_timeout_us(us: u64) -> AclResult<u64> {
    let s = session()?;
    let us = if us == 0 {
        MAX_TIMEOUT_US
    } else {
        us.min(MAX_TIMEOUT_US)
    };
    s.rt.limits().set_kernel_timeout(SimTime::from_us(us))?;
    Ok(us)
}

/// `aclError aclrtSetOpExecuteTimeOut(uint32_t timeout)`: how long one kernel may run, in
/// seconds of *simulated* time, before it fails with ACL_ERROR_RT_AICORE_TIMEOUT; every device
/// of the process. 0 sets the default, 1091 s (ACL's A2 default and maximum); more is clamped.
/// Beside it, a wall-clock guard (`NPUSIM_KERNEL_WALL_LIMIT`) stops runaway loops only.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpExecuteTimeOut(timeout: u32) -> aclError {
    call("aclrtSetOpExecuteTimeOut", || {
        set_timeout_us(timeout as u64 * 1_000_000).map(drop)
    })
}

/// `aclError aclrtSetOpExecuteTimeOutWithMs(uint32_t timeout)`: as `aclrtSetOpExecuteTimeOut`,
/// in milliseconds.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpExecuteTimeOutWithMs(timeout: u32) -> aclError {
    call("aclrtSetOpExecuteTimeOutWithMs", || {
        set_timeout_us(timeout as u64 * 1000).map(drop)
    })
}

/// `aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout)`: as
/// `aclrtSetOpExecuteTimeOut`, in microseconds; `actualTimeout` gets the timeout in force.
///
/// # Safety
/// `actualTimeout` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetOpExecuteTimeOutV2(
    timeout: u64,
    actualTimeout: *mut u64,
) -> aclError {
    call("aclrtSetOpExecuteTimeOutV2", || {
        non_null(actualTimeout, "actualTimeout")?;
        let us = set_timeout_us(timeout)?;
        // SAFETY: checked non-NULL.
        unsafe { actualTimeout.write(us) };
        Ok(())
    })
}

/// `aclError aclrtGetOpExecuteTimeout(uint32_t *const timeoutMs)`: the kernel timeout in
/// force, in milliseconds of simulated time.
///
/// # Safety
/// `timeoutMs` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetOpExecuteTimeout(timeoutMs: *mut u32) -> aclError {
    call("aclrtGetOpExecuteTimeout", || {
        non_null(timeoutMs, "timeoutMs")?;
        let s = session()?;
        let t = s.rt.limits().device(0)?.kernel_timeout;
        // SAFETY: checked non-NULL.
        unsafe { timeoutMs.write((t.as_ns() / 1_000_000).min(u32::MAX as u64) as u32) };
        Ok(())
    })
}

/// `aclError aclrtSetOpWaitTimeout(uint32_t timeout)`: how long (seconds of simulated time;
/// 0: for ever) a stream may wait on an event or notify, on every device of the process. A
/// wait blocked longer fails with ACL_ERROR_RT_WAIT_TIMEOUT, reported at the stream's next
/// synchronize, and the stream goes on.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpWaitTimeout(timeout: u32) -> aclError {
    call("aclrtSetOpWaitTimeout", || {
        let s = session()?;
        let limit = (timeout > 0).then(|| SimTime::from_ms(timeout as u64 * 1000));
        s.rt.limits().set_event_wait_timeout(limit);
        Ok(())
    })
}

/// `npusimPlatformValue` items: what CANN's `platform_ascendc::PlatformAscendC` reports.
const PLATFORM_AIC_CORES: u32 = 0;
const PLATFORM_AIV_CORES: u32 = 1;
const PLATFORM_UB_BYTES: u32 = 2;
const PLATFORM_L1_BYTES: u32 = 3;
const PLATFORM_L0A_BYTES: u32 = 4;
const PLATFORM_L0B_BYTES: u32 = 5;
const PLATFORM_L0C_BYTES: u32 = 6;
const PLATFORM_HBM_BYTES: u32 = 7;
const PLATFORM_L2_BYTES: u32 = 8;
const PLATFORM_BT_BYTES: u32 = 9;

/// npusim extension: a figure of the device the process runs on (`item`: the
/// `NPUSIM_PLATFORM_*` values of `tiling/platform/platform_ascendc.h`) — device 0 of the
/// session, or before `aclInit` the preset `NPUSIM_PRESET` selects — so a host tiling function
/// may ask before the runtime is up, as CANN's platform API allows.
///
/// # Safety
/// `value` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npusimPlatformValue(item: u32, value: *mut u64) -> aclError {
    call("npusimPlatformValue", || {
        non_null(value, "value")?;
        let c = match session() {
            Ok(s) => s.rt.device_config(0)?,
            Err(_) => crate::state::config_from_env()?.runtime.device,
        };
        let v: u64 = match item {
            PLATFORM_AIC_CORES => c.ai_cores.into(),
            PLATFORM_AIV_CORES => c.vector_cores().into(),
            PLATFORM_UB_BYTES => c.ub_bytes.into(),
            PLATFORM_L1_BYTES => c.l1_bytes.into(),
            PLATFORM_L0A_BYTES => c.l0a_bytes.into(),
            PLATFORM_L0B_BYTES => c.l0b_bytes.into(),
            PLATFORM_L0C_BYTES => c.l0c_bytes.into(),
            PLATFORM_HBM_BYTES => c.hbm_bytes,
            // The L2 the core model assumes (as aclrtGetDeviceInfo's ACL_DEV_ATTR_L2_CACHE_SIZE).
            PLATFORM_L2_BYTES => 192 << 20,
            PLATFORM_BT_BYTES => npusim_engine::device::core::npu::BT_BYTES.into(),
            other => return Err(AclError::param(format!("item {other}: expected 0..=9"))),
        };
        // SAFETY: checked non-NULL.
        unsafe { value.write(v) };
        Ok(())
    })
}
