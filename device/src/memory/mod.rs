//! Device memory: sparse physical memory (HBM), per-context page tables, and the driver that
//! reserves physical chunks and maps them (DESIGN.md §4).
//!
//! The layers, bottom up:
//!
//! 1. [`PhysMem`] — physical memory, backed by host memory one 4 KiB frame at a time, only once
//!    written; a 64 GiB device costs nothing until used.
//! 2. [`AddressSpace`] — a page table: virtual pages (4 KiB or 2 MiB, [`PageSize`]) mapped to
//!    physical pages; [`AddressSpace::translate`] gives a [`Translation`] or a [`MemFault`].
//! 3. [`Driver`] — the kernel-mode interface: reserves physical chunks ([`ChunkId`]), creates
//!    address spaces ([`AsId`]), maps and unmaps chunks. Every call is counted and costed as an
//!    ioctl ([`DriverCosts`]); the engine drains the cost into the simulated host clock.
//!
//! The runtime's memory pool ([`pool`]) and software TLB ([`tlb`]) of each context build on the
//! driver, and [`spaces`] holds a device's memory as the runtime sees it: per context an address
//! space, its pool, TLB and table of allocations.

mod driver;
mod error;
mod frames;
mod fxhash;
mod page_table;
mod phys;
pub mod pool;
pub mod spaces;
pub mod tlb;

pub use driver::{AsId, ChunkId, ChunkInfo, Driver, DriverCalls, DriverCosts, DriverStats};
pub use error::{DriverError, MemFault, check_aligned};
pub use fxhash::{FxBuildHasher, FxHasher};
pub use page_table::{
    AddressSpace, HUGE_PAGE_SIZE, Mapping, NORMAL_PAGE_SIZE, PageSize, Translation,
};
pub use phys::{FRAME_SIZE, Frame, MAX_PHYS_CAPACITY, PhysMem};
