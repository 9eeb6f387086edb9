//! The one error type of npusim. Every variant says what went wrong and with which handle or
//! value, and maps to the ACL error code a user of the real runtime would look up
//! ([`NpuError::code`]).

use npusim_device::memory::spaces::MemoryError;

use crate::time::SimTime;

/// `Result` with [`NpuError`].
pub type NpuResult<T> = Result<T, NpuError>;

/// ACL error codes used by npusim (values from ACL's public `acl_base.h` / `acl_rt.h`).
pub mod codes {
    /// ACL_SUCCESS
    pub const SUCCESS: i32 = 0;
    /// ACL_ERROR_INVALID_FILE: a file that cannot be opened or read.
    pub const INVALID_FILE: i32 = 100003;
    /// ACL_ERROR_PARSE_FILE: a file whose contents are malformed (a bad kernel binary).
    pub const PARSE_FILE: i32 = 100006;
    /// ACL_ERROR_RT_PARAM_INVALID
    pub const RT_PARAM_INVALID: i32 = 107000;
    /// ACL_ERROR_RT_INVALID_DEVICEID
    pub const RT_INVALID_DEVICEID: i32 = 107001;
    /// ACL_ERROR_RT_CONTEXT_NULL
    pub const RT_CONTEXT_NULL: i32 = 107002;
    /// ACL_ERROR_RT_STREAM_CONTEXT: the stream does not belong to the current context.
    pub const RT_STREAM_CONTEXT: i32 = 107003;
    /// ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
    pub const RT_EVENT_TIMESTAMP_INVALID: i32 = 107006;
    /// ACL_ERROR_RT_ADDR_UNALIGNED
    pub const RT_ADDR_UNALIGNED: i32 = 107008;
    /// ACL_ERROR_RT_INVALID_MEMORY_TYPE
    pub const RT_INVALID_MEMORY_TYPE: i32 = 107016;
    /// ACL_ERROR_RT_INVALID_HANDLE
    pub const RT_INVALID_HANDLE: i32 = 107017;
    /// ACL_ERROR_RT_WAIT_TIMEOUT
    pub const RT_WAIT_TIMEOUT: i32 = 107019;
    /// ACL_ERROR_RT_STREAM_ABORT
    pub const RT_STREAM_ABORT: i32 = 107023;
    /// ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    pub const RT_FEATURE_NOT_SUPPORT: i32 = 207000;
    /// ACL_ERROR_RT_MEMORY_ALLOCATION
    pub const RT_MEMORY_ALLOCATION: i32 = 207001;
    /// ACL_ERROR_RT_MEMORY_FREE
    pub const RT_MEMORY_FREE: i32 = 207002;
    /// ACL_ERROR_RT_DEVICE_OOM
    pub const RT_DEVICE_OOM: i32 = 207018;
    /// ACL_ERROR_RT_INTERNAL_ERROR
    pub const RT_INTERNAL_ERROR: i32 = 507000;
    /// ACL_ERROR_RT_EVENT_NOT_COMPLETE
    pub const RT_EVENT_NOT_COMPLETE: i32 = 507006;
    /// ACL_ERROR_RT_CONTEXT_RELEASE_ERROR
    pub const RT_CONTEXT_RELEASE_ERROR: i32 = 507007;
    /// ACL_ERROR_RT_REPORT_TIMEOUT: a host callback did not return within the wall-time limit
    /// a wait gives it.
    pub const RT_REPORT_TIMEOUT: i32 = 507012;
    /// ACL_ERROR_RT_AICORE_TIMEOUT
    pub const RT_AICORE_TIMEOUT: i32 = 507014;
    /// ACL_ERROR_RT_AICORE_EXCEPTION
    pub const RT_AICORE_EXCEPTION: i32 = 507015;
    /// ACL_ERROR_RT_AICORE_TRAP_EXCEPTION
    pub const RT_AICORE_TRAP_EXCEPTION: i32 = 507016;
    /// ACL_ERROR_RT_DEVICE_MEM_ERROR: what a task fails with when the stream sanitizer, in
    /// error mode, finds that it races with, uses after free or reuses unordered memory
    /// another task touched.
    pub const RT_DEVICE_MEM_ERROR: i32 = 507053;
}

