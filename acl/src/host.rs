//! Pinned host memory. `aclrtMallocHost` hands C the bytes of an npusim pinned [`HostBuffer`]
//! and remembers it by address, so an asynchronous copy from or to anywhere inside it is a
//! plain npusim copy on that buffer: the simulated DMA engine reads or writes the memory when
//! the copy runs, not when it is enqueued, and in stream order. The buffer lives until
//! `aclrtFreeHost` *and* the last queued copy that names it have gone, so a copy never touches
//! freed memory.
//!
//! Like real DMA, a copy in flight and the host program share the bytes: the program must not
//! touch the part a queued copy reads or writes until it has synchronized with the copy.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

use npusim_engine::HostBuffer;

use crate::error::{AclError, call, non_null};
use crate::state::session;
use crate::types::*;

struct Pinned {
    buffer: HostBuffer,
    len: u64,
}

/// Every live `aclrtMallocHost` allocation, by base address. Process-wide, not per session:
/// the memory stays the program's until `aclrtFreeHost`, even across `aclFinalize`.
static PINNED: Mutex<BTreeMap<usize, Pinned>> = Mutex::new(BTreeMap::new());

fn pinned_map() -> std::sync::MutexGuard<'static, BTreeMap<usize, Pinned>> {
    PINNED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pinned buffer holding `[ptr, ptr + len)`, and the offset of `ptr` in it.
pub(crate) fn pinned(ptr: *const c_void, len: u64) -> Option<(HostBuffer, u64)> {
    let addr = ptr.addr();
    let map = pinned_map();
    let (&base, p) = map.range(..=addr).next_back()?;
    let offset = (addr - base) as u64;
    let end = offset.checked_add(len)?;
    (end <= p.len).then(|| (p.buffer.clone(), offset))
}

/// `aclError aclrtMallocHost(void **hostPtr, size_t size)`: `size` bytes of pinned
/// (page-locked) host memory, zeroed, aligned for any C type. Asynchronous copies from and to
/// it are asynchronous; from and to other host memory they are staged and synchronous.
///
/// # Safety
/// `hostPtr` is NULL or points to a `void *`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) -> aclError {
    call("aclrtMallocHost", || {
        non_null(hostPtr, "hostPtr")?;
        if size == 0 {
            return Err(AclError::param("size is 0"));
        }
        let buffer = session()?.rt.memory().malloc_host(size as u64)?;
        let ptr = buffer.bytes()?.as_mut_ptr();
        pinned_map().insert(
            ptr.addr(),
            Pinned {
                buffer,
                len: size as u64,
            },
        );
        // SAFETY: checked non-NULL; the caller passes a writable void *.
        unsafe { hostPtr.write(ptr.cast()) };
        Ok(())
    })
}

/// `aclError aclrtFreeHost(void *hostPtr)`: frees memory from `aclrtMallocHost`. Queued copies
/// that name it complete first (as `cudaFreeHost`, it waits for the devices' work).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFreeHost(hostPtr: *mut c_void) -> aclError {
    call("aclrtFreeHost", || {
        non_null(hostPtr, "hostPtr")?;
        // Outside a session (before aclInit, after aclFinalize) it is refused like every call
        // that needs one, whatever the pointer.
        let s = session()?;
        let buffer = match pinned_map().get(&hostPtr.addr()) {
            Some(p) => p.buffer.clone(),
            None => {
                return Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("{hostPtr:p} is not the start of memory from aclrtMallocHost"),
                ));
            }
        };
        s.rt.memory().free_host(&buffer)?;
        pinned_map().remove(&hostPtr.addr());
        Ok(())
    })
}
