//! The C-visible types and constants, as `acl/include/acl/acl.h` declares them: `aclError`, the
//! opaque handle types, the enums (as their integer values) and the few structs a caller fills
//! in. Names and numbers are ACL's, so code written against ACL's headers means the same here.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::c_void;

/// `aclError`: 0 on success, else one of the codes below.
pub type aclError = i32;

/// `aclrtContext`: an opaque context handle.
pub type aclrtContext = *mut c_void;
/// `aclrtStream`: an opaque stream handle; NULL names the current context's default stream.
pub type aclrtStream = *mut c_void;
/// `aclrtEvent`: an opaque event handle.
pub type aclrtEvent = *mut c_void;
/// `aclrtBinHandle`: an opaque handle of a loaded kernel binary.
pub type aclrtBinHandle = *mut c_void;
/// `aclrtFuncHandle`: an opaque handle of a kernel function of a loaded binary.
pub type aclrtFuncHandle = *mut c_void;
/// `aclrtMemPool`: an opaque memory-pool handle.
pub type aclrtMemPool = *mut c_void;
/// `aclrtArgsHandle`: an opaque handle of a kernel's arguments under construction.
pub type aclrtArgsHandle = *mut c_void;
/// `aclrtParamHandle`: an opaque handle of one argument of an args handle.
pub type aclrtParamHandle = *mut c_void;
/// `aclrtNotify`: an opaque notify handle.
pub type aclrtNotify = *mut c_void;
/// `aclrtHostFunc`: a host function of `aclrtLaunchHostFunc`.
pub type aclrtHostFunc = Option<unsafe extern "C" fn(args: *mut c_void)>;

/// `aclrtCallback`: a host callback of `aclrtLaunchCallback`.
pub type aclrtCallback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
/// `aclrtExceptionInfoCallback`: told about every failing task.
pub type aclrtExceptionInfoCallback = Option<unsafe extern "C" fn(info: *mut aclrtExceptionInfo)>;

// ---- error codes (ACL's numbers) ----

