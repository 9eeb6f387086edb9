//! Host memory handed out by the runtime (`malloc_host`). It is shared between the host program
//! and queued asynchronous copies, so it lives behind a reference count and a lock; freeing it
//! makes every later use an error instead of a dangling access.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{NpuError, NpuResult};

#[derive(Debug)]
struct HostAlloc {
    data: Mutex<Vec<u8>>,
    pinned: bool,
    freed: AtomicBool,
}

/// A host buffer from [`malloc_host`](crate) (pinned, page-locked in the model) or a pageable
/// staging buffer. Cloning shares the same memory.
#[derive(Clone, Debug)]
pub struct HostBuffer {
    inner: Arc<HostAlloc>,
}

impl HostBuffer {
    /// A zeroed buffer of `len` bytes; `pinned` marks page-locked memory.
    pub fn new(len: usize, pinned: bool) -> Self {
        Self {
            inner: Arc::new(HostAlloc {
                data: Mutex::new(vec![0; len]),
                pinned,
                freed: AtomicBool::new(false),
            }),
        }
    }

    /// A pageable buffer holding a copy of `bytes` (how an async copy from pageable memory is
    /// staged at the call).
    pub fn staged(bytes: &[u8]) -> Self {
        Self {
            inner: Arc::new(HostAlloc {
                data: Mutex::new(bytes.to_vec()),
                pinned: false,
                freed: AtomicBool::new(false),
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

    /// Marks the buffer freed; later uses return errors. Returns false if it already was.
    pub fn mark_freed(&self) -> bool {
        !self.inner.freed.swap(true, Ordering::AcqRel)
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
