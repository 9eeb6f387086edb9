//! Host memory handed out by the runtime (`malloc_host`). It is shared between the host program
//! and queued asynchronous copies, so it lives behind a reference count and a lock; freeing it
//! makes every later use an error instead of a dangling access.
//!
//! Sizes come from users, so nothing here allocates before the size is known to be possible:
//! [`HostBuffer::try_new`] checks the pinned-memory budget ([`PINNED_HOST_LIMIT`]) and then
//! allocates fallibly, so an impossible request is `ACL_ERROR_RT_MEMORY_ALLOCATION` (207001),
//! never an aborted process. Pages are zeroed lazily by the system allocator: an untouched
//! buffer costs address space, not resident memory.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{NpuError, NpuResult};

/// Most pinned (page-locked) host memory live at once in the process: 8 GiB. Page-locked
/// memory cannot be swapped, so real drivers bound it well below the host's RAM; npusim fixes the
/// bound so that the same program fails the same way on every machine. A `malloc_host` past it
/// is `ACL_ERROR_RT_MEMORY_ALLOCATION`. Memory returns to the budget at `free_host` (or when the
/// last handle of an unfreed buffer is dropped).
pub const PINNED_HOST_LIMIT: u64 = 8 << 30;

/// Pinned bytes live in this process (every `HostBuffer` with `pinned` counts its length).
static PINNED_LIVE: AtomicU64 = AtomicU64::new(0);

/// Pinned host bytes live in this process (see [`PINNED_HOST_LIMIT`]).
pub fn pinned_host_bytes() -> u64 {
    PINNED_LIVE.load(Ordering::Acquire)
}

#[derive(Debug)]
struct HostAlloc {
    data: Mutex<Vec<u8>>,
    pinned: bool,
    freed: AtomicBool,
    /// Unique in the process (the stream sanitizer's name for the buffer).
    id: u64,
}

/// The id the next host buffer gets.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Drop for HostAlloc {
    fn drop(&mut self) {
        if self.pinned {
            let len = self
                .data
                .get_mut()
                .map_or_else(|p| p.into_inner().len(), |d| d.len());
            PINNED_LIVE.fetch_sub(len as u64, Ordering::AcqRel);
        }
    }
}

/// A zeroed vector of `len` bytes, or `None` when the system cannot provide it. The pages are
/// zeroed by the allocator (calloc), so they cost resident memory only once written.
fn try_zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: `layout` has a nonzero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `[u8; len]`, which
    // is what a `Vec<u8>` of capacity `len` uses; all `len` bytes are initialised (zero).
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

fn allocation_error(len: u64, why: impl Into<String>) -> NpuError {
    NpuError::HostAllocation {
        requested: len,
        why: why.into(),
    }
}

/// A host buffer from [`malloc_host`](crate) (pinned, page-locked in the model) or a pageable
/// staging buffer. Cloning shares the same memory.
#[derive(Clone, Debug)]
pub struct HostBuffer {
    inner: Arc<HostAlloc>,
}