/// ACL_SUCCESS
pub const ACL_SUCCESS: aclError = 0;
/// ACL_ERROR_INVALID_PARAM: a NULL or out-of-range argument, caught before anything is done.
pub const ACL_ERROR_INVALID_PARAM: aclError = 100_000;
/// ACL_ERROR_UNINITIALIZE: a call before `aclInit` (or after `aclFinalize`).
pub const ACL_ERROR_UNINITIALIZE: aclError = 100_001;
/// ACL_ERROR_REPEAT_INITIALIZE: `aclInit` while initialized.
pub const ACL_ERROR_REPEAT_INITIALIZE: aclError = 100_002;
/// ACL_ERROR_INVALID_FILE: `aclInit`'s configuration file cannot be read.
pub const ACL_ERROR_INVALID_FILE: aclError = 100_003;
/// ACL_ERROR_WRITE_FILE: the timeline (`NPUSIM_TRACE`) could not be written at `aclFinalize`.
pub const ACL_ERROR_WRITE_FILE: aclError = 100_004;
/// ACL_ERROR_REPEAT_SUBSCRIBE: `aclrtSubscribeReport` of a stream already subscribed.
pub const ACL_ERROR_REPEAT_SUBSCRIBE: aclError = 100_033;
/// ACL_ERROR_STREAM_NOT_SUBSCRIBE: `aclrtUnSubscribeReport` of a stream that thread does not serve.
pub const ACL_ERROR_STREAM_NOT_SUBSCRIBE: aclError = 100_034;
/// ACL_ERROR_THREAD_NOT_SUBSCRIBE: deprecated by CANN for ACL_ERROR_RT_THREAD_SUBSCRIBE, which
/// npusim returns; kept for programs that name it.
pub const ACL_ERROR_THREAD_NOT_SUBSCRIBE: aclError = 100_035;
/// ACL_ERROR_WAIT_CALLBACK_TIMEOUT: deprecated by CANN for ACL_ERROR_RT_REPORT_TIMEOUT, which
/// npusim returns; kept for programs that name it.
pub const ACL_ERROR_WAIT_CALLBACK_TIMEOUT: aclError = 100_036;
/// ACL_ERROR_REPEAT_FINALIZE: `aclFinalize` while not initialized.
pub const ACL_ERROR_REPEAT_FINALIZE: aclError = 100_037;
/// ACL_ERROR_RT_PARAM_INVALID: a handle or pointer this library did not hand out (or that was
/// destroyed), or a value the runtime refuses.
pub const ACL_ERROR_RT_PARAM_INVALID: aclError = 107_000;
/// ACL_ERROR_RT_INVALID_DEVICEID
pub const ACL_ERROR_RT_INVALID_DEVICEID: aclError = 107_001;
/// ACL_ERROR_RT_CONTEXT_NULL
pub const ACL_ERROR_RT_CONTEXT_NULL: aclError = 107_002;
/// ACL_ERROR_RT_STREAM_CONTEXT: the object belongs to another context than the current one.
pub const ACL_ERROR_RT_STREAM_CONTEXT: aclError = 107_003;
/// ACL_ERROR_RT_THREAD_SUBSCRIBE: `aclrtProcessReport` / `aclrtProcessHostFunc` on a thread
/// that serves no stream (CANN's replacement for ACL_ERROR_THREAD_NOT_SUBSCRIBE).
pub const ACL_ERROR_RT_THREAD_SUBSCRIBE: aclError = 107_012;
/// ACL_ERROR_RT_STREAM_NO_CB_REG: `aclrtLaunchCallback` on a stream no thread subscribed to.
pub const ACL_ERROR_RT_STREAM_NO_CB_REG: aclError = 107_015;
/// ACL_ERROR_RT_MEMORY_ALLOCATION: a memory pool's `maxSize` would be exceeded.
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: aclError = 207_001;
/// ACL_ERROR_RT_INTERNAL_ERROR: a bug in npusim (a caught panic); the process goes on.
pub const ACL_ERROR_RT_INTERNAL_ERROR: aclError = 507_000;
/// ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: `aclrtSynchronizeStreamWithTimeout` ran out of time.
pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: aclError = 507_046;
/// ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: `aclrtSynchronizeEventWithTimeout` ran out of time.
pub const ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: aclError = 507_047;
/// ACL_ERROR_RT_FEATURE_NOT_SUPPORT: a call or a case npusim does not model.
pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: aclError = 207_000;
/// ACL_ERROR_RT_REPORT_TIMEOUT: a host callback had not returned within the wall-time limit a
/// synchronize gives it (`NPUSIM_CALLBACK_TIMEOUT_MS`, default 60 s), or `aclrtProcessReport`
/// / `aclrtProcessHostFunc` saw nothing come due within its timeout.
pub const ACL_ERROR_RT_REPORT_TIMEOUT: aclError = 507_012;
/// ACL_ERROR_RT_AICORE_TIMEOUT: a kernel ran past its simulated timeout.
pub const ACL_ERROR_RT_AICORE_TIMEOUT: aclError = 507_014;
/// ACL_ERROR_RT_AICORE_EXCEPTION: a kernel faulted.
pub const ACL_ERROR_RT_AICORE_EXCEPTION: aclError = 507_015;
/// ACL_ERROR_RT_AICORE_TRAP_EXCEPTION: a kernel trapped.
pub const ACL_ERROR_RT_AICORE_TRAP_EXCEPTION: aclError = 507_016;

// ---- enums and flags ----