/// Everything that can go wrong in npusim.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NpuError {
    /// A parameter is out of its documented range.
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    /// No device with this index.
    #[error("device {index} does not exist (the runtime has {count})")]
    InvalidDevice {
        /// The index asked for.
        index: u32,
        /// How many devices there are.
        count: u32,
    },
    /// The thread has no usable current context (it was destroyed).
    #[error("no current context: {0}")]
    ContextNull(String),
    /// A handle that belongs to another context than the current one.
    #[error("{handle} belongs to {owner}, not to the current {current}")]
    WrongContext {
        /// The handle used.
        handle: String,
        /// The context it belongs to.
        owner: String,
        /// The current context of the calling thread.
        current: String,
    },
    /// A handle whose object was destroyed (or never existed in this runtime).
    #[error("{0} was destroyed or never existed")]
    Destroyed(String),
    /// A handle created by another runtime.
    #[error("{0} belongs to another runtime")]
    ForeignHandle(String),
    /// A null device pointer.
    #[error("null device pointer passed as {0}")]
    NullPointer(&'static str),
    /// A device address that is not inside any live allocation of the current context.
    #[error("device address {ptr:#x} is not inside a live allocation of this context")]
    InvalidPointer {
        /// The address.
        ptr: u64,
    },
    /// An access that runs past the end of its allocation.
    #[error("{len} bytes at {ptr:#x} run past the end of the allocation [{base:#x}, +{size})")]
    OutOfBounds {
        /// Start of the access.
        ptr: u64,
        /// Length of the access.
        len: u64,
        /// Base of the allocation the access starts in.
        base: u64,
        /// Size of that allocation.
        size: u64,
    },
    /// `free` of an address that is not the start of a live allocation (double free, interior
    /// or unknown pointer).
    #[error("free of {ptr:#x}: {why}")]
    BadFree {
        /// The address passed to free.
        ptr: u64,
        /// Why it was refused.
        why: &'static str,
    },
    /// Device memory is exhausted even after releasing cached memory.
    #[error("device out of memory: {requested} bytes requested, {available} available")]
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// Bytes that could still be reserved.
        available: u64,
    },
    /// Host memory that cannot be allocated: pinned memory past its budget, or more than the
    /// host will provide.
    #[error("host allocation of {requested} bytes failed: {why}")]
    HostAllocation {
        /// Bytes requested.
        requested: u64,
        /// Why it failed.
        why: String,
    },
    /// A host buffer that was freed, or memory of the wrong kind for this call.
    #[error("invalid host memory: {0}")]
    InvalidMemoryType(String),
    /// A wait ran out of its simulated-time budget.
    #[error("wait on {what} timed out after {timeout} of simulated time")]
    WaitTimeout {
        /// What was waited on.
        what: String,
        /// The timeout given.
        timeout: SimTime,
    },
    /// A wait that can never finish (nothing left that could make progress).
    #[error("wait on {0} can never complete: nothing queued can make progress")]
    NeverCompletes(String),
    /// A task was aborted because an earlier task of its context failed.
    #[error("task {seq} on {stream} aborted after an earlier failure")]
    StreamAbort {
        /// The stream.
        stream: String,
        /// The task's sequence number on that stream.
        seq: u64,
    },
    /// A kernel faulted on an AI core.
    #[error("AI core exception in kernel {kernel}: {detail}")]
    AicoreException {
        /// Kernel name.
        kernel: String,
        /// What happened.
        detail: String,
    },
    /// A kernel ran past its time budget (the watchdog).
    #[error("AI core timeout in kernel {kernel}: {detail}")]
    AicoreTimeout {
        /// Kernel name.
        kernel: String,
        /// What happened.
        detail: String,
    },
    /// A kernel trapped (illegal instruction, ebreak, division by zero).
    #[error("AI core trap in kernel {kernel}: {detail}")]
    AicoreTrap {
        /// Kernel name.
        kernel: String,
        /// What happened.
        detail: String,
    },
    /// An event has not completed yet (or one of the pair of an elapsed-time query).
    #[error("{0} has not completed")]
    EventNotComplete(String),
    /// An event that was never recorded, where a recorded one is needed.
    #[error("{0} was never recorded")]
    EventNotRecorded(String),
    /// A context that cannot be destroyed now.
    #[error("cannot release {0}")]
    ContextRelease(String),
    /// No kernel with this name or id.
    #[error("no kernel named {0:?} is registered")]
    KernelNotFound(String),
    /// Something the simulator does not model.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// A tensor shape that cannot be used: a negative or overflowing dimension, a rank past
    /// the limit, a shape read before anything wrote it, or shapes an op cannot combine.
    #[error("invalid shape: {0}")]
    InvalidShape(String),
    /// A tensor's actual shape needs more bytes than its buffer holds; the task faulted
    /// instead of writing past the buffer.
    #[error("{tensor} of {op}: shape {shape} needs {needed} bytes but its buffer holds {capacity}")]
    ShapeExceedsBuffer {
        /// The op.
        op: String,
        /// The tensor (input or output name).
        tensor: String,
        /// The actual shape, as `[d0, d1, ...]`.
        shape: String,
        /// Bytes the shape needs.
        needed: u64,
        /// Bytes the buffer holds from the tensor's address to the end of its allocation.
        capacity: u64,
    },
    /// Every slot of a context's shape buffer holds a live shape handle.
    #[error("the shape buffer of {context} is full ({slots} live shape handles)")]
    ShapeBufferFull {
        /// The context.
        context: String,
        /// Its slot count.
        slots: u32,
    },
    /// A kernel binary that is malformed or cannot be linked.
    #[error("invalid kernel binary: {0}")]
    InvalidBinary(String),
    /// A file that cannot be read.
    #[error("cannot read {path}: {why}")]
    File {
        /// The path.
        path: String,
        /// What the system said.
        why: String,
    },
    /// A host callback panicked: its task fails with this error (`ACL_ERROR_RT_INTERNAL_ERROR`,
    /// the code ACL gives a task that failed in the runtime); nothing else is affected.
    #[error("host callback on {stream} panicked: {message}")]
    CallbackPanicked {
        /// The callback's stream.
        stream: String,
        /// The panic's message.
        message: String,
    },
    /// A wait gave up on a host callback that had not returned after `limit` of wall time
    /// (`ACL_ERROR_RT_REPORT_TIMEOUT`); the callback's task stays pending.
    #[error("wait on {what} gave up: a host callback had not returned after {limit:?} (wall time)")]
    CallbackTimeout {
        /// What was waited on.
        what: String,
        /// The wall-time limit.
        limit: std::time::Duration,
    },
    /// The stream sanitizer in error mode found this task on the later side of a report
    /// (`ACL_ERROR_RT_DEVICE_MEM_ERROR`); the message is the report.
    #[error("{0}")]
    SanitizerViolation(String),
    /// A bug in npusim (please report it); nothing the caller did.
    #[error("internal error: {0}")]
    Internal(String),
    /// One of npusim's own resources (named) is not in the runtime's world: an embedder
    /// removed it, or swapped in a world without it, through a `RuntimeGuard`. A call that
    /// needs it fails with this (`ACL_ERROR_RT_INTERNAL_ERROR`, the runtime's state is broken)
    /// until it is put back.
    #[error("the runtime's world has no {0} resource (removed through a RuntimeGuard?)")]
    MissingResource(&'static str),
}

