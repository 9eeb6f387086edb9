//! The reports: their two sides and the finding.

use super::*;

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
