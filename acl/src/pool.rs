//! Stream-ordered memory pools (`aclrtMemPool*`, ACL's "SOMA"). A pool is bound to the context
//! current at its creation and draws from that context's npusim memory pool, whose deferred
//! free is exactly stream-ordered reuse: memory freed with `aclrtMemPoolFreeAsync` returns to
//! the pool only when the stream reaches the free (and every queued task that names it is
//! done), so a kernel still running on it can never see it handed out again.

use std::collections::BTreeMap;
use std::ffi::c_void;

use npusim_engine::AllocPolicy;
use npusim_engine::DevicePtr;

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::{Kind, PoolEntry, lookup, new_key, to_ptr};
use crate::memory::{alloc, free};
use crate::state::{Session, session};
use crate::types::*;

fn pool(s: &Session, p: aclrtMemPool) -> AclResult<(u64, u64)> {
    let t = s.tables();
    let (key, e) = lookup(&t.pools, Kind::Pool, p, "memPool")?;
    Ok((key, e.ctx))
}

fn wrong_context() -> AclError {
    AclError::new(
        ACL_ERROR_RT_STREAM_CONTEXT,
        "the memory pool belongs to another context than the current one",
    )
}

/// `aclError aclrtMemPoolCreate(aclrtMemPool *memPool, const aclrtMemPoolProps *poolProps)`:
/// a pool on device `poolProps->location.id`, which must be the current context's device
/// (location type ACL_MEM_LOCATION_TYPE_DEVICE). `maxSize` bounds the bytes allocated from it
/// at once (0: no bound).
///
/// # Safety
/// `memPool` is NULL or points to an `aclrtMemPool`; `poolProps` is NULL or points to an
/// `aclrtMemPoolProps`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemPoolCreate(
    memPool: *mut aclrtMemPool,
    poolProps: *const aclrtMemPoolProps,
) -> aclError {
    call("aclrtMemPoolCreate", || {
        non_null(memPool, "memPool")?;
        non_null(poolProps, "poolProps")?;
        // SAFETY: checked non-NULL; the caller passes readable properties.
        let props = unsafe { poolProps.read() };
        if props.location.type_ != ACL_MEM_LOCATION_TYPE_DEVICE {
            return Err(AclError::param(format!(
                "location type {}: only ACL_MEM_LOCATION_TYPE_DEVICE pools exist",
                props.location.type_
            )));
        }
        let s = session()?;
        let (ctx, _) = s.current_ctx()?;
        let device = s.rt.contexts().current_device()?;
        if props.location.id != device {
            return Err(AclError::param(format!(
                "location id {} is not device {device} of the current context",
                props.location.id
            )));
        }
        let key = new_key(Kind::Pool);
        s.tables().pools.insert(
            key,
            PoolEntry {
                ctx,
                max_size: props.maxSize as u64,
                live: BTreeMap::new(),
            },
        );
        // SAFETY: checked non-NULL; the caller passes a writable aclrtMemPool.
        unsafe { memPool.write(to_ptr(key)) };
        Ok(())
    })
}

/// `aclError aclrtMemPoolDestroy(const aclrtMemPool memPool)`: destroys a pool of the current
/// context. Memory still allocated from it is freed, stream-ordered behind the work that uses
/// it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemPoolDestroy(memPool: aclrtMemPool) -> aclError {
    call("aclrtMemPoolDestroy", || {
        let s = session()?;
        let (key, ctx) = pool(&s, memPool)?;
        if s.current_ctx()?.0 != ctx {
            return Err(wrong_context());
        }
        let live: Vec<u64> = s.tables().pools[&key].live.keys().copied().collect();
        for ptr in live {
            free(&s, DevicePtr(ptr), None)?;
        }
        s.tables().pools.remove(&key);
        Ok(())
    })
}

/// `aclError aclrtMemPoolMallocAsync(void **ptr, size_t size, aclrtMemPool memPool,
/// aclrtStream stream)`: `size` bytes from the pool, usable by work enqueued on `stream` (NULL:
/// the default stream) from now on. ACL_ERROR_RT_MEMORY_ALLOCATION past the pool's `maxSize`.
///
/// # Safety
/// `ptr` is NULL or points to a `void *`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemPoolMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    memPool: aclrtMemPool,
    stream: aclrtStream,
) -> aclError {
    call("aclrtMemPoolMallocAsync", || {
        non_null(ptr, "ptr")?;
        if size == 0 {
            return Err(AclError::param("size is 0"));
        }
        let s = session()?;
        let (key, ctx) = pool(&s, memPool)?;
        let st = s.stream_or_default(stream)?;
        // Checks the stream belongs to the current context.
        s.rt.streams().query(st)?;
        if s.current_ctx()?.0 != ctx {
            return Err(wrong_context());
        }
        {
            let t = s.tables();
            let p = &t.pools[&key];
            // `used + size` may not wrap: a size past what is left is refused as such.
            if p.max_size > 0
                && p.used()
                    .checked_add(size as u64)
                    .is_none_or(|total| total > p.max_size)
            {
                return Err(AclError::new(
                    ACL_ERROR_RT_MEMORY_ALLOCATION,
                    format!(
                        "{size} bytes would exceed the pool's maxSize of {} ({} in use)",
                        p.max_size,
                        p.used()
                    ),
                ));
            }
        }
        let p = alloc(&s, size as u64, AllocPolicy::HugeFirst, Some(key))?;
        match s.tables().pools.get_mut(&key) {
            Some(pool) => {
                pool.live.insert(p.0, size as u64);
            }
            None => {
                return Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    "the memory pool was destroyed during the allocation",
                ));
            }
        }
        // SAFETY: checked non-NULL; the caller passes a writable void *.
        unsafe { ptr.write(std::ptr::without_provenance_mut(p.0 as usize)) };
        Ok(())
    })
}

/// `aclError aclrtMemPoolFreeAsync(void *ptr, aclrtStream stream)`: returns memory from
/// `aclrtMemPoolMallocAsync` to its pool once `stream` (NULL: the default stream) reaches this
/// point and every queued task that names it is done. Returns at once.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemPoolFreeAsync(ptr: *mut c_void, stream: aclrtStream) -> aclError {
    call("aclrtMemPoolFreeAsync", || {
        non_null(ptr, "ptr")?;
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        let (ctx, _) = s.current_ctx()?;
        let from_pool = s
            .tables()
            .allocs
            .get(&(ctx, ptr.addr() as u64))
            .is_some_and(|a| a.pool.is_some());
        if !from_pool {
            return Err(AclError::new(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{ptr:p} is not memory from aclrtMemPoolMallocAsync in this context"),
            ));
        }
        free(&s, DevicePtr(ptr.addr() as u64), Some(st))
    })
}