impl NpuError {
    /// [`NpuError::MissingResource`] for the resource type `T` (named without its path).
    pub fn missing_resource<T: ?Sized>() -> Self {
        let path = std::any::type_name::<T>();
        NpuError::MissingResource(path.rsplit("::").next().unwrap_or(path))
    }

    /// The ACL error code (`aclError`) for this error.
    pub fn code(&self) -> i32 {
        use codes::*;
        match self {
            NpuError::InvalidParam(_)
            | NpuError::NullPointer(_)
            | NpuError::InvalidPointer { .. }
            | NpuError::OutOfBounds { .. }
            | NpuError::KernelNotFound(_)
            | NpuError::InvalidShape(_) => RT_PARAM_INVALID,
            NpuError::ShapeExceedsBuffer { .. } => RT_AICORE_EXCEPTION,
            NpuError::ShapeBufferFull { .. } | NpuError::HostAllocation { .. } => {
                RT_MEMORY_ALLOCATION
            }
            NpuError::InvalidDevice { .. } => RT_INVALID_DEVICEID,
            NpuError::ContextNull(_) => RT_CONTEXT_NULL,
            NpuError::WrongContext { .. } => RT_STREAM_CONTEXT,
            NpuError::Destroyed(_) | NpuError::ForeignHandle(_) => RT_INVALID_HANDLE,
            NpuError::BadFree { .. } => RT_MEMORY_FREE,
            NpuError::OutOfMemory { .. } => RT_DEVICE_OOM,
            NpuError::InvalidMemoryType(_) => RT_INVALID_MEMORY_TYPE,
            NpuError::WaitTimeout { .. } | NpuError::NeverCompletes(_) => RT_WAIT_TIMEOUT,
            NpuError::StreamAbort { .. } => RT_STREAM_ABORT,
            NpuError::AicoreException { .. } => RT_AICORE_EXCEPTION,
            NpuError::AicoreTimeout { .. } => RT_AICORE_TIMEOUT,
            NpuError::AicoreTrap { .. } => RT_AICORE_TRAP_EXCEPTION,
            NpuError::EventNotComplete(_) => RT_EVENT_NOT_COMPLETE,
            NpuError::EventNotRecorded(_) => RT_EVENT_TIMESTAMP_INVALID,
            NpuError::ContextRelease(_) => RT_CONTEXT_RELEASE_ERROR,
            NpuError::NotSupported(_) => RT_FEATURE_NOT_SUPPORT,
            NpuError::Internal(_)
            | NpuError::CallbackPanicked { .. }
            | NpuError::MissingResource(_) => RT_INTERNAL_ERROR,
            NpuError::CallbackTimeout { .. } => RT_REPORT_TIMEOUT,
            NpuError::SanitizerViolation(_) => RT_DEVICE_MEM_ERROR,
            NpuError::InvalidBinary(_) => PARSE_FILE,
            NpuError::File { .. } => INVALID_FILE,
        }
    }
}