/// `aclrtStreamStatus`: ACL_STREAM_STATUS_COMPLETE.
pub const ACL_STREAM_STATUS_COMPLETE: u32 = 0;
/// `aclrtStreamStatus`: ACL_STREAM_STATUS_NOT_READY.
pub const ACL_STREAM_STATUS_NOT_READY: u32 = 1;
/// `aclrtEventRecordedStatus`: ACL_EVENT_RECORDED_STATUS_NOT_READY.
pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: u32 = 0;
/// `aclrtEventRecordedStatus`: ACL_EVENT_RECORDED_STATUS_COMPLETE.
pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: u32 = 1;
/// `aclrtCallbackBlockType`: ACL_CALLBACK_NO_BLOCK.
pub const ACL_CALLBACK_NO_BLOCK: u32 = 0;
/// `aclrtCallbackBlockType`: ACL_CALLBACK_BLOCK.
pub const ACL_CALLBACK_BLOCK: u32 = 1;
/// Failure mode ACL_CONTINUE_ON_FAILURE (ACL's default, and this library's).
pub const ACL_CONTINUE_ON_FAILURE: u64 = 0;
/// Failure mode ACL_STOP_ON_FAILURE.
pub const ACL_STOP_ON_FAILURE: u64 = 1;
/// `aclrtMemLocationType`: ACL_MEM_LOCATION_TYPE_DEVICE.
pub const ACL_MEM_LOCATION_TYPE_DEVICE: u32 = 1;

/// `aclrtMemcpyKind`: ACL_MEMCPY_HOST_TO_HOST.
pub const ACL_MEMCPY_HOST_TO_HOST: u32 = 0;
/// `aclrtMemcpyKind`: ACL_MEMCPY_HOST_TO_DEVICE.
pub const ACL_MEMCPY_HOST_TO_DEVICE: u32 = 1;
/// `aclrtMemcpyKind`: ACL_MEMCPY_DEVICE_TO_HOST.
pub const ACL_MEMCPY_DEVICE_TO_HOST: u32 = 2;
/// `aclrtMemcpyKind`: ACL_MEMCPY_DEVICE_TO_DEVICE.
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: u32 = 3;
/// `aclrtMemcpyKind`: ACL_MEMCPY_DEFAULT (direction from the pointers).
pub const ACL_MEMCPY_DEFAULT: u32 = 4;
/// `aclrtMemcpyKind`: ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE (a host-to-device copy here).
pub const ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: u32 = 5;
/// `aclrtMemcpyKind`: ACL_MEMCPY_INNER_DEVICE_TO_DEVICE.
pub const ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: u32 = 6;
/// `aclrtMemcpyKind`: ACL_MEMCPY_INTER_DEVICE_TO_DEVICE.
pub const ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: u32 = 7;

/// `aclrtRunMode`: ACL_DEVICE.
pub const ACL_DEVICE: u32 = 0;
/// `aclrtRunMode`: ACL_HOST.
pub const ACL_HOST: u32 = 1;
/// `aclrtLastErrLevel`: ACL_RT_THREAD_LEVEL.
pub const ACL_RT_THREAD_LEVEL: u32 = 0;
/// `aclrtDevResLimitType`: ACL_RT_DEV_RES_CUBE_CORE.
pub const ACL_RT_DEV_RES_CUBE_CORE: u32 = 0;
/// `aclrtDevResLimitType`: ACL_RT_DEV_RES_VECTOR_CORE.
pub const ACL_RT_DEV_RES_VECTOR_CORE: u32 = 1;
/// `aclrtDeviceStatus`: ACL_RT_DEVICE_STATUS_NORMAL.
pub const ACL_RT_DEVICE_STATUS_NORMAL: u32 = 0;
/// `aclrtErrorType`: ACL_RT_NO_ERROR.
pub const ACL_RT_NO_ERROR: u32 = 0;
/// `aclrtErrorType`: ACL_RT_ERROR_AICORE.
pub const ACL_RT_ERROR_AICORE: u32 = 3;
/// `aclrtErrorType`: ACL_RT_ERROR_OTHERS.
pub const ACL_RT_ERROR_OTHERS: u32 = 0xFFFF;
/// `aclrtAicoreErrorType`: ACL_RT_AICORE_ERROR_SW.
pub const ACL_RT_AICORE_ERROR_SW: u32 = 1;
/// `aclrtLaunchKernelAttrId`: ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT (seconds).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: u32 = 7;
/// `aclrtLaunchKernelAttrId`: ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US.
pub const ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: u32 = 8;