impl HostBuffer {
    /// A zeroed buffer of `len` bytes; `pinned` marks page-locked memory. For a size that comes
    /// from a user, use [`HostBuffer::try_new`], which fails instead of aborting.
    pub fn new(len: usize, pinned: bool) -> Self {
        match Self::try_new(len as u64, pinned) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        }
    }

    /// A zeroed buffer of `len` bytes, or `ACL_ERROR_RT_MEMORY_ALLOCATION` when it cannot be
    /// had: pinned memory past [`PINNED_HOST_LIMIT`], or more than the system will allocate.
    /// Nothing is allocated when it fails.
    pub fn try_new(len: u64, pinned: bool) -> NpuResult<Self> {
        let size = usize::try_from(len)
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| allocation_error(len, "larger than the host's address space"))?;
        if pinned {
            PINNED_LIVE
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                    live.checked_add(len).filter(|&t| t <= PINNED_HOST_LIMIT)
                })
                .map_err(|live| {
                    allocation_error(
                        len,
                        format!(
                            "pinned host memory is limited to {PINNED_HOST_LIMIT} bytes \
                             ({live} in use)"
                        ),
                    )
                })?;
        }
        let Some(data) = try_zeroed(size) else {
            if pinned {
                PINNED_LIVE.fetch_sub(len, Ordering::AcqRel);
            }
            return Err(allocation_error(len, "the host is out of memory"));
        };
        Ok(Self {
            inner: Arc::new(HostAlloc {
                data: Mutex::new(data),
                pinned,
                freed: AtomicBool::new(false),
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            }),
        })
    }

    /// A pageable buffer holding a copy of `bytes` (how an async copy from pageable memory is
    /// staged at the call).
    pub fn staged(bytes: &[u8]) -> Self {
        Self {
            inner: Arc::new(HostAlloc {
                data: Mutex::new(bytes.to_vec()),
                pinned: false,
                freed: AtomicBool::new(false),
                id: 0,
            }),
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.lock_raw().len()
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is pinned (page-locked) memory.
    pub fn is_pinned(&self) -> bool {
        self.inner.pinned
    }

    /// Whether `free_host` was called on it.
    pub fn is_freed(&self) -> bool {
        self.inner.freed.load(Ordering::Acquire)
    }

    /// Marks the buffer freed; later uses return errors. Returns false if it already was. A
    /// pinned buffer's bytes are released at once (handles that remain see an empty, freed
    /// buffer), so the memory goes back to the pinned budget.
    pub fn mark_freed(&self) -> bool {
        let first = !self.inner.freed.swap(true, Ordering::AcqRel);
        if first && self.inner.pinned {
            let old = std::mem::take(&mut *self.lock_raw());
            PINNED_LIVE.fetch_sub(old.len() as u64, Ordering::AcqRel);
        }
        first
    }

    /// The buffer's id, unique in the process (0 for a staging buffer of a pageable copy).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Whether both handles name the same memory.
    pub fn same_as(&self, other: &HostBuffer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn lock_raw(&self) -> MutexGuard<'_, Vec<u8>> {
        // A panic while holding this lock cannot leave the bytes inconsistent: take them anyway.
        self.inner.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the bytes for reading or writing, or fails if the buffer was freed.
    pub fn bytes(&self) -> NpuResult<MutexGuard<'_, Vec<u8>>> {
        if self.is_freed() {
            return Err(NpuError::InvalidMemoryType(
                "host buffer was freed with free_host".into(),
            ));
        }
        Ok(self.lock_raw())
    }

    /// Copies `values` into the start of the buffer.
    pub fn write<T: bytemuck::Pod>(&self, values: &[T]) -> NpuResult<()> {
        self.write_at(0, values)
    }

    /// Copies `values` into the buffer at byte `offset`.
    pub fn write_at<T: bytemuck::Pod>(&self, offset: usize, values: &[T]) -> NpuResult<()> {
        let src: &[u8] = bytemuck::cast_slice(values);
        let mut data = self.bytes()?;
        let end = offset
            .checked_add(src.len())
            .filter(|&e| e <= data.len())
            .ok_or_else(|| {
                NpuError::InvalidParam(format!(
                    "{} bytes at offset {offset} do not fit a host buffer of {} bytes",
                    src.len(),
                    data.len()
                ))
            })?;
        data[offset..end].copy_from_slice(src);
        Ok(())
    }

    /// Reads the whole buffer as values of `T` (the length must be a multiple of `T`'s size).
    pub fn read<T: bytemuck::Pod>(&self) -> NpuResult<Vec<T>> {
        let data = self.bytes()?;
        let size = std::mem::size_of::<T>().max(1);
        if data.len() % size != 0 {
            return Err(NpuError::InvalidParam(format!(
                "host buffer of {} bytes is not a whole number of {size}-byte values",
                data.len()
            )));
        }
        let mut out = vec![T::zeroed(); data.len() / size];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&data);
        Ok(out)
    }
}