impl From<MemoryError> for NpuError {
    /// Variant for variant: the same message, the same ACL code.
    fn from(e: MemoryError) -> Self {
        match e {
            MemoryError::InvalidParam(m) => NpuError::InvalidParam(m),
            MemoryError::ContextNull(m) => NpuError::ContextNull(m),
            MemoryError::BadFree { ptr, why } => NpuError::BadFree { ptr, why },
            MemoryError::OutOfMemory {
                requested,
                available,
            } => NpuError::OutOfMemory {
                requested,
                available,
            },
            MemoryError::Internal(m) => NpuError::Internal(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_acl() {
        assert_eq!(NpuError::InvalidParam("x".into()).code(), 107000);
        assert_eq!(NpuError::ContextNull("x".into()).code(), 107002);
        assert_eq!(NpuError::NeverCompletes("x".into()).code(), 107019);
        assert_eq!(
            NpuError::StreamAbort {
                stream: "s".into(),
                seq: 1
            }
            .code(),
            107023
        );
        assert_eq!(
            NpuError::OutOfMemory {
                requested: 1,
                available: 0
            }
            .code(),
            207018
        );
        let e = NpuError::AicoreException {
            kernel: "k".into(),
            detail: "d".into(),
        };
        assert_eq!(e.code(), 507015);
        assert_eq!(NpuError::InvalidShape("x".into()).code(), 107000);
        assert_eq!(NpuError::MissingResource("SimClock").code(), 507000);
    }

    #[test]
    fn a_missing_resource_is_named_without_its_path() {
        struct SimClock;
        assert_eq!(
            NpuError::missing_resource::<SimClock>(),
            NpuError::MissingResource("SimClock")
        );
    }
}
