//! Device memory, copies and memsets. Device pointers are npusim device addresses (`DevicePtr`)
//! cast to `void *`: C may do arithmetic on them, never dereference them.
//!
//! - `aclrtMemcpy` / `aclrtMemset` are synchronous and, as ACL documents, wait for nothing but
//!   themselves: they run on a private stream of the current context and return when done.
//! - `aclrtMemcpyAsync` / `aclrtMemsetAsync` are stream-ordered. With pinned host memory
//!   (`aclrtMallocHost`) the copy is asynchronous and reads or writes the host bytes when it
//!   runs. With other host memory, as ACL documents, the call returns once the copy no longer
//!   needs the memory: a host-to-device copy is staged at the call; a device-to-host copy is
//!   waited for.
//! - Host-to-host copies (`aclrtMemcpy`, or `ACL_MEMCPY_DEFAULT` between host buffers), and
//!   memsets of pinned host memory, happen at the call. `aclrtMemcpyAsync` with
//!   `ACL_MEMCPY_HOST_TO_HOST` is refused with ACL_ERROR_RT_FEATURE_NOT_SUPPORT, as CANN
//!   documents for its A2 / A3 training products and for every EP (host) form.

use std::ffi::c_void;

use npusim_engine::AllocPolicy;
use npusim_engine::{DevicePtr, HostBuffer, Stream};

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::Alloc;
use crate::host::pinned;
use crate::state::{Session, session};
use crate::types::*;

fn dev(p: *const c_void) -> DevicePtr {
    DevicePtr(p.addr() as u64)
}

/// The page policy of an `aclrtMemMallocPolicy`: the _P2P forms as the plain ones, the HUGE1G
/// forms as huge-only (npusim's huge pages are 2 MiB); the memory-type flag bits are ignored.
fn policy(p: u32) -> AclResult<AllocPolicy> {
    match p & 0xff {
        0 | 3 => Ok(AllocPolicy::HugeFirst),
        1 | 4 | 6 | 7 => Ok(AllocPolicy::HugeOnly),
        2 | 5 => Ok(AllocPolicy::NormalOnly),
        _ => Err(AclError::param(format!(
            "unknown aclrtMemMallocPolicy {p:#x}"
        ))),
    }
}

/// Allocates `size` bytes in the current context and remembers them (for `ACL_MEMCPY_DEFAULT`,
/// device-resident kernel arguments and `aclrtResetDevice`).
pub(crate) fn alloc(
    s: &Session,
    size: u64,
    policy: AllocPolicy,
    pool: Option<u64>,
) -> AclResult<DevicePtr> {
    let (ctx, _) = s.current_ctx()?;
    let ptr = s.rt.memory().malloc_with_policy(size, policy)?;
    s.tables().allocs.insert((ctx, ptr.0), Alloc { size, pool });
    Ok(ptr)
}

/// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`: `size`
/// bytes of device memory in the current context, with the policy's page sizes
/// (ACL_MEM_MALLOC_HUGE_FIRST, _HUGE_ONLY, _NORMAL_ONLY, and their _P2P forms).
///
/// # Safety
/// `devPtr` is NULL or points to a `void *`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(
    devPtr: *mut *mut c_void,
    size: usize,
    policy: u32,
) -> aclError {
    call("aclrtMalloc", || {
        non_null(devPtr, "devPtr")?;
        if size == 0 {
            return Err(AclError::param("size is 0"));
        }
        let policy = self::policy(policy)?;
        let ptr = alloc(&*session()?, size as u64, policy, None)?;
        // SAFETY: checked non-NULL; the caller passes a writable void *.
        unsafe { devPtr.write(std::ptr::without_provenance_mut(ptr.0 as usize)) };
        Ok(())
    })
}

/// Frees a device allocation of the current context and forgets it.
pub(crate) fn free(s: &Session, ptr: DevicePtr, stream: Option<Stream>) -> AclResult<()> {
    let (ctx, _) = s.current_ctx()?;
    let freed = match stream {
        Some(st) => s.rt.memory().free_async(ptr, st),
        None => s.rt.memory().free(ptr),
    };
    if let Err(e) = freed {
        // A fault under ACL_STOP_ON_FAILURE released the context's memory already: freeing
        // what the program allocated is cleanup, and succeeds, as in ACL.
        let faulted = matches!(s.rt.contexts().error(), Ok(Some(_)));
        if !(faulted && s.tables().allocs.contains_key(&(ctx, ptr.0))) {
            return Err(e.into());
        }
    }
    let mut t = s.tables();
    if let Some(a) = t.allocs.remove(&(ctx, ptr.0))
        && let Some(p) = a.pool.and_then(|p| t.pools.get_mut(&p))
    {
        p.live.remove(&ptr.0);
    }
    Ok(())
}

