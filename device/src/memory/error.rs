//! The two error types of the memory system: faults raised by an access, and errors returned by
//! driver calls. Neither is ever a panic: every input, however absurd, maps to one of these.

use thiserror::Error;

use super::{AsId, ChunkId};

/// A memory access that the hardware refuses: what a kernel or a copy raises as a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MemFault {
    /// No page is mapped at `va` in the address space used (or the address space is gone).
    #[error("page fault at virtual address {va:#x}: nothing is mapped there")]
    PageFault {
        /// The first faulting virtual address.
        va: u64,
    },
    /// An access of `align` bytes at an address that is not a multiple of `align`.
    #[error("misaligned access at {va:#x}: it needs {align}-byte alignment")]
    Misaligned {
        /// The faulting virtual address.
        va: u64,
        /// The alignment the access needs.
        align: u64,
    },
    /// A physical access outside device memory (a driver or simulator bug, never a user one:
    /// page tables only map physical memory that exists).
    #[error(
        "physical access of {len:#x} bytes at {pa:#x} leaves device memory of {capacity:#x} bytes"
    )]
    OutOfRange {
        /// Start of the physical access.
        pa: u64,
        /// Length of the access.
        len: u64,
        /// Size of device memory.
        capacity: u64,
    },
}

/// Checks that an access of `align` bytes (a power of two) at `va` is naturally aligned: the
/// check the AI core applies to loads and stores.
#[inline]
pub fn check_aligned(va: u64, align: u64) -> Result<(), MemFault> {
    if va & align.wrapping_sub(1) == 0 {
        Ok(())
    } else {
        Err(MemFault::Misaligned { va, align })
    }
}

/// Why a driver call (or a page-table update) was refused. A refused call changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DriverError {
    /// Not enough free physical memory for the request (`available` counts all free bytes,
    /// which may be too fragmented for a huge-page chunk even when it is larger).
    #[error("out of device memory: {requested:#x} bytes requested, {available:#x} bytes free")]
    OutOfMemory {
        /// Bytes asked for (before rounding to the page size).
        requested: u64,
        /// Free physical bytes at the time of the call.
        available: u64,
    },
    /// A zero-length reservation or mapping.
    #[error("a length of zero bytes is not allowed")]
    ZeroLength,
    /// The chunk was never reserved, or was already released.
    #[error("chunk {0:?} does not exist (never reserved or already released)")]
    UnknownChunk(ChunkId),
    /// Releasing a chunk that is still mapped somewhere.
    #[error("chunk {0:?} is still mapped: unmap it before releasing it")]
    ChunkMapped(ChunkId),
    /// The address space was never created, or was destroyed.
    #[error("address space {0:?} does not exist (never created or already destroyed)")]
    UnknownAddressSpace(AsId),
    /// Part of `[va, va + len)` is already mapped.
    #[error("mapping {len:#x} bytes at {va:#x} overlaps an existing mapping")]
    Overlap {
        /// Start of the refused mapping.
        va: u64,
        /// Its length.
        len: u64,
    },
    /// Unmapping an address where nothing (or not a whole mapping) is mapped.
    #[error("nothing is mapped at {va:#x}")]
    NotMapped {
        /// The first address found unmapped.
        va: u64,
    },
    /// An address or length that is not a multiple of the page size it is used with.
    #[error("{addr:#x} is not aligned to {align:#x} bytes")]
    BadAlignment {
        /// The misaligned address or length.
        addr: u64,
        /// The alignment required.
        align: u64,
    },
    /// `addr + len` does not fit in 64 bits.
    #[error("range of {len:#x} bytes at {addr:#x} overflows the address space")]
    AddressOverflow {
        /// Start of the range.
        addr: u64,
        /// Its length.
        len: u64,
    },
    /// Mapping into the null guard below [`crate::abi::NULL_GUARD_END`], which stays unmapped so
    /// that null pointers always fault.
    #[error("{va:#x} lies in the null guard, which is never mapped")]
    NullGuard {
        /// Start of the refused mapping.
        va: u64,
    },
    /// A device memory size the model cannot represent.
    #[error("device memory of {capacity:#x} bytes exceeds the modeled maximum of {max:#x}")]
    InvalidCapacity {
        /// The requested capacity.
        capacity: u64,
        /// The largest supported capacity.
        max: u64,
    },
}
