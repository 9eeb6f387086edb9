//! What the sanitizer is told to do (mode, configuration), and the parts of its reports that
//! name no runtime object: the kind of bug, where a call was made, the operand, the host thread.

use std::sync::Arc;

/// What the sanitizer does with a finding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SanitizerMode {
    /// Off: nothing is allocated, tracked or checked (the default).
    #[default]
    Off,
    /// Collect reports and go on.
    Report,
    /// Collect reports, and the later task of each pair fails with the runtime's
    /// `NpuError::SanitizerViolation` (`ACL_ERROR_RT_DEVICE_MEM_ERROR`, 507053).
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