/// `aclError aclrtFree(void *devPtr)`: frees device memory. Returns at once; the memory is
/// reused only after every queued task that names it is done.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFree(devPtr: *mut c_void) -> aclError {
    call("aclrtFree", || {
        non_null(devPtr, "devPtr")?;
        free(&*session()?, dev(devPtr), None)
    })
}

/// Which sides of a copy are device memory: (destination, source). A side the kind calls host
/// memory that is in fact device memory of the current context is refused: the host would
/// read or write an address that is not its own.
fn direction(
    s: &Session,
    kind: u32,
    dst: *const c_void,
    src: *const c_void,
    count: u64,
) -> AclResult<(bool, bool)> {
    let (ctx, _) = s.current_ctx()?;
    let sides = match kind {
        ACL_MEMCPY_HOST_TO_HOST => (false, false),
        ACL_MEMCPY_HOST_TO_DEVICE | ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE => (true, false),
        ACL_MEMCPY_DEVICE_TO_HOST => (false, true),
        ACL_MEMCPY_DEVICE_TO_DEVICE
        | ACL_MEMCPY_INNER_DEVICE_TO_DEVICE
        | ACL_MEMCPY_INTER_DEVICE_TO_DEVICE => (true, true),
        ACL_MEMCPY_DEFAULT => {
            return Ok((
                s.is_device(ctx, dst.addr() as u64, count),
                s.is_device(ctx, src.addr() as u64, count),
            ));
        }
        other => return Err(AclError::param(format!("unknown aclrtMemcpyKind {other}"))),
    };
    for (device, p, what) in [(sides.0, dst, "dst"), (sides.1, src, "src")] {
        if !device && s.is_device(ctx, p.addr() as u64, 1) {
            return Err(AclError::param(format!(
                "{what} {p:p} is device memory, but aclrtMemcpyKind {kind} says host memory"
            )));
        }
    }
    Ok(sides)
}

/// Fails with ACL_ERROR_RT_PARAM_INVALID unless `[p, p + count)` lies in one device allocation
/// of the current context: checked before a copy stages `count` bytes of host memory.
fn device_range(s: &Session, p: *const c_void, count: u64) -> AclResult<()> {
    let (ctx, _) = s.current_ctx()?;
    if s.is_device(ctx, p.addr() as u64, count) {
        return Ok(());
    }
    Err(AclError::new(
        ACL_ERROR_RT_PARAM_INVALID,
        format!(
            "{count} bytes at {p:p} are not inside one device allocation of the current context"
        ),
    ))
}

/// Copies `count` bytes; `stream` None is synchronous.
///
/// # Safety
/// Host sides are valid for `count` bytes.
unsafe fn copy(
    s: &Session,
    dst: *mut c_void,
    src: *const c_void,
    count: u64,
    (dst_dev, src_dev): (bool, bool),
    stream: Option<Stream>,
) -> AclResult<()> {
    let len = usize::try_from(count).map_err(|_| AclError::param("count too large"))?;
    let on = |st: Option<Stream>| st.map_or_else(|| s.copy_stream(), Ok);
    // A synchronous copy is the calling thread's own access to the sanitizer.
    let _sync = stream
        .is_none()
        .then(npusim_engine::sanitizer::SyncCallGuard::enter);
    match (dst_dev, src_dev) {
        (false, false) => {
            // The thread's own reads and writes of pinned memory, as the sanitizer sees them.
            if let Some((buf, offset)) = pinned(src, count) {
                npusim_engine::sanitizer::host_access(&buf, offset, count, false)?;
            }
            if let Some((buf, offset)) = pinned(dst, count) {
                npusim_engine::sanitizer::host_access(&buf, offset, count, true)?;
            }
            // SAFETY: both host ranges are valid for `len` bytes (the caller's contract);
            // `copy` allows them to overlap.
            unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), len) };
        }
        (true, false) => {
            let st = on(stream)?;
            match pinned(src, count) {
                Some((buf, offset)) => {
                    if stream.is_none() {
                        // Synchronous: the thread's own read of its pinned memory.
                        npusim_engine::sanitizer::host_access(&buf, offset, count, false)?;
                    }
                    s.rt.memory()
                        .memcpy_htod_async_at(dev(dst), &buf, offset, count, st)?
                }
                None => {
                    // Refused before `count` bytes are staged.
                    device_range(s, dst, count)?;
                    // SAFETY: the source is valid for `len` bytes (the caller's contract).
                    let bytes = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len) };
                    if stream.is_some() {
                        s.rt.memory()
                            .memcpy_htod_async_pageable(dev(dst), bytes, st)?;
                    } else {
                        s.rt.memory().memcpy_htod_async(
                            dev(dst),
                            &HostBuffer::staged(bytes),
                            count,
                            st,
                        )?;
                    }
                }
            }
            if stream.is_none() {
                s.rt.streams().synchronize(st)?;
            }
        }
        (false, true) => {
            let st = on(stream)?;
            match pinned(dst, count) {
                Some((buf, offset)) => {
                    if stream.is_none() {
                        // Synchronous: the thread's own write of its pinned memory.
                        npusim_engine::sanitizer::host_access(&buf, offset, count, true)?;
                    }
                    s.rt.memory()
                        .memcpy_dtoh_async_at(&buf, offset, dev(src), count, st)?;
                    if stream.is_none() {
                        s.rt.streams().synchronize(st)?;
                    }
                }
                None => {
                    // `count` comes from the caller: check the device range before staging
                    // anything of that size, then stage fallibly.
                    device_range(s, src, count)?;
                    let staged = HostBuffer::try_new(count, false)?;
                    s.rt.memory()
                        .memcpy_dtoh_async(&staged, dev(src), count, st)?;
                    s.rt.streams().synchronize(st)?;
                    let data = staged.bytes()?;
                    // SAFETY: the destination is valid for `len` bytes (the caller's
                    // contract); `data` is our own buffer of `len` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst.cast::<u8>(), len) };
                }
            }
        }
        (true, true) => {
            let st = on(stream)?;
            s.rt.memory()
                .memcpy_dtod_async(dev(dst), dev(src), count, st)?;
            if stream.is_none() {
                s.rt.streams().synchronize(st)?;
            }
        }
    }
    Ok(())
}

