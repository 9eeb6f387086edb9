//! What the sanitizer is told to do (mode, configuration) and what it reports.

use super::*;

/// What the sanitizer does with a finding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SanitizerMode {
    /// Off: nothing is allocated, tracked or checked (the default).
    #[default]
    Off,
    /// Collect reports and go on.
    Report,
    /// Collect reports, and the later task of each pair fails with
    /// [`NpuError::SanitizerViolation`] (`ACL_ERROR_RT_DEVICE_MEM_ERROR`, 507053).
    Error,
}

impl SanitizerMode {
    /// From the `NPUSIM_SANITIZE` spelling: `off`, `report` or `error` (`None` otherwise).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "0" | "off" | "none" => Some(SanitizerMode::Off),
            "report" | "1" | "on" => Some(SanitizerMode::Report),
            "error" => Some(SanitizerMode::Error),
            _ => None,
        }
    }
}

/// How the sanitizer runs ([`crate::sanitizer`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SanitizerConfig {
    /// Off, report or error.
    pub mode: SanitizerMode,
    /// Also report reads of device bytes nothing wrote since they were allocated (off by
    /// default: many programs read padding on purpose).
    pub uninitialized: bool,
    /// Print each report to standard error when it is found (C programs run with
    /// `NPUSIM_SANITIZE` set this).
    pub print: bool,
}

impl SanitizerConfig {
    /// Report mode, without uninitialised-read checks.
    pub fn report() -> Self {
        Self {
            mode: SanitizerMode::Report,
            ..Self::default()
        }
    }

    /// Error mode, without uninitialised-read checks.
    pub fn error() -> Self {
        Self {
            mode: SanitizerMode::Error,
            ..Self::default()
        }
    }

    /// Whether the sanitizer runs at all.
    pub fn on(&self) -> bool {
        self.mode != SanitizerMode::Off
    }
}

/// What kind of bug a report is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportKind {
    /// Two accesses to overlapping bytes, at least one a write, that nothing orders.
    Race,
    /// An access to a block not ordered before the block's free.
    UseAfterFree,
    /// A read of bytes nothing wrote since they were allocated.
    UninitializedRead,
    /// A stream-ordered allocation used by work not ordered after it, or reused memory
    /// touched by work not ordered after its earlier owner's last access.
    UnorderedReuse,
}

impl ReportKind {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            ReportKind::Race => "race",
            ReportKind::UseAfterFree => "use after free",
            ReportKind::UninitializedRead => "uninitialised read",
            ReportKind::UnorderedReuse => "unordered reuse",
        }
    }
}

/// Where a call was made: the Rust caller's file and line, or the ACL function and the
/// call's sequence number from C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EnqueueSite {
    /// A Rust API call.
    Rust {
        /// Source file of the caller.
        file: &'static str,
        /// Line.
        line: u32,
    },
    /// A call through the C API.
    Acl {
        /// The ACL function.
        function: &'static str,
        /// Its sequence number among the process's ACL calls (1-based).
        call: u64,
    },
    /// Not known (a task submitted by an embedder's own system).
    Unknown,
}

impl std::fmt::Display for EnqueueSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnqueueSite::Rust { file, line } => write!(f, "{file}:{line}"),
            EnqueueSite::Acl { function, call } => write!(f, "{function} (ACL call #{call})"),
            EnqueueSite::Unknown => write!(f, "an unknown call"),
        }
    }
}

/// Which operand of a task a range is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Kernel argument `i` (0-based).
    Arg(u8),
    /// A copy's source.
    Source,
    /// A copy's or memset's destination.
    Destination,
    /// A collective's send buffer.
    Send,
    /// A collective's receive buffer.
    Receive,
    /// The block named by a free or an allocation.
    Block,
    /// The pinned host buffer the host program itself read or wrote.
    HostBuffer,
    /// Not known.
    Unknown,
}

impl std::fmt::Display for Operand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Operand::Arg(i) => write!(f, "argument {i}"),
            Operand::Source => write!(f, "source"),
            Operand::Destination => write!(f, "destination"),
            Operand::Send => write!(f, "send buffer"),
            Operand::Receive => write!(f, "receive buffer"),
            Operand::Block => write!(f, "block"),
            Operand::HostBuffer => write!(f, "pinned host buffer"),
            Operand::Unknown => write!(f, "operand"),
        }
    }
}