// ---- structs ----

/// `aclrtUtilizationInfo`: percentages of `aclrtGetDeviceUtilizationRate`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclrtUtilizationInfo {
    /// Cube (AI-core) utilization, percent.
    pub cubeUtilization: i32,
    /// Vector utilization, percent.
    pub vectorUtilization: i32,
    /// AI CPU utilization (0: none in the model).
    pub aicpuUtilization: i32,
    /// Memory utilization, percent.
    pub memoryUtilization: i32,
    /// Reserved: NULL.
    pub utilizationExtend: *mut c_void,
}

/// `aclrtErrorInfo` of `aclrtGetErrorVerbose` (the detail union is 8 + 20 * 128 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtErrorInfo {
    /// Whether a repair may be tried (0 here).
    pub tryRepair: u8,
    /// Whether `detail` is filled in.
    pub hasDetail: u8,
    /// Reserved.
    pub reserved: [u8; 2],
    /// `aclrtErrorType`.
    pub errorType: u32,
    /// The detail union; its first word is `aclrtAicoreErrorType` for AI-core errors.
    pub detail: [u64; 1 + 20 * 16],
}

/// `aclrtLaunchKernelAttr`: an id and a 16-byte value union.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclrtLaunchKernelAttr {
    /// `aclrtLaunchKernelAttrId`.
    pub id: u32,
    /// The value union (`rsv[4]` is its largest member).
    pub value: [u32; 4],
}

/// `aclrtLaunchKernelCfg`: launch attributes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclrtLaunchKernelCfg {
    /// The attributes.
    pub attrs: *mut aclrtLaunchKernelAttr,
    /// How many.
    pub numAttrs: usize,
}

/// `aclrtMemLocation`: where a memory pool lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct aclrtMemLocation {
    /// Device id.
    pub id: u32,
    /// `aclrtMemLocationType`; only ACL_MEM_LOCATION_TYPE_DEVICE is supported.
    pub type_: u32,
}

/// `aclrtMemPoolProps`: the properties of `aclrtMemPoolCreate`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclrtMemPoolProps {
    /// `aclrtMemAllocationType` (ACL_MEM_ALLOCATION_TYPE_PINNED = 0).
    pub allocType: u32,
    /// `aclrtMemHandleType` (ignored).
    pub handleType: u32,
    /// The device the pool serves.
    pub location: aclrtMemLocation,
    /// Most bytes the pool may have allocated at once; 0 for no limit.
    pub maxSize: usize,
    /// Reserved, zero.
    pub reserved: [u8; 32],
}

/// `aclrtBinaryLoadOptions`: load options (accepted and ignored: npusim binaries need none).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclrtBinaryLoadOptions {
    /// The options (`aclrtBinaryLoadOption *`).
    pub options: *mut c_void,
    /// How many.
    pub numOpt: usize,
}

/// `aclrtExceptionInfo`: opaque to C; read it with the `aclrtGet*FromExceptionInfo` functions,
/// only inside the exception callback it was given to.
#[derive(Clone, Debug, Default)]
pub struct aclrtExceptionInfo {
    pub(crate) task_id: u32,
    pub(crate) stream_id: u32,
    pub(crate) thread_id: u32,
    pub(crate) device_id: u32,
    pub(crate) error_code: u32,
    /// The failing kernel's function handle (0 when not a kernel launched through C).
    pub(crate) func: u64,
    /// The failing kernel's argument slots.
    pub(crate) args: Option<std::sync::Arc<[u8]>>,
}