fn check_copy(
    dst: *const c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
) -> AclResult<()> {
    non_null(dst, "dst")?;
    non_null(src, "src")?;
    if count > destMax {
        return Err(AclError::param(format!(
            "count {count} is larger than destMax {destMax}"
        )));
    }
    Ok(())
}

/// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind)`: copies `count` bytes and returns when they are copied. Waits for no
/// other work (synchronize first if the source is being produced by a stream).
///
/// # Safety
/// Host pointers are valid for `count` bytes; device pointers are any value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
) -> aclError {
    call("aclrtMemcpy", || {
        check_copy(dst, destMax, src, count)?;
        let s = session()?;
        let dir = direction(&s, kind, dst, src, count as u64)?;
        if count == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { copy(&s, dst, src, count as u64, dir, None) }
    })
}

/// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: enqueues the copy on `stream` (NULL: the
/// default stream). See the module docs for pinned and other host memory;
/// `ACL_MEMCPY_HOST_TO_HOST` is ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
///
/// # Safety
/// Host pointers are valid for `count` bytes, pinned ones until the copy is done.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: aclrtStream,
) -> aclError {
    call("aclrtMemcpyAsync", || {
        check_copy(dst, destMax, src, count)?;
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        let dir = direction(&s, kind, dst, src, count as u64)?;
        if count == 0 {
            return Ok(());
        }
        if kind == ACL_MEMCPY_HOST_TO_HOST {
            return Err(AclError::new(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "an asynchronous ACL_MEMCPY_HOST_TO_HOST copy is not supported (use aclrtMemcpy)",
            ));
        }
        // SAFETY: the caller's contract.
        unsafe { copy(&s, dst, src, count as u64, dir, Some(st)) }
    })
}

/// Sets `count` bytes at `dst` to `value`; `stream` None is synchronous.
fn memset(
    s: &Session,
    dst: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
    stream: Option<Stream>,
) -> AclResult<()> {
    non_null(dst, "devPtr")?;
    if count > maxCount {
        return Err(AclError::param(format!(
            "count {count} is larger than maxCount {maxCount}"
        )));
    }
    if count == 0 {
        return Ok(());
    }
    // Holding the buffer keeps the memory alive while it is written.
    if let Some((buffer, offset)) = pinned(dst, count as u64) {
        // The thread's own write, as the sanitizer sees it.
        npusim_engine::sanitizer::host_access(&buffer, offset, count as u64, true)?;
        // SAFETY: the range lies inside a live aclrtMallocHost allocation.
        unsafe { std::ptr::write_bytes(dst.cast::<u8>(), value as u8, count) };
        return Ok(());
    }
    let st = match stream {
        Some(st) => st,
        None => s.copy_stream()?,
    };
    // A synchronous memset is the calling thread's own access to the sanitizer.
    let _sync = stream
        .is_none()
        .then(npusim_engine::sanitizer::SyncCallGuard::enter);
    s.rt.memory()
        .memset_async(dev(dst), value as u8, count as u64, st)?;
    if stream.is_none() {
        s.rt.streams().synchronize(st)?;
    }
    Ok(())
}

/// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)`: sets
/// `count` bytes of device memory (or of `aclrtMallocHost` memory) to the low byte of `value`,
/// and returns when done.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemset(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
) -> aclError {
    call("aclrtMemset", || {
        memset(&*session()?, devPtr, maxCount, value, count, None)
    })
}

/// `aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
/// aclrtStream stream)`: enqueues the memset on `stream` (NULL: the default stream).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemsetAsync(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
    stream: aclrtStream,
) -> aclError {
    call("aclrtMemsetAsync", || {
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        memset(&s, devPtr, maxCount, value, count, Some(st))
    })
}