/// One side of a report: a task (or a host call: a free, an allocation).
#[derive(Clone, Debug, PartialEq)]
pub struct ReportSide {
    /// Device index.
    pub device: u32,
    /// The stream (`None` for a host call that is not stream-ordered).
    pub stream: Option<Stream>,
    /// Position on the stream (1-based; for a host call, how far the stream was submitted).
    pub position: u64,
    /// Kernel name, copy direction, or the host call (`free`, `malloc`).
    pub name: String,
    /// Which operand touched the range.
    pub operand: Operand,
    /// Whether it read, wrote or both (`None` for a free or an allocation).
    pub mode: Option<AccessMode>,
    /// Where it was enqueued or called.
    pub site: EnqueueSite,
    /// The host thread whose call it is: for a side with no stream, the thread whose own
    /// access or call it is (a free, an allocation, a pinned buffer's read or write, a
    /// synchronous copy or memset); for a task, the thread that enqueued it (or enqueued the
    /// host callback that did). `None` when no host thread is known (a task an embedder's
    /// system submitted, a host callback's own access).
    pub thread: Option<HostThread>,
}

/// A host thread as reports name it: its index among the threads that called the runtime
/// (0 for the first, in the order of their first call) and its name, when it has one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostThread {
    /// Index in the order the threads first called the runtime.
    pub index: u32,
    /// The thread's name ([`std::thread::Thread::name`]), if it has one.
    pub name: Option<Arc<str>>,
}

impl std::fmt::Display for HostThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "host thread {}", self.index)?;
        if let Some(n) = &self.name {
            write!(f, " ({n:?})")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for ReportSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self.mode {
            Some(AccessMode::Read) => "read by ",
            Some(AccessMode::Write) => "written by ",
            Some(AccessMode::ReadWrite) => "read and written by ",
            None => "",
        };
        match self.stream {
            Some(s) => {
                write!(
                    f,
                    "{how}{} ({}) on device {} {s} at position {}, enqueued at {}",
                    self.name, self.operand, self.device, self.position, self.site
                )?;
                match &self.thread {
                    Some(t) => write!(f, " by {t}"),
                    None => Ok(()),
                }
            }
            None => match &self.thread {
                Some(t) => write!(
                    f,
                    "{how}{} on device {} by {t}, called at {}",
                    self.name, self.device, self.site
                ),
                None => write!(
                    f,
                    "{how}{} on device {} (host), called at {}",
                    self.name, self.device, self.site
                ),
            },
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq)]
pub struct SanitizerReport {
    /// What kind of bug.
    pub kind: ReportKind,
    /// Device virtual address of the first byte involved.
    pub addr: u64,
    /// Bytes involved.
    pub bytes: u64,
    /// The block the range belongs to (base, size), when known.
    pub block: Option<(u64, u64)>,
    /// The side that came first in the run (for an uninitialised read: the allocation).
    pub earlier: ReportSide,
    /// The side whose access or free found it (in error mode, the task that fails).
    pub later: ReportSide,
    /// What would order them.
    pub fix: String,
    /// Simulated time the later side was checked (for timeline markers).
    pub at: SimTime,
    /// The pinned host buffer ([`HostBuffer::id`](crate::HostBuffer::id)) the bytes are in,
    /// when they are host memory: `addr` is then the offset in it and `block` is
    /// `(0, its length)`.
    pub host_buffer: Option<u64>,
    /// How many times the same bug was found: the same kind between the same two sites (calls,
    /// names and operands); this report describes the first.
    pub count: u64,
    /// The device whose memory the bytes are in (`None` for pinned host memory). Every
    /// device's address space starts at the same base, so `addr` alone does not say which
    /// buffer it is: a peer copy's side, or either side of a race between two devices' tasks,
    /// may run on another device than the one that owns the bytes.
    pub owner: Option<u32>,
}

impl SanitizerReport {
    /// Offset of the range in its block.
    pub fn offset(&self) -> Option<u64> {
        self.block.map(|(base, _)| self.addr - base)
    }
}

impl std::fmt::Display for SanitizerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "npusim sanitizer: {} on bytes {:#x}..{:#x} ({} bytes",
            self.kind.name(),
            self.addr,
            self.addr + self.bytes,
            self.bytes
        )?;
        match (self.host_buffer, self.block) {
            (Some(id), Some((_, size))) => write!(
                f,
                ", offset {} in pinned host buffer {id} of {size} bytes",
                self.addr
            )?,
            (None, Some((base, size))) => write!(
                f,
                ", offset {} in block {base:#x} of {size} bytes",
                self.addr - base
            )?,
            _ => {}
        }
        if let Some(d) = self.owner {
            write!(f, ", memory of device {d}")?;
        }
        write!(
            f,
            ")\n  first:  {}\n  then:   {}\n  fix:    {}",
            self.earlier, self.later, self.fix
        )?;
        if self.count > 1 {
            write!(f, "\n  seen:   {} times (the first is shown)", self.count)?;
        }
        Ok(())
    }
}
