//! The stream sanitizer's data: exact happens-before as vector clocks, interval shadow memory,
//! and the reports. One concept over three layers: this file holds the state and every rule
//! (what orders what, what is a race, a use after free, an unordered reuse, an uninitialised
//! read); completion (`systems/src/complete.rs`) feeds it each task as the task finishes, and
//! the API (`engine/src/sanitizer.rs`) feeds it the host's side — submissions, synchronizes,
//! allocations and frees — and hands out the reports.
//!
//! **Clocks.** Every stream is a thread of the clock: its task at position `seq` has epoch
//! `(stream, seq)`. So is every host thread, as in ThreadSanitizer: numbered on its first call
//! ([`Sanitizer::host_thread`]), it starts after what every thread did until then (the runtime
//! cannot see a spawn). A task's clock is the join of its stream predecessor's, the clock of the
//! host thread that enqueued it, as it was then (so a synchronize orders that thread's later
//! enqueues, and no other thread's), the clock of the event record a wait captured at enqueue
//! (ACL's capture semantics), a callback's own clock (what its body synchronized with), and for
//! a collective the clocks of every rank as they reached the rendezvous. Synchronizes join into
//! the calling thread only. A thread's own accesses — frees, pinned-buffer reads and writes,
//! synchronous copies and memsets — are made at the thread's epoch; a synchronous call is not
//! ordered by the stream it happens to run on (other threads' calls reach it in lock order),
//! and the device synchronize a Rust one begins with orders the thread after its own work only.
//! Hand-offs the runtime cannot see (channels, locks, joins) are told with
//! [`Sanitizer::release`] / [`Sanitizer::acquire`] / [`Sanitizer::host_sync`]. A host
//! callback's body runs with its task's clock. Clocks are computed as tasks complete, which
//! every order the simulation takes respects: a task never completes before a task that
//! happens before it.
//!
//! **Shadow.** Per address space (a context), a map of disjoint byte intervals, each holding
//! the last write and the reads since that are not ordered with each other (FastTrack's rule,
//! per interval instead of per byte): a 1 GiB buffer copied whole is one interval.
//!
//! **Reports** name the kind, the range, its block and offset, both sides (device, stream,
//! position, kernel or copy name, argument, where it was enqueued, the host thread) and the
//! event (or, between threads, the synchronization) that would order them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bevy_ecs::entity::{Entity, EntityHashMap};
use smallvec::SmallVec;

use crate::access::{Access, AccessMode, Space};
use crate::collective::{CollectiveCall, OpKey, PeerCopy};
use crate::error::NpuError;
use crate::handle::Stream;
use crate::task::{Task, TaskKind};
use crate::time::SimTime;

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

/// A vector clock: per clock thread (a stream's slot), the latest position known to happen
/// before.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorClock(Vec<u64>);

impl VectorClock {
    /// The position of `slot` this clock has seen.
    #[inline]
    pub fn get(&self, slot: u32) -> u64 {
        self.0.get(slot as usize).copied().unwrap_or(0)
    }

    /// Raises `slot` to `v`.
    pub fn set(&mut self, slot: u32, v: u64) {
        let i = slot as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = self.0[i].max(v);
    }

    /// Joins `other` in (element-wise maximum).
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Whether epoch `(slot, clock)` happens before (or is) this clock.
    #[inline]
    pub fn covers(&self, slot: u32, clock: u64) -> bool {
        self.get(slot) >= clock
    }

    /// Bytes this clock uses.
    pub fn heap_bytes(&self) -> usize {
        self.0.capacity() * 8
    }
}

/// What a side of an access names, shared by the shadow intervals it left behind.
#[derive(Debug)]
struct TaskInfo {
    device: u32,
    stream: Option<Entity>,
    position: u64,
    name: Arc<str>,
    site: EnqueueSite,
    /// The host thread whose call this is, or that enqueued the task (index into
    /// `Sanitizer::threads`).
    thread: Option<u32>,
}

/// One access left in the shadow.
#[derive(Debug)]
struct AccessRec {
    slot: u32,
    clock: u64,
    task: Arc<TaskInfo>,
    operand: Operand,
    mode: AccessMode,
    /// The allocation generation the bytes belonged to.
    generation: u64,
}

/// One interval of shadow state.
#[derive(Clone, Debug)]
struct Segment {
    end: u64,
    write: Option<Arc<AccessRec>>,
    reads: SmallVec<[Arc<AccessRec>; 2]>,
    init: bool,
}

impl Segment {
    fn same_state(&self, other: &Segment) -> bool {
        let same = |a: &Option<Arc<AccessRec>>, b: &Option<Arc<AccessRec>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.init == other.init
            && same(&self.write, &other.write)
            && self.reads.len() == other.reads.len()
            && self
                .reads
                .iter()
                .zip(&other.reads)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// How a block stands, as the sanitizer sees it.
#[derive(Clone, Debug)]
enum BlockLife {
    Live,
    /// A stream-ordered free waiting for its stream position.
    Freeing,
    /// Freed: accesses must happen before this clock.
    Freed {
        clock: Arc<VectorClock>,
        side: Arc<TaskInfo>,
    },
}

#[derive(Clone, Debug)]
struct Block {
    size: u64,
    generation: u64,
    life: BlockLife,
    /// A stream-ordered allocation: accesses must be ordered after this stream position.
    after: Option<StreamOrder>,
    alloc: Arc<TaskInfo>,
}

/// Where a stream-ordered allocation was made: its stream's slot, the epoch and position.
#[derive(Clone, Copy, Debug)]
struct StreamOrder {
    slot: u32,
    epoch: u64,
    stream: Entity,
    position: u64,
}

/// A queued copy's access to bytes `start..end` of a pinned host buffer, left until the host
/// is ordered after it.
#[derive(Debug)]
struct HostUse {
    start: u64,
    end: u64,
    /// A device-to-host copy (it writes the host bytes).
    writes: bool,
    /// The copy's clock thread and epoch.
    slot: u32,
    epoch: u64,
    task: Arc<TaskInfo>,
}

/// A pinned host buffer's queued copies not yet ordered before every host thread, and the
/// host threads' own reads and writes of it not yet ordered before every other thread.
#[derive(Debug, Default)]
struct HostShadow {
    len: u64,
    uses: Vec<HostUse>,
    /// Host threads' accesses (`slot` and `epoch` are the thread's; `task` its call).
    host: Vec<HostUse>,
}

/// A free waiting for its stream position.
#[derive(Debug)]
struct PendingFree {
    position: u64,
    context: Entity,
    base: u64,
    host: Arc<VectorClock>,
    side: Arc<TaskInfo>,
    /// Further stream positions the free waits for (a free behind every use).
    rest: Vec<(Entity, u64)>,
}

/// What a submission left for its completion.
#[derive(Debug)]
struct Submitted {
    seq: u64,
    host: Arc<VectorClock>,
    name: Arc<str>,
    site: EnqueueSite,
    /// The host thread whose work it is: the thread that enqueued it, or that enqueued the
    /// host callback that did.
    owner: Option<u32>,
    /// A synchronous call's task: its accesses are its owner thread's own.
    sync: bool,
}

/// A stream as a thread of the clock.
#[derive(Debug)]
struct StreamClock {
    slot: u32,
    /// Epoch of position 0: a slot freed by a destroyed stream goes on counting from where
    /// that stream ended (everything after its destroy is ordered after all of its work).
    base: u64,
    device: u32,
    clock: Arc<VectorClock>,
    /// The host clock last joined in (most tasks carry the same one: joined once).
    joined_host: Option<Arc<VectorClock>>,
    processed: u64,
    submitted: VecDeque<Submitted>,
    frees: Vec<PendingFree>,
    /// Recent event records (position, event), newest last, for fix suggestions.
    records: VecDeque<(u64, Entity)>,
    /// Per host thread that enqueued on it, the position of its latest task here.
    owner_last: SmallVec<[(u32, u64); 2]>,
}

/// An event's fired records.
#[derive(Debug, Default)]
struct EventClocks {
    /// Record number → (clock, waits enqueued that captured it and have not completed).
    records: BTreeMap<u64, (Option<Arc<VectorClock>>, u32)>,
    latest: u64,
}

/// A collective's ranks as they were enqueued.
#[derive(Debug, Default)]
struct Group {
    members: SmallVec<[(Entity, u64); 8]>,
    joined: Option<Arc<VectorClock>>,
    done: usize,
}

/// Which operation of a communicator a collective task belongs to (the rendezvous key).
type GroupKey = (Entity, OpKey);

fn group_key(c: &CollectiveCall) -> GroupKey {
    (c.comm, c.op_key())
}

/// What a name in reports is of ([`Sanitizer::name`] keeps one copy of each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameKey {
    /// A kernel: its registry slot and generation.
    Kernel(u32, u32),
    /// A task kind or host call, by its fixed name.
    Call(&'static str),
}

/// One copy of each name, found without hashing (a launch looks its kernel's up).
#[derive(Debug, Default)]
struct Names {
    /// By kernel slot: the generation the name is of, and the name.
    kernels: Vec<Option<(u32, Arc<str>)>>,
    /// Fixed names (a handful).
    calls: Vec<(&'static str, Arc<str>)>,
}

impl Names {
    fn get(&self, key: NameKey) -> Option<&Arc<str>> {
        match key {
            NameKey::Kernel(k, g) => match self.kernels.get(k as usize) {
                Some(Some((gen_, n))) if *gen_ == g => Some(n),
                _ => None,
            },
            NameKey::Call(c) => self.calls.iter().find(|(k, _)| *k == c).map(|(_, n)| n),
        }
    }

    fn insert(&mut self, key: NameKey, name: Arc<str>) {
        match key {
            NameKey::Kernel(k, g) => {
                let i = k as usize;
                if self.kernels.len() <= i {
                    self.kernels.resize(i + 1, None);
                }
                self.kernels[i] = Some((g, name));
            }
            NameKey::Call(c) => self.calls.push((c, name)),
        }
    }
}

/// Who is calling the API: a host thread, or the body of a host callback (its task).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    /// The first host thread (host thread 0): a caller that does not tell threads apart.
    Host,
    /// Host thread `n`, as [`Sanitizer::host_thread`] numbered it.
    Thread(u32),
    /// The callback of the task at `seq` on `stream`.
    Callback {
        /// Its stream.
        stream: Entity,
        /// Its position.
        seq: u64,
    },
}

/// Shadow memory in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShadowStats {
    /// Intervals in the shadow.
    pub intervals: usize,
    /// Distinct accesses the intervals hold.
    pub accesses: usize,
    /// Blocks tracked.
    pub blocks: usize,
    /// Approximate bytes of host memory all of it takes (intervals, accesses, clocks).
    pub bytes: usize,
}

/// A host thread as a thread of the clock.
#[derive(Debug)]
struct ThreadClock {
    name: Option<Arc<str>>,
    slot: u32,
    /// What the thread has synchronized with; its own slot counts its epochs.
    clock: Arc<VectorClock>,
    /// Whether the clock's current epoch was handed on (to a task it enqueued, an annotation
    /// or another thread) since it last began one: the thread's next own access begins a new
    /// epoch, so that what was handed on does not cover it.
    published: bool,
    /// Per device, the join of the clocks of the thread's own completed work (what a
    /// synchronous call's implicit device synchronize orders it after).
    own: SmallVec<[(u32, VectorClock); 1]>,
}

/// The sanitizer, held by [`Finished::sanitizer`](crate::resources::Finished) only when it
/// is on.
#[derive(Debug)]
pub struct Sanitizer {
    config: SanitizerConfig,
    runtime: u32,
    streams: EntityHashMap<StreamClock>,
    names: Names,
    next_slot: u32,
    /// Slots of destroyed streams, with the epoch they ended at.
    free_slots: Vec<(u32, u64)>,
    /// Host threads, in the order of their first call.
    threads: Vec<ThreadClock>,
    /// Host thread by the caller's key for it.
    thread_keys: HashMap<u64, u32>,
    /// Clocks published by [`Sanitizer::release`], by key.
    released: HashMap<u64, VectorClock>,
    callbacks: HashMap<(Entity, u64), VectorClock>,
    events: EntityHashMap<EventClocks>,
    groups: HashMap<GroupKey, Group>,
    shadow: BTreeMap<Entity, BTreeMap<u64, Segment>>,
    /// Pinned host buffers with copies queued, by [`HostBuffer::id`](crate::HostBuffer::id).
    host_buffers: HashMap<u64, HostShadow>,
    blocks: BTreeMap<Entity, BTreeMap<u64, Block>>,
    next_generation: u64,
    reports: Vec<SanitizerReport>,
    /// Where each distinct bug's report is in `reports`.
    distinct: HashMap<ReportKey, usize>,
    /// Findings so far, repeats included.
    found: u64,
    /// The report of the latest finding.
    last: Option<usize>,
    /// Reports not yet printed or logged by the runtime.
    fresh: usize,
}

/// What makes two findings the same bug.
type ReportKey = (
    ReportKind,
    EnqueueSite,
    EnqueueSite,
    Arc<str>,
    Arc<str>,
    Operand,
    Operand,
);

/// Part of a range inside one block (or between blocks): start, end, the block.
type Piece = (u64, u64, Option<(u64, Block)>);

/// A conflict found while checking one range.
struct Conflict {
    kind: ReportKind,
    start: u64,
    end: u64,
    earlier: Arc<AccessRec>,
}

/// A race on bytes `start..end` of pinned host buffer `buffer` (`len` bytes long).
fn host_buffer_race(
    (start, end): (u64, u64),
    (buffer, len): (u64, u64),
    earlier: ReportSide,
    later: ReportSide,
    fix: String,
    at: SimTime,
) -> SanitizerReport {
    SanitizerReport {
        kind: ReportKind::Race,
        addr: start,
        bytes: end - start,
        block: Some((0, len)),
        earlier,
        later,
        fix,
        at,
        host_buffer: Some(buffer),
        count: 1,
        owner: None,
    }
}

impl Sanitizer {
    /// A sanitizer for runtime `runtime` (whose id stream handles in reports carry).
    pub fn new(config: SanitizerConfig, runtime: u32) -> Self {
        Self {
            config,
            runtime,
            streams: EntityHashMap::default(),
            names: Names::default(),
            next_slot: 0,
            free_slots: Vec::new(),
            threads: Vec::new(),
            thread_keys: HashMap::new(),
            released: HashMap::new(),
            callbacks: HashMap::new(),
            events: EntityHashMap::default(),
            groups: HashMap::new(),
            shadow: BTreeMap::new(),
            host_buffers: HashMap::new(),
            blocks: BTreeMap::new(),
            next_generation: 1,
            reports: Vec::new(),
            distinct: HashMap::new(),
            found: 0,
            last: None,
            fresh: 0,
        }
    }

    /// How it runs.
    pub fn config(&self) -> SanitizerConfig {
        self.config
    }

    /// Every report so far, in the order they were found.
    pub fn reports(&self) -> &[SanitizerReport] {
        &self.reports
    }

    /// Takes the reports, leaving none.
    pub fn take_reports(&mut self) -> Vec<SanitizerReport> {
        self.fresh = 0;
        self.last = None;
        self.distinct.clear();
        std::mem::take(&mut self.reports)
    }

    /// Findings so far, each repeat of a bug counted (the reports keep one per bug).
    pub fn findings(&self) -> u64 {
        self.found
    }

    /// The reports found since the last call (for printing them as they happen).
    pub fn fresh_reports(&mut self) -> &[SanitizerReport] {
        let from = self.reports.len() - self.fresh.min(self.reports.len());
        self.fresh = 0;
        &self.reports[from..]
    }

    /// Shadow memory in use.
    pub fn shadow_stats(&self) -> ShadowStats {
        let mut s = ShadowStats::default();
        let mut seen = std::collections::HashSet::new();
        for space in self.shadow.values() {
            s.intervals += space.len();
            for seg in space.values() {
                for r in seg.write.iter().chain(seg.reads.iter()) {
                    if seen.insert(Arc::as_ptr(r) as usize) {
                        s.accesses += 1;
                    }
                }
            }
        }
        s.blocks = self.blocks.values().map(BTreeMap::len).sum();
        // A B-tree entry costs about its key and value plus a share of node overhead.
        let interval = std::mem::size_of::<(u64, Segment)>() + 16;
        let access = std::mem::size_of::<AccessRec>() + 16;
        let block = std::mem::size_of::<(u64, Block)>() + 16;
        let clocks: usize = self
            .streams
            .values()
            .map(|st| st.clock.heap_bytes() + std::mem::size_of::<StreamClock>())
            .sum();
        let host: usize = self.host_buffers.values().map(|h| h.uses.len()).sum();
        s.intervals += host;
        s.accesses += host;
        s.bytes = s.intervals * interval
            + s.accesses * access
            + s.blocks * block
            + clocks
            + host * std::mem::size_of::<HostUse>();
        s
    }

    /// The shared name of `key`, if it was made before.
    pub fn cached_name(&self, key: NameKey) -> Option<Arc<str>> {
        self.names.get(key).cloned()
    }

    /// The shared name of a kernel or call (made once by `make`).
    pub fn name(&mut self, key: NameKey, make: impl FnOnce() -> String) -> Arc<str> {
        if let Some(n) = self.names.get(key) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(make());
        self.names.insert(key, n.clone());
        n
    }

    /// The side of a host call (`name`: an allocation or a free) by `actor`, stream-ordered
    /// behind `stream`'s position when given.
    fn host_call(
        &mut self,
        actor: Actor,
        device: u32,
        stream: Option<(Entity, u64)>,
        name: &'static str,
        site: EnqueueSite,
    ) -> Arc<TaskInfo> {
        Arc::new(TaskInfo {
            device,
            stream: stream.map(|s| s.0),
            position: stream.map_or(0, |s| s.1),
            name: self.name(NameKey::Call(name), || name.into()),
            site,
            thread: self.thread_of(actor),
        })
    }

    fn stream(&mut self, stream: Entity, device: u32) -> &mut StreamClock {
        let next = &mut self.next_slot;
        let free = &mut self.free_slots;
        self.streams.entry(stream).or_insert_with(|| {
            let (slot, base) = free.pop().unwrap_or_else(|| {
                *next += 1;
                (*next - 1, 0)
            });
            StreamClock {
                slot,
                base,
                device,
                clock: Arc::new(VectorClock::default()),
                joined_host: None,
                processed: 0,
                submitted: VecDeque::new(),
                frees: Vec::new(),
                records: VecDeque::new(),
                owner_last: SmallVec::new(),
            }
        })
    }

    /// The index of the host thread the caller knows as `key` (any number unique to the
    /// thread, e.g. a process-wide counter read from a thread-local), numbering it on its
    /// first call: the new thread starts ordered after everything every host thread did so
    /// far, as a thread spawned at that moment would be (the runtime cannot see a spawn).
    /// Threads that end keep their index: it is never handed to another thread.
    pub fn host_thread(&mut self, key: u64, name: Option<&str>) -> u32 {
        if let Some(&i) = self.thread_keys.get(&key) {
            return i;
        }
        let i = self.new_thread(name.map(Arc::from));
        self.thread_keys.insert(key, i);
        i
    }

    /// Host threads numbered so far.
    pub fn host_threads(&self) -> usize {
        self.threads.len()
    }

    fn new_thread(&mut self, name: Option<Arc<str>>) -> u32 {
        let mut clock = VectorClock::default();
        for t in &mut self.threads {
            clock.join(&t.clock);
            t.published = true;
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        clock.set(slot, 1);
        self.threads.push(ThreadClock {
            name,
            slot,
            clock: Arc::new(clock),
            published: false,
            own: SmallVec::new(),
        });
        (self.threads.len() - 1) as u32
    }

    /// The thread index `actor` is (host thread 0 is made for [`Actor::Host`] if no thread
    /// was numbered yet); `None` for a callback.
    fn thread_of(&mut self, actor: Actor) -> Option<u32> {
        match actor {
            Actor::Host => {
                if self.threads.is_empty() {
                    self.new_thread(None);
                }
                Some(0)
            }
            Actor::Thread(i) => {
                while self.threads.len() <= i as usize {
                    self.new_thread(None);
                }
                Some(i)
            }
            Actor::Callback { .. } => None,
        }
    }

    /// Thread `t`'s clock, handed on: its next own access begins a new epoch.
    fn publish(&mut self, t: u32) -> Arc<VectorClock> {
        let th = &mut self.threads[t as usize];
        th.published = true;
        th.clock.clone()
    }

    /// The epoch thread `t`'s own access is made at: `(its slot, epoch)`, beginning a new
    /// epoch if the current one was handed on.
    fn own_epoch(&mut self, t: u32) -> (u32, u64) {
        let th = &mut self.threads[t as usize];
        let now = th.clock.get(th.slot);
        if th.published {
            Arc::make_mut(&mut th.clock).set(th.slot, now + 1);
            th.published = false;
            return (th.slot, now + 1);
        }
        (th.slot, now)
    }

    /// The clock of `actor` now (a callback's: its task's clock, with what it synchronized).
    fn actor_clock(&mut self, actor: Actor) -> VectorClock {
        match actor {
            Actor::Host | Actor::Thread(_) => {
                let t = self.thread_of(actor).expect("a host thread");
                (*self.threads[t as usize].clock).clone()
            }
            Actor::Callback { stream, seq } => {
                if let Some(c) = self.callbacks.get(&(stream, seq)) {
                    return c.clone();
                }
                let mut c = VectorClock::default();
                if let Some(st) = self.streams.get(&stream) {
                    c.join(&st.clock);
                    if let Some(s) = st.submitted.iter().find(|s| s.seq == seq) {
                        c.join(&s.host);
                    }
                    c.set(st.slot, st.base + seq);
                }
                self.callbacks.insert((stream, seq), c.clone());
                c
            }
        }
    }

    fn actor_join(&mut self, actor: Actor, other: &VectorClock) {
        match actor {
            Actor::Host | Actor::Thread(_) => {
                let t = self.thread_of(actor).expect("a host thread");
                Arc::make_mut(&mut self.threads[t as usize].clock).join(other);
            }
            Actor::Callback { stream, seq } => {
                let mut c = self.actor_clock(actor);
                c.join(other);
                self.callbacks.insert((stream, seq), c);
            }
        }
    }

    /// The accesses every host thread is ordered after: the element-wise minimum of their
    /// clocks, and of `with` (what no thread, present or future, can still race with: a new
    /// thread starts from the join of them all).
    fn host_floor(&self, with: Option<&VectorClock>) -> VectorClock {
        let mut clocks = self
            .threads
            .iter()
            .map(|t| &*t.clock)
            .chain(with)
            .peekable();
        let Some(first) = clocks.next() else {
            return VectorClock::default();
        };
        let mut floor = first.clone();
        for c in clocks {
            for (i, v) in floor.0.iter_mut().enumerate() {
                *v = (*v).min(c.0.get(i).copied().unwrap_or(0));
            }
        }
        floor
    }

    /// A task was enqueued at `seq` on `stream` (of device `device`) by `actor`: it happens
    /// after everything the actor has synchronized with. `name` and `site` are for reports.
    #[allow(clippy::too_many_arguments)]
    pub fn submitted(
        &mut self,
        actor: Actor,
        stream: Entity,
        device: u32,
        seq: u64,
        wait: Option<(Entity, u64)>,
        collective: Option<&CollectiveCall>,
        name: Arc<str>,
        site: EnqueueSite,
    ) {
        let (host, owner) = match actor {
            Actor::Host | Actor::Thread(_) => {
                let t = self.thread_of(actor).expect("a host thread");
                (self.publish(t), Some(t))
            }
            Actor::Callback {
                stream: cs,
                seq: cseq,
            } => {
                // Work a callback enqueues is the work of the thread that enqueued it.
                let owner = self
                    .streams
                    .get(&cs)
                    .and_then(|st| st.submitted.iter().find(|s| s.seq == cseq))
                    .and_then(|s| s.owner);
                (Arc::new(self.actor_clock(actor)), owner)
            }
        };
        if let Some((event, record)) = wait
            && record != 0
        {
            let ev = self.events.entry(event).or_default();
            ev.records.entry(record).or_insert((None, 0)).1 += 1;
        }
        if let Some(c) = collective {
            self.groups
                .entry(group_key(c))
                .or_default()
                .members
                .push((stream, seq));
        }
        let st = self.stream(stream, device);
        let mut shared_now = None;
        if let Some(t) = owner {
            match st.owner_last.iter_mut().find(|(o, _)| *o == t) {
                Some(last) => last.1 = seq,
                None => {
                    // A second thread enqueues here: the stream's clock stops standing for its
                    // first thread's own work, which keeps what it has so far.
                    if let [(first, _)] = st.owner_last[..] {
                        shared_now = Some((first, st.clock.clone()));
                    }
                    st.owner_last.push((t, seq));
                }
            }
        }
        st.submitted.push_back(Submitted {
            seq,
            host,
            name,
            site,
            owner,
            sync: false,
        });
        if let Some((first, clock)) = shared_now {
            self.add_own_work(first, device, &clock);
        }
    }

    /// Thread `t`'s own work on device `device` now reaches as far as `clock`.
    fn add_own_work(&mut self, t: u32, device: u32, clock: &VectorClock) {
        let Some(th) = self.threads.get_mut(t as usize) else {
            return;
        };
        match th.own.iter_mut().find(|(d, _)| *d == device) {
            Some((_, own)) => own.join(clock),
            None => th.own.push((device, clock.clone())),
        }
    }

    /// The task just submitted at `seq` on `stream` (see [`Sanitizer::submitted`]) is the
    /// work of a synchronous call (a copy or memset that returns when done): its accesses are
    /// its host thread's own, checked against what that thread is ordered after when it made
    /// the call and recorded at the thread's epoch. The stream it runs on orders it with
    /// nothing else: which thread's synchronous call reaches the runtime first is not an
    /// order the program chose.
    pub fn sync_call_submitted(&mut self, stream: Entity, seq: u64) {
        if let Some(sub) = self
            .streams
            .get_mut(&stream)
            .and_then(|st| st.submitted.iter_mut().rev().find(|s| s.seq == seq))
            && sub.owner.is_some()
        {
            sub.sync = true;
        }
    }

    /// `actor` publishes what it is ordered after under `key`
    /// ([`Sanitizer::acquire`] of the same key orders the acquirer after it): synchronization
    /// the runtime cannot see, such as a channel or a lock between host threads.
    pub fn release(&mut self, actor: Actor, key: u64) {
        let c = match self.thread_of(actor) {
            Some(t) => self.publish(t),
            None => Arc::new(self.actor_clock(actor)),
        };
        self.released.entry(key).or_default().join(&c);
    }

    /// `actor` is ordered after everything published under `key` so far.
    pub fn acquire(&mut self, actor: Actor, key: u64) {
        if let Some(c) = self.released.get(&key).cloned() {
            self.actor_join(actor, &c);
        }
    }

    /// `actor` is ordered after everything every host thread did so far (after the threads
    /// were joined, or met at a barrier).
    pub fn host_sync(&mut self, actor: Actor) {
        let mut c = VectorClock::default();
        for t in 0..self.threads.len() as u32 {
            c.join(&self.publish(t));
        }
        self.actor_join(actor, &c);
    }

    /// The copy just submitted at `seq` on `stream` (see [`Sanitizer::submitted`]) reads
    /// (host to device) or writes (device to host, `writes`) bytes `range` of pinned host
    /// buffer `buffer`, `len` bytes long: the host must not touch them until it is ordered
    /// after the copy. A host thread's own access to those bytes that the copy's enqueuer is
    /// not ordered after (one side writing) is a race, reported now.
    pub fn host_copy_submitted(
        &mut self,
        stream: Entity,
        seq: u64,
        (buffer, len): (u64, u64),
        range: (u64, u64),
        writes: bool,
        now: SimTime,
    ) {
        let Some(st) = self.streams.get(&stream) else {
            return;
        };
        let Some(sub) = st.submitted.iter().rev().find(|s| s.seq == seq) else {
            return;
        };
        let task = Arc::new(TaskInfo {
            device: st.device,
            stream: Some(stream),
            position: seq,
            name: sub.name.clone(),
            site: sub.site,
            thread: sub.owner,
        });
        let enqueuer = sub.host.clone();
        let (slot, epoch) = (st.slot, st.base + seq);
        let floor = self.host_floor(None);
        let shadow = self.host_buffers.entry(buffer).or_default();
        shadow.len = len;
        // Copies and host accesses every host thread is already ordered after need no
        // checking any more.
        shadow.uses.retain(|u| !floor.covers(u.slot, u.epoch));
        shadow.host.retain(|u| !floor.covers(u.slot, u.epoch));
        let conflicts: Vec<(u64, u64, Arc<TaskInfo>, bool)> = shadow
            .host
            .iter()
            .filter(|h| {
                (h.writes || writes)
                    && h.start < range.1
                    && range.0 < h.end
                    && !enqueuer.covers(h.slot, h.epoch)
            })
            .map(|h| {
                (
                    h.start.max(range.0),
                    h.end.min(range.1),
                    h.task.clone(),
                    h.writes,
                )
            })
            .collect();
        shadow.uses.push(HostUse {
            start: range.0,
            end: range.1,
            writes,
            slot,
            epoch,
            task: task.clone(),
        });
        let (copy_operand, copy_mode) = copy_side(writes);
        for (start, end, host, host_writes) in conflicts {
            let earlier = self.side_of(&host, Operand::HostBuffer, Some(host_mode(host_writes)));
            let later = self.side_of(&task, copy_operand, Some(copy_mode));
            let fix = self.fix_after_thread(&earlier, &later);
            let report = host_buffer_race((start, end), (buffer, len), earlier, later, fix, now);
            self.push_report(report, &host, &task);
        }
    }

    /// `actor` reads (or writes, `writes`) bytes `range` of pinned host buffer `buffer` (`len`
    /// bytes long) itself, at a call made at `site`: a queued copy of overlapping bytes (one
    /// side writing) that it is not ordered after is a race, and so is another host thread's
    /// access it is not ordered after. In error mode the error the access fails with.
    #[allow(clippy::too_many_arguments)]
    pub fn host_accessed(
        &mut self,
        actor: Actor,
        (buffer, len): (u64, u64),
        range: (u64, u64),
        writes: bool,
        site: EnqueueSite,
        now: SimTime,
    ) -> Option<NpuError> {
        let thread = self.thread_of(actor);
        // A callback's access is checked, not kept: its clock is its task's, which every
        // later enqueue of its stream's order covers.
        if thread.is_none() && !self.host_buffers.contains_key(&buffer) {
            return None;
        }
        let clock = self.actor_clock(actor);
        let floor = self.host_floor(None);
        let at = thread.map(|t| self.own_epoch(t));
        let name = if writes {
            "host write of a pinned buffer"
        } else {
            "host read of a pinned buffer"
        };
        let (stream, position) = match actor {
            Actor::Host | Actor::Thread(_) => (None, 0),
            Actor::Callback { stream, seq } => (Some(stream), seq),
        };
        let device = self
            .host_buffers
            .get(&buffer)
            .and_then(|h| h.uses.first().or(h.host.first()))
            .map_or(0, |u| u.task.device);
        let info = Arc::new(TaskInfo {
            device,
            stream,
            position,
            name: self.name(NameKey::Call(name), || name.into()),
            site,
            thread,
        });
        let shadow = self.host_buffers.entry(buffer).or_default();
        shadow.len = shadow.len.max(len);
        shadow.uses.retain(|u| !floor.covers(u.slot, u.epoch));
        shadow.host.retain(|u| !floor.covers(u.slot, u.epoch));
        let len = shadow.len;
        let overlaps = |u: &&HostUse| {
            (u.writes || writes)
                && u.start < range.1
                && range.0 < u.end
                && !clock.covers(u.slot, u.epoch)
        };
        // (start, end, the other side, whether it writes, whether it is a copy)
        let conflicts: Vec<(u64, u64, Arc<TaskInfo>, bool, bool)> = shadow
            .uses
            .iter()
            .filter(overlaps)
            .map(|u| (u, true))
            .chain(shadow.host.iter().filter(overlaps).map(|u| (u, false)))
            .map(|(u, copy)| {
                (
                    u.start.max(range.0),
                    u.end.min(range.1),
                    u.task.clone(),
                    u.writes,
                    copy,
                )
            })
            .collect();
        if let Some((slot, epoch)) = at {
            // The thread's older accesses this one supersedes go.
            shadow.host.retain(|u| {
                !(u.slot == slot && range.0 <= u.start && u.end <= range.1 && (writes || !u.writes))
            });
            shadow.host.push(HostUse {
                start: range.0,
                end: range.1,
                writes,
                slot,
                epoch,
                task: info.clone(),
            });
        }
        if shadow.uses.is_empty() && shadow.host.is_empty() {
            self.host_buffers.remove(&buffer);
        }
        let before = self.found;
        for (start, end, task, other_writes, copy) in conflicts {
            let (operand, mode) = if copy {
                copy_side(other_writes)
            } else {
                (Operand::HostBuffer, host_mode(other_writes))
            };
            let earlier = self.side_of(&task, operand, Some(mode));
            let later = self.side_of(&info, Operand::HostBuffer, Some(host_mode(writes)));
            let fix = match (copy, task.stream) {
                (true, Some(a)) => format!(
                    "synchronize {} (or an event recorded on it after position {}) before \
                     the host touches the buffer",
                    Stream::new(self.runtime, a),
                    task.position
                ),
                (true, None) => "synchronize before the host touches the buffer".into(),
                (false, _) => self.fix_after_thread(&earlier, &later),
            };
            let report = host_buffer_race((start, end), (buffer, len), earlier, later, fix, now);
            self.push_report(report, &task, &info);
        }
        if self.config.mode == SanitizerMode::Error
            && self.found > before
            && let Some(r) = self.last.and_then(|i| self.reports.get(i))
        {
            return Some(NpuError::SanitizerViolation(r.to_string()));
        }
        None
    }

    /// Pinned host buffer `buffer` was freed: its queued copies are forgotten.
    pub fn host_freed(&mut self, buffer: u64) {
        self.host_buffers.remove(&buffer);
    }

    /// The host (or a callback) synchronized with everything `stream` completed (a stream
    /// synchronize, a query that found it idle).
    pub fn synchronized_stream(&mut self, actor: Actor, stream: Entity) {
        if let Some(c) = self.streams.get(&stream).map(|s| s.clock.clone()) {
            self.actor_join(actor, &c);
        }
    }

    /// The host synchronized with every stream of device `device` (`None`: of every device).
    pub fn synchronized_device(&mut self, actor: Actor, device: Option<u32>) {
        let mut c = VectorClock::default();
        for st in self.streams.values() {
            if device.is_none_or(|d| d == st.device) {
                c.join(&st.clock);
            }
        }
        self.actor_join(actor, &c);
    }

    /// The host thread `actor` made a synchronous call, which waits for device `device`'s
    /// queued work before it runs: the thread is ordered after the work it enqueued there
    /// itself (with what the host callbacks it enqueued enqueued), not after other threads'
    /// work — which of that was queued first depends on which thread reached the runtime
    /// first. A callback is ordered after all of the device's work, as by a device
    /// synchronize.
    pub fn synchronized_own_work(&mut self, actor: Actor, device: u32) {
        let Some(t) = self.thread_of(actor) else {
            self.synchronized_device(actor, Some(device));
            return;
        };
        // Streams only this thread enqueued on stand for its own work there by their clocks;
        // on streams shared with other threads, its own work was kept as it completed.
        let mut c = self.threads[t as usize]
            .own
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, own)| own.clone())
            .unwrap_or_default();
        for st in self.streams.values() {
            if st.device == device && matches!(st.owner_last[..], [(o, _)] if o == t) {
                c.join(&st.clock);
            }
        }
        Arc::make_mut(&mut self.threads[t as usize].clock).join(&c);
    }

    /// The host synchronized with record `record` of `event` (an event synchronize, a query
    /// that found it complete).
    pub fn synchronized_event(&mut self, actor: Actor, event: Entity, record: u64) {
        let c = self
            .events
            .get(&event)
            .and_then(|e| e.records.get(&record))
            .and_then(|r| r.0.clone());
        if let Some(c) = c {
            self.actor_join(actor, &c);
        }
    }

    /// Forgets a destroyed stream (drained, and synchronized with by the host): its slot
    /// goes to the next new stream, which counts on from where this one ended.
    pub fn stream_destroyed(&mut self, stream: Entity) {
        if let Some(st) = self.streams.remove(&stream) {
            self.free_slots.push((st.slot, st.base + st.processed));
        }
    }

    /// Forgets the freed blocks of `context` that `released` says went back to the pool
    /// (no queued task can reach them any more), and their shadow.
    pub fn forget_released(&mut self, context: Entity, released: impl Fn(u64) -> bool) {
        let Some(blocks) = self.blocks.get_mut(&context) else {
            return;
        };
        let gone: Vec<(u64, u64)> = blocks
            .iter()
            .filter(|(b, blk)| matches!(blk.life, BlockLife::Freed { .. }) && released(**b))
            .map(|(b, blk)| (*b, blk.size))
            .collect();
        for &(b, _) in &gone {
            blocks.remove(&b);
        }
        if let Some(space) = self.shadow.get_mut(&context) {
            for (b, size) in gone {
                split(space, b);
                split(space, b + size);
                let keys: Vec<u64> = space.range(b..b + size).map(|(k, _)| *k).collect();
                for k in keys {
                    space.remove(&k);
                }
            }
        }
    }

    /// Forgets a destroyed context: its blocks, its shadow and its streams (whose slots are
    /// not reused: their work may have been aborted rather than waited for).
    pub fn context_destroyed(&mut self, context: Entity, streams: &[Entity]) {
        self.blocks.remove(&context);
        self.shadow.remove(&context);
        for s in streams {
            self.streams.remove(s);
        }
    }

    /// Forgets a destroyed event's records that no queued wait captured.
    pub fn event_destroyed(&mut self, event: Entity) {
        if let Some(e) = self.events.get_mut(&event) {
            e.records.retain(|_, r| r.1 > 0);
            if e.records.is_empty() {
                self.events.remove(&event);
            }
        }
    }

    /// A block of `size` bytes at `base` in `context` was allocated by `actor`; with
    /// `stream = Some((stream, position))` it is stream-ordered: work must be ordered after
    /// that position of that stream to use it.
    #[allow(clippy::too_many_arguments)]
    pub fn allocated(
        &mut self,
        actor: Actor,
        context: Entity,
        device: u32,
        base: u64,
        size: u64,
        stream: Option<(Entity, u64)>,
        site: EnqueueSite,
    ) {
        let generation = self.next_generation;
        self.next_generation += 1;
        let after = stream.map(|(s, position)| {
            let st = self.stream(s, device);
            StreamOrder {
                slot: st.slot,
                epoch: st.base + position,
                stream: s,
                position,
            }
        });
        let ordered = if stream.is_some() {
            "malloc_async"
        } else {
            "malloc"
        };
        let alloc = self.host_call(actor, device, stream, ordered, site);
        let end = base.saturating_add(size);
        let blocks = self.blocks.entry(context).or_default();
        let stale: Vec<u64> = blocks
            .range(..end)
            .rev()
            .take_while(|(b, blk)| **b + blk.size > base)
            .map(|(b, _)| *b)
            .collect();
        for b in stale {
            blocks.remove(&b);
        }
        blocks.insert(
            base,
            Block {
                size,
                generation,
                life: BlockLife::Live,
                after,
                alloc,
            },
        );
        // Fresh memory is uninitialised; what the bytes' earlier owner did stays in the
        // shadow, so a reuse that is not ordered after it is still found.
        let space = self.shadow.entry(context).or_default();
        split(space, base);
        split(space, end);
        for (_, seg) in space.range_mut(base..end) {
            seg.init = false;
        }
    }

    /// `actor` freed the block at `base` in `context`; with `stream = Some((stream,
    /// position))`, stream-ordered behind that position. Reports accesses not ordered before
    /// the free (once its position is reached, for a stream-ordered one).
    #[allow(clippy::too_many_arguments)]
    pub fn freed(
        &mut self,
        actor: Actor,
        context: Entity,
        device: u32,
        base: u64,
        stream: Option<(Entity, u64)>,
        site: EnqueueSite,
        now: SimTime,
    ) {
        let host = match self.thread_of(actor) {
            Some(t) => self.publish(t),
            None => Arc::new(self.actor_clock(actor)),
        };
        let ordered = if stream.is_some() {
            "free_async"
        } else {
            "free"
        };
        let side = self.host_call(actor, device, stream, ordered, site);
        let Some((s, position)) = stream else {
            self.finish_free(context, base, (host.clone(), host), side, now);
            return;
        };
        let st = self.stream(s, device);
        if st.processed >= position {
            let mut c = (*st.clock).clone();
            c.join(&host);
            self.finish_free(context, base, (Arc::new(c), host), side, now);
            return;
        }
        st.frees.push(PendingFree {
            position,
            context,
            base,
            host,
            side,
            rest: Vec::new(),
        });
        if let Some(b) = self.blocks.get_mut(&context).and_then(|m| m.get_mut(&base)) {
            b.life = BlockLife::Freeing;
        }
    }

    /// `actor` freed the block at `base` in `context` behind every stream position in
    /// `positions` (npusim's deferred free): accesses ordered before any of them, or before
    /// the call, are fine. The block is already pending, so the sanitizer checks it when the
    /// last position is reached.
    #[allow(clippy::too_many_arguments)]
    pub fn freed_behind(
        &mut self,
        actor: Actor,
        context: Entity,
        device: u32,
        base: u64,
        positions: &[(Entity, u64)],
        site: EnqueueSite,
        now: SimTime,
    ) {
        let mut clock = self.actor_clock(actor);
        if let Some(t) = self.thread_of(actor) {
            self.threads[t as usize].published = true;
        }
        let mut waiting = Vec::new();
        for &(s, p) in positions {
            match self.streams.get(&s) {
                Some(st) if st.processed >= p => clock.join(&st.clock),
                Some(_) => waiting.push((s, p)),
                None => {}
            }
        }
        let side = Arc::new(TaskInfo {
            device,
            stream: None,
            position: 0,
            name: self.name(NameKey::Call("free"), || "free".into()),
            site,
            thread: self.thread_of(actor),
        });
        if waiting.is_empty() {
            let c = Arc::new(clock);
            self.finish_free(context, base, (c.clone(), c), side, now);
            return;
        }
        if let Some(b) = self.blocks.get_mut(&context).and_then(|m| m.get_mut(&base)) {
            b.life = BlockLife::Freeing;
        }
        // Chained: each position's completion joins its clock and passes the free on to the
        // next one; the last finishes it.
        let host = Arc::new(clock);
        let (s, p) = waiting[0];
        let rest: Vec<(Entity, u64)> = waiting[1..].to_vec();
        self.streams
            .get_mut(&s)
            .expect("looked up")
            .frees
            .push(PendingFree {
                position: p,
                context,
                base,
                host,
                side,
                rest,
            });
    }

    fn finish_free(
        &mut self,
        context: Entity,
        base: u64,
        (clock, host): (Arc<VectorClock>, Arc<VectorClock>),
        side: Arc<TaskInfo>,
        now: SimTime,
    ) {
        let Some(block) = self.blocks.get_mut(&context).and_then(|m| m.get_mut(&base)) else {
            return;
        };
        block.life = BlockLife::Freed {
            clock: clock.clone(),
            side: side.clone(),
        };
        let (size, generation) = (block.size, block.generation);
        let side_device = side.device;
        let end = base.saturating_add(size);
        let mut found: Vec<Conflict> = Vec::new();
        if let Some(space) = self.shadow.get(&context) {
            for (&start, seg) in space.range(..end).rev() {
                if seg.end <= base {
                    break;
                }
                let (a, b) = (start.max(base), seg.end.min(end));
                for r in seg.write.iter().chain(seg.reads.iter()) {
                    if r.generation == generation && !clock.covers(r.slot, r.clock) {
                        push_conflict(&mut found, ReportKind::UseAfterFree, a, b, r);
                    }
                }
            }
        }
        found.sort_by_key(|c| c.start);
        for c in found {
            let later = self.side_of(&side, Operand::Block, None);
            let earlier = self.side_of(&c.earlier.task, c.earlier.operand, Some(c.earlier.mode));
            let fix = format!(
                "the free does not wait for {}: synchronize {} (or an event recorded after \
                 position {}) before freeing, or free with free_async on that stream",
                earlier.name,
                stream_name(&earlier),
                earlier.position
            );
            self.push_report(
                SanitizerReport {
                    kind: ReportKind::UseAfterFree,
                    addr: c.start,
                    bytes: c.end - c.start,
                    block: Some((base, size)),
                    earlier,
                    later,
                    fix,
                    at: now,
                    count: 1,
                    host_buffer: None,
                    owner: Some(side_device),
                },
                &c.earlier.task,
                &side,
            );
        }
        // Every task a host thread enqueues from now on is ordered after what all their clocks
        // and the free's cover: those accesses can never conflict again, so they leave the
        // shadow (what is not covered stays, for a reuse that is not ordered after it).
        let floor = self.host_floor(Some(&host));
        prune(self.shadow.get_mut(&context), base, end, &floor);
    }

    /// Completes `task` (which ended well when `ok`) at `now`: computes its clock and checks
    /// its accesses. In error mode, returns the error it fails with.
    pub fn completed(&mut self, task: &Task, ok: bool, now: SimTime) -> Option<NpuError> {
        let kind = task.kind();
        // A collective's part joins what every member had done before it: the group's clock
        // is built while this stream's own clock and submission still stand for its earlier
        // work, so the first member to complete brings its own in too.
        let group = (kind == TaskKind::Collective)
            .then(|| CollectiveCall::decode(&task.desc))
            .flatten()
            .map(|call| {
                let key = group_key(&call);
                (key, self.group_clock(key))
            });
        let st = self.streams.get_mut(&task.stream)?;
        while st.submitted.front().is_some_and(|s| s.seq < task.seq) {
            st.submitted.pop_front();
        }
        let sub = if st.submitted.front().is_some_and(|s| s.seq == task.seq) {
            st.submitted.pop_front()
        } else {
            None
        };
        let slot = st.slot;
        let epoch = st.base + task.seq;
        // The stream's clock, updated in place unless an event record still shares it.
        let clock = Arc::make_mut(&mut st.clock);
        if let Some(s) = &sub
            && !st
                .joined_host
                .as_ref()
                .is_some_and(|h| Arc::ptr_eq(h, &s.host))
        {
            clock.join(&s.host);
            st.joined_host = Some(s.host.clone());
        }
        match kind {
            TaskKind::EventWait => {
                if let Some(ev) = task.desc.as_event()
                    && ev.record != 0
                    && let Some(e) = self.events.get_mut(&ev.event)
                    && let Some(r) = e.records.get_mut(&ev.record)
                {
                    if let Some(c) = &r.0 {
                        clock.join(c);
                    }
                    r.1 = r.1.saturating_sub(1);
                    let latest = e.latest;
                    if r.1 == 0 && ev.record < latest {
                        e.records.remove(&ev.record);
                    }
                }
            }
            TaskKind::HostCallback => {
                if let Some(c) = self.callbacks.remove(&(task.stream, task.seq)) {
                    clock.join(&c);
                }
            }
            TaskKind::Collective => {
                if let Some((key, joined)) = group {
                    if let Some(j) = joined {
                        clock.join(&j);
                    }
                    if let Some(g) = self.groups.get_mut(&key) {
                        g.done += 1;
                        if g.done >= g.members.len() {
                            self.groups.remove(&key);
                        }
                    }
                }
            }
            _ => {}
        }
        clock.set(slot, epoch);
        let clock = st.clock.clone();
        st.processed = task.seq;
        // On a stream several threads enqueue on, the owner's latest task: its own work on the
        // device now reaches here. (Not a synchronous call's: that is the thread's own access
        // already, and the stream it ran on carries other threads' calls, in an order the
        // program did not choose.) A stream one thread uses alone needs nothing here: its
        // clock is that thread's own work.
        let own_work = (st.owner_last.len() > 1)
            .then(|| sub.as_ref().filter(|s| !s.sync).and_then(|s| s.owner))
            .flatten()
            .filter(|&t| st.owner_last.contains(&(t, task.seq)))
            .map(|t| (t, st.device));
        if kind == TaskKind::EventRecord
            && let Some(ev) = task.desc.as_event()
        {
            st.records.push_back((task.seq, ev.event));
            if st.records.len() > 8 {
                st.records.pop_front();
            }
            let e = self.events.entry(ev.event).or_default();
            if ok {
                e.records.entry(ev.record).or_insert((None, 0)).0 = Some(clock.clone());
            }
            e.latest = e.latest.max(ev.record);
            let latest = e.latest;
            e.records.retain(|&r, v| r >= latest || v.1 > 0);
        }
        if let Some((t, device)) = own_work {
            self.add_own_work(t, device, &clock);
        }
        // Stream-ordered frees behind this position happen now.
        let st = self.streams.get_mut(&task.stream).expect("looked up above");
        if !st.frees.is_empty() {
            let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut st.frees)
                .into_iter()
                .partition(|f| f.position <= task.seq);
            st.frees = rest;
            for mut f in due {
                let mut c = (*clock).clone();
                c.join(&f.host);
                // Pass it on to the next position it waits for, if any is still ahead.
                let mut next = None;
                while let Some((s, p)) = f.rest.pop() {
                    match self.streams.get(&s) {
                        Some(st) if st.processed < p => {
                            next = Some((s, p));
                            break;
                        }
                        Some(st) => c.join(&st.clock),
                        None => {}
                    }
                }
                match next {
                    Some((s, p)) => {
                        let st = self.streams.get_mut(&s).expect("looked up");
                        st.frees.push(PendingFree {
                            position: p,
                            host: Arc::new(c),
                            ..f
                        });
                    }
                    None => {
                        let clocks = (Arc::new(c), f.host.clone());
                        self.finish_free(f.context, f.base, clocks, f.side, now)
                    }
                }
            }
        }
        if !ok || task.access.is_empty() {
            return None;
        }
        let device = self.streams.get(&task.stream).map_or(0, |s| s.device);
        // A synchronous call's accesses are its thread's own: checked against what the thread
        // was ordered after at the call, at the thread's epoch.
        let owner = sub.as_ref().and_then(|s| s.owner);
        let own = sub
            .as_ref()
            .filter(|s| s.sync)
            .and_then(|s| Some((s.owner?, s.host.clone())));
        let (name, site) = match sub {
            Some(s) => (s.name, s.site),
            None => (
                self.name(NameKey::Call(kind.name()), || kind.name().into()),
                EnqueueSite::Unknown,
            ),
        };
        let (info, at, clock) = match own {
            Some((t, host)) => (
                Arc::new(TaskInfo {
                    device,
                    stream: None,
                    position: 0,
                    name,
                    site,
                    thread: Some(t),
                }),
                self.own_epoch(t),
                host,
            ),
            None => (
                Arc::new(TaskInfo {
                    device,
                    stream: Some(task.stream),
                    position: task.seq,
                    name,
                    site,
                    thread: owner,
                }),
                (slot, epoch),
                clock,
            ),
        };
        let before = self.found;
        for &access in task.access.ranges() {
            self.check_access(task, access, at, &clock, &info, now);
        }
        if self.config.mode == SanitizerMode::Error
            && self.found > before
            && let Some(r) = self.last.and_then(|i| self.reports.get(i))
        {
            return Some(NpuError::SanitizerViolation(r.to_string()));
        }
        None
    }

    /// The join of a collective's ranks' clocks as they reached the rendezvous (computed when
    /// the first rank completes: every other rank is then still at its collective).
    fn group_clock(&mut self, key: GroupKey) -> Option<Arc<VectorClock>> {
        let g = self.groups.get(&key)?;
        if let Some(j) = &g.joined {
            return Some(j.clone());
        }
        let mut c = VectorClock::default();
        for &(s, seq) in &g.members {
            if let Some(st) = self.streams.get(&s)
                && st.processed + 1 == seq
            {
                c.join(&st.clock);
                if let Some(sub) = st.submitted.iter().find(|x| x.seq == seq) {
                    c.join(&sub.host);
                }
            }
        }
        let c = Arc::new(c);
        self.groups.get_mut(&key).expect("looked up").joined = Some(c.clone());
        Some(c)
    }

    fn operand_of(&self, task: &Task, access: &Access, block: Option<(u64, u64)>) -> Operand {
        match task.kind() {
            TaskKind::Kernel => {
                let Some((base, size)) = block else {
                    return Operand::Unknown;
                };
                task.desc
                    .arg_words()
                    .iter()
                    .enumerate()
                    .filter(|&(i, &w)| !task.desc.arg_is_float(i) && w >= base && w < base + size)
                    .min_by_key(|&(_, &w)| access.addr.abs_diff(w))
                    .map_or(Operand::Unknown, |(i, _)| Operand::Arg(i as u8))
            }
            TaskKind::Memcpy | TaskKind::Memset => {
                if access.mode.writes() {
                    Operand::Destination
                } else {
                    Operand::Source
                }
            }
            TaskKind::Collective => {
                if access.mode.writes() {
                    Operand::Receive
                } else {
                    Operand::Send
                }
            }
            _ => Operand::Unknown,
        }
    }

    fn check_access(
        &mut self,
        task: &Task,
        access: Access,
        slot: (u32, u64),
        clock: &Arc<VectorClock>,
        info: &Arc<TaskInfo>,
        now: SimTime,
    ) {
        let (context, owner) = match access.space {
            Space::Local => (task.context, info.device),
            Space::Peer => match PeerCopy::decode(&task.desc) {
                Some(p) if p.src_ctx == task.context => (p.dst_ctx, p.dst_device),
                Some(p) => (p.src_ctx, p.src_device),
                None => return,
            },
        };
        let (start, end) = match access.bytes {
            // The whole block behind the address (an inexact set).
            0 => match self.block_at(context, access.addr) {
                Some((base, b)) => (base, base + b.size),
                None => return,
            },
            n => (access.addr, access.addr.saturating_add(n)),
        };
        // One piece per block the range crosses (a binary kernel writing past its buffer
        // reaches the next one), and one per gap between blocks.
        let mut pieces: SmallVec<[Piece; 2]> = SmallVec::new();
        let mut cursor = start;
        if let Some(blocks) = self.blocks.get(&context) {
            let first = blocks
                .range(..=start)
                .next_back()
                .filter(|(b, blk)| **b + blk.size > start)
                .map(|(b, _)| *b)
                .unwrap_or(start);
            for (&base, b) in blocks.range(first..end) {
                let (a, e) = (base.max(start), (base + b.size).min(end));
                if a >= e {
                    continue;
                }
                if a > cursor {
                    pieces.push((cursor, a, None));
                }
                pieces.push((a, e, Some((base, b.clone()))));
                cursor = e;
            }
        }
        if cursor < end {
            pieces.push((cursor, end, None));
        }
        for (a, e, found) in pieces {
            let found = found.as_ref().map(|(base, b)| (*base, b));
            self.check_piece(
                task,
                (context, owner),
                access,
                (a, e),
                found,
                slot,
                clock,
                info,
                now,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_piece(
        &mut self,
        task: &Task,
        (context, owner): (Entity, u32),
        access: Access,
        (start, end): (u64, u64),
        found: Option<(u64, &Block)>,
        (slot, epoch): (u32, u64),
        clock: &Arc<VectorClock>,
        info: &Arc<TaskInfo>,
        now: SimTime,
    ) {
        let access = Access {
            addr: start,
            bytes: end - start,
            ..access
        };
        let block = found.map(|(base, b)| (base, b.size));
        let generation = found.map_or(0, |(_, b)| b.generation);
        let operand = self.operand_of(task, &access, block);
        let rec = Arc::new(AccessRec {
            slot,
            clock: epoch,
            task: info.clone(),
            operand,
            mode: access.mode,
            generation,
        });
        let mut conflicts: Vec<Conflict> = Vec::new();
        let mut uninit: Vec<(u64, u64)> = Vec::new();
        // The block's own life: freed, or stream-ordered after a position this is not after.
        if let Some((_, b)) = found {
            match &b.life {
                BlockLife::Freed { clock: fc, side } if !fc.covers(slot, epoch) => {
                    let earlier = self.side_of(side, Operand::Block, None);
                    let later = self.side_of(info, operand, Some(access.mode));
                    let fix = format!(
                        "{} is not ordered before the free: synchronize {} (or an event \
                         recorded after position {}) before freeing, or free with free_async \
                         on that stream; work enqueued after the free needs a live buffer",
                        later.name,
                        stream_name(&later),
                        later.position
                    );
                    let report = SanitizerReport {
                        kind: ReportKind::UseAfterFree,
                        addr: start,
                        bytes: end - start,
                        block,
                        earlier,
                        later,
                        fix,
                        at: now,
                        count: 1,
                        host_buffer: None,
                        owner: Some(owner),
                    };
                    let side = side.clone();
                    self.push_report(report, &side, info);
                }
                _ => {}
            }
            if let Some(order) = b.after
                && !clock.covers(order.slot, order.epoch)
            {
                let alloc = b.alloc.clone();
                let earlier = self.side_of(&alloc, Operand::Block, None);
                let later = self.side_of(info, operand, Some(access.mode));
                let fix = self.fix_for(order.stream, order.position, &later);
                self.push_report(
                    SanitizerReport {
                        kind: ReportKind::UnorderedReuse,
                        addr: start,
                        bytes: end - start,
                        block,
                        earlier,
                        later,
                        fix,
                        at: now,
                        count: 1,
                        host_buffer: None,
                        owner: Some(owner),
                    },
                    &alloc,
                    info,
                );
            }
        }
        let check_uninit = self.config.uninitialized && access.mode.reads();
        let space = self.shadow.entry(context).or_default();
        split(space, start);
        split(space, end);
        // Fill the gaps, so every byte of the range has an interval.
        let mut cursor = start;
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        for (&s, seg) in space.range(start..end) {
            if s > cursor {
                gaps.push((cursor, s));
            }
            cursor = seg.end;
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (a, b) in gaps {
            space.insert(
                a,
                Segment {
                    end: b,
                    write: None,
                    reads: SmallVec::new(),
                    init: false,
                },
            );
        }
        for (&s, seg) in space.range_mut(start..end) {
            let kind_of = |r: &AccessRec| {
                if r.generation != generation {
                    ReportKind::UnorderedReuse
                } else {
                    ReportKind::Race
                }
            };
            if let Some(w) = &seg.write
                && !clock.covers(w.slot, w.clock)
            {
                push_conflict(&mut conflicts, kind_of(w), s, seg.end, w);
            }
            if access.mode.writes() {
                for r in &seg.reads {
                    if !clock.covers(r.slot, r.clock) {
                        push_conflict(&mut conflicts, kind_of(r), s, seg.end, r);
                    }
                }
            }
            if check_uninit && !seg.init {
                match uninit.last_mut() {
                    Some(last) if last.1 == s => last.1 = seg.end,
                    _ => uninit.push((s, seg.end)),
                }
            }
            if access.mode.writes() {
                seg.write = Some(rec.clone());
                seg.reads.clear();
                seg.init = true;
            } else {
                seg.reads.retain(|r| !clock.covers(r.slot, r.clock));
                seg.reads.push(rec.clone());
            }
        }
        coalesce(space, start, end);
        for c in conflicts {
            let earlier = self.side_of(&c.earlier.task, c.earlier.operand, Some(c.earlier.mode));
            let later = self.side_of(info, operand, Some(access.mode));
            let fix = match c.earlier.task.stream {
                Some(s) => self.fix_for(s, c.earlier.task.position, &later),
                None => self.fix_after_thread(&earlier, &later),
            };
            self.push_report(
                SanitizerReport {
                    kind: c.kind,
                    addr: c.start,
                    bytes: c.end - c.start,
                    block,
                    earlier,
                    later,
                    fix,
                    at: now,
                    count: 1,
                    host_buffer: None,
                    owner: Some(owner),
                },
                &c.earlier.task,
                info,
            );
        }
        if let Some((base, b)) = found {
            let alloc = b.alloc.clone();
            for (a, e) in uninit {
                let earlier = self.side_of(&alloc, Operand::Block, None);
                let later = self.side_of(info, operand, Some(access.mode));
                let fix = format!(
                    "write the bytes (a memset or a copy ordered before position {} of {}) \
                     before reading them",
                    later.position,
                    stream_name(&later)
                );
                self.push_report(
                    SanitizerReport {
                        kind: ReportKind::UninitializedRead,
                        addr: a,
                        bytes: e - a,
                        block: Some((base, b.size)),
                        earlier,
                        later,
                        fix,
                        at: now,
                        count: 1,
                        host_buffer: None,
                        owner: Some(owner),
                    },
                    &alloc,
                    info,
                );
            }
        }
    }

    /// What would order position `pos` of `earlier` before `later`.
    fn fix_for(&self, earlier: Entity, pos: u64, later: &ReportSide) -> String {
        let a = Stream::new(self.runtime, earlier);
        let existing = self.streams.get(&earlier).and_then(|st| {
            // The first record after it (records are kept oldest first).
            st.records.iter().find(|(p, _)| *p >= pos).copied()
        });
        let Some(b) = later.stream else {
            return format!("synchronize {a} (or an event recorded on it after position {pos})");
        };
        match existing {
            Some((p, e)) => format!(
                "make {b} wait for event {e} (recorded on {a} at position {p}, after position \
                 {pos}) before position {}: stream_wait_event / aclrtStreamWaitEvent",
                later.position
            ),
            None => format!(
                "record an event on {a} after position {pos} (record_event / aclrtRecordEvent) \
                 and make {b} wait for it before position {} (stream_wait_event / \
                 aclrtStreamWaitEvent)",
                later.position
            ),
        }
    }

    fn side_of(&self, t: &TaskInfo, operand: Operand, mode: Option<AccessMode>) -> ReportSide {
        ReportSide {
            device: t.device,
            stream: t.stream.map(|s| Stream::new(self.runtime, s)),
            position: t.position,
            name: t.name.to_string(),
            operand,
            mode,
            site: t.site,
            thread: t.thread.map(|i| HostThread {
                index: i,
                name: self.threads.get(i as usize).and_then(|th| th.name.clone()),
            }),
        }
    }

    /// What would order host thread `earlier`'s own access before `later`.
    fn fix_after_thread(&self, earlier: &ReportSide, later: &ReportSide) -> String {
        let a = earlier
            .thread
            .as_ref()
            .map_or_else(|| "the host".to_string(), |t| t.to_string());
        let b = match (&later.thread, later.stream) {
            (Some(t), _) if Some(t) == earlier.thread.as_ref() => {
                return "synchronize before the later call".into();
            }
            (Some(t), _) => t.to_string(),
            (None, Some(s)) => format!(
                "the thread that enqueued position {} of {s}",
                later.position
            ),
            (None, None) => "the later caller".into(),
        };
        format!(
            "order {a}'s {} before {b}'s call: through the runtime ({b} synchronizes work {a} \
             enqueued after it, or waits for an event {a} recorded after it), or, for a \
             hand-off the runtime cannot see (a channel, a lock, a join), with \
             sanitizer_release after it in {a} and sanitizer_acquire before the call in {b} \
             (C: npusimSanitizerRelease / npusimSanitizerAcquire; after joining threads: \
             sanitizer_host_sync)",
            earlier.name
        )
    }

    fn block_at(&self, context: Entity, addr: u64) -> Option<(u64, &Block)> {
        let (&base, b) = self.blocks.get(&context)?.range(..=addr).next_back()?;
        (addr < base + b.size.max(1)).then_some((base, b))
    }

    fn push_report(&mut self, report: SanitizerReport, earlier: &TaskInfo, later: &TaskInfo) {
        self.found += 1;
        let key = (
            report.kind,
            earlier.site,
            later.site,
            earlier.name.clone(),
            later.name.clone(),
            report.earlier.operand,
            report.later.operand,
        );
        if let Some(&i) = self.distinct.get(&key) {
            self.reports[i].count += 1;
            self.last = Some(i);
            return;
        }
        self.distinct.insert(key, self.reports.len());
        self.last = Some(self.reports.len());
        self.reports.push(report);
        self.fresh += 1;
    }
}

/// A copy's operand and mode on its host bytes (device to host when `writes`).
fn copy_side(writes: bool) -> (Operand, AccessMode) {
    if writes {
        (Operand::Destination, AccessMode::Write)
    } else {
        (Operand::Source, AccessMode::Read)
    }
}

fn host_mode(writes: bool) -> AccessMode {
    if writes {
        AccessMode::Write
    } else {
        AccessMode::Read
    }
}

fn stream_name(side: &ReportSide) -> String {
    side.stream
        .map_or_else(|| "the host".to_string(), |s| s.to_string())
}

/// Notes a conflict with `rec` on `[a, b)`, extending the previous one when it continues it.
fn push_conflict(out: &mut Vec<Conflict>, kind: ReportKind, a: u64, b: u64, rec: &Arc<AccessRec>) {
    if let Some(last) = out
        .iter_mut()
        .rev()
        .find(|c| c.kind == kind && Arc::ptr_eq(&c.earlier.task, &rec.task))
        && (last.end == a || last.start == b)
    {
        last.start = last.start.min(a);
        last.end = last.end.max(b);
        return;
    }
    out.push(Conflict {
        kind,
        start: a,
        end: b,
        earlier: rec.clone(),
    });
}

/// Drops from `[start, end)` of `space` the accesses `host` covers, and the intervals left
/// empty.
fn prune(space: Option<&mut BTreeMap<u64, Segment>>, start: u64, end: u64, host: &VectorClock) {
    let Some(space) = space else {
        return;
    };
    split(space, start);
    split(space, end);
    let mut empty = Vec::new();
    for (&k, seg) in space.range_mut(start..end) {
        if seg
            .write
            .as_ref()
            .is_some_and(|w| host.covers(w.slot, w.clock))
        {
            seg.write = None;
        }
        seg.reads.retain(|r| !host.covers(r.slot, r.clock));
        if seg.write.is_none() && seg.reads.is_empty() {
            empty.push(k);
        }
    }
    for k in empty {
        space.remove(&k);
    }
    coalesce(space, start, end);
}

/// Splits the interval that holds `at` so that one starts there.
fn split(space: &mut BTreeMap<u64, Segment>, at: u64) {
    let Some((&s, seg)) = space.range_mut(..at).next_back() else {
        return;
    };
    if seg.end <= at {
        return;
    }
    let mut right = seg.clone();
    seg.end = at;
    right.end = right.end.max(at);
    let _ = s;
    space.insert(at, right);
}

/// Merges neighbouring intervals around `[start, end)` that hold the same state.
fn coalesce(space: &mut BTreeMap<u64, Segment>, start: u64, end: u64) {
    let from = space.range(..start).next_back().map_or(start, |(&s, _)| s);
    let keys: Vec<u64> = space.range(from..=end).map(|(&k, _)| k).collect();
    let mut prev: Option<u64> = None;
    for k in keys {
        if let Some(p) = prev {
            let (pe, same) = {
                let a = &space[&p];
                let b = &space[&k];
                (a.end, a.end == k && a.same_state(b))
            };
            let _ = pe;
            if same {
                let seg = space.remove(&k).expect("listed");
                space.get_mut(&p).expect("listed").end = seg.end;
                continue;
            }
        }
        prev = Some(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{EventView, MemsetView, NewTask, TaskDescriptor, TaskExtra};

    /// Streams as entities (nothing else of the world is needed).
    fn entities(n: u32) -> Vec<Entity> {
        (1..=n).map(|i| Entity::from_raw_u32(i).unwrap()).collect()
    }

    /// A finished task at `seq` on `stream` with `desc` and, for a memset, its write.
    fn task(stream: Entity, seq: u64, desc: TaskDescriptor) -> Task {
        let mut t = Task::from_new(
            NewTask {
                stream,
                seq,
                submit: SimTime::ZERO,
                desc,
                extra: TaskExtra::None,
            },
            Entity::PLACEHOLDER,
            Entity::PLACEHOLDER,
        );
        if let Some(m) = desc.as_memset() {
            t.access.push(Access::write(m.dst, m.bytes));
        }
        t
    }

    fn submit(san: &mut Sanitizer, stream: Entity, seq: u64, wait: Option<(Entity, u64)>) {
        san.submitted(
            Actor::Host,
            stream,
            0,
            seq,
            wait,
            None,
            "t".into(),
            EnqueueSite::Unknown,
        );
    }

    /// A memset of 64 bytes at 0x1000.
    fn write() -> TaskDescriptor {
        TaskDescriptor::memset(MemsetView {
            dst: 0x1000,
            value: 0,
            bytes: 64,
        })
    }

    #[test]
    fn a_wait_orders_its_stream_after_the_record_it_captured_and_nothing_else() {
        let s = entities(3);
        let (a, b, ev) = (s[0], s[1], s[2]);
        let record = TaskDescriptor::event(
            EventView {
                event: ev,
                record: 1,
            },
            false,
        );
        let wait = TaskDescriptor::event(
            EventView {
                event: ev,
                record: 1,
            },
            true,
        );
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        // a: write, record; b: wait, write; then a: a second write nobody waited for.
        submit(&mut san, a, 1, None);
        submit(&mut san, a, 2, None);
        submit(&mut san, b, 1, Some((ev, 1)));
        submit(&mut san, b, 2, None);
        submit(&mut san, a, 3, None);
        for (t, now) in [
            (task(a, 1, write()), 1),
            (task(a, 2, record), 2),
            (task(b, 1, wait), 3),
            (task(b, 2, write()), 4),
        ] {
            assert_eq!(san.completed(&t, true, SimTime(now)), None);
        }
        assert!(san.reports().is_empty(), "{:?}", san.reports());
        san.completed(&task(a, 3, write()), true, SimTime(5));
        assert_eq!(san.reports().len(), 1);
        assert_eq!(san.reports()[0].kind, ReportKind::Race);
        assert_eq!(
            (san.reports()[0].addr, san.reports()[0].bytes),
            (0x1000, 64)
        );
    }

    #[test]
    fn a_free_in_host_order_reports_the_queued_write_that_completes_after_it() {
        let s = entities(1);
        let a = s[0];
        let ctx = Entity::PLACEHOLDER;
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        san.allocated(Actor::Host, ctx, 0, 0x1000, 64, None, EnqueueSite::Unknown);
        submit(&mut san, a, 1, None);
        san.freed(
            Actor::Host,
            ctx,
            0,
            0x1000,
            None,
            EnqueueSite::Unknown,
            SimTime(1),
        );
        assert!(san.reports().is_empty(), "nothing had touched it yet");
        san.completed(&task(a, 1, write()), true, SimTime(2));
        let r = &san.reports()[0];
        assert_eq!(r.kind, ReportKind::UseAfterFree);
        assert_eq!(
            (r.earlier.name.as_str(), r.block),
            ("free", Some((0x1000, 64)))
        );
    }

    #[test]
    fn a_host_read_of_a_pinned_buffer_races_with_its_copy_until_the_host_synchronizes_the_stream() {
        let s = entities(1);
        let a = s[0];
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        submit(&mut san, a, 1, None);
        san.host_copy_submitted(a, 1, (7, 256), (0, 128), true, SimTime(1));
        let read = |san: &mut Sanitizer, range| {
            san.host_accessed(
                Actor::Host,
                (7, 256),
                range,
                false,
                EnqueueSite::Unknown,
                SimTime(1),
            )
        };
        assert_eq!(read(&mut san, (128, 256)), None);
        assert!(
            san.reports().is_empty(),
            "the copy writes only the first half"
        );
        read(&mut san, (64, 256));
        let r = &san.reports()[0];
        assert_eq!((r.kind, r.addr, r.bytes), (ReportKind::Race, 64, 64));
        assert_eq!((r.host_buffer, r.block), (Some(7), Some((0, 256))));
        san.completed(&task(a, 1, write()), true, SimTime(2));
        san.synchronized_stream(Actor::Host, a);
        let kept = san.shadow_stats().intervals;
        read(&mut san, (0, 256));
        assert_eq!(san.reports().len(), 1, "ordered after the copy now");
        assert_eq!(
            san.shadow_stats().intervals,
            kept - 1,
            "and the copy is forgotten"
        );
    }

    /// `actor` enqueues a 64-byte write at 0x1000 at `seq` on `stream` (a synchronous
    /// call's when `sync`), and it completes at `now`.
    fn write_by(san: &mut Sanitizer, actor: Actor, stream: Entity, seq: u64, sync: bool, now: u64) {
        san.submitted(
            actor,
            stream,
            0,
            seq,
            None,
            None,
            format!("{actor:?}").into(),
            EnqueueSite::Unknown,
        );
        if sync {
            san.sync_call_submitted(stream, seq);
        }
        san.completed(&task(stream, seq, write()), true, SimTime(now));
    }

    #[test]
    fn synchronous_writes_from_two_threads_race_and_the_report_names_both_threads() {
        let d = entities(1)[0];
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        let a = Actor::Thread(san.host_thread(10, Some("a")));
        let b = Actor::Thread(san.host_thread(11, Some("b")));
        // Both on one stream (the one synchronous calls run on): its order is the runtime's
        // lock order, not the program's.
        write_by(&mut san, a, d, 1, true, 1);
        write_by(&mut san, b, d, 2, true, 2);
        let r = &san.reports()[0];
        assert_eq!((r.kind, r.addr, r.bytes), (ReportKind::Race, 0x1000, 64));
        let names = [&r.earlier.thread, &r.later.thread].map(|t| t.as_ref().map(|t| t.index));
        assert_eq!(names, [Some(0), Some(1)]);
        assert_eq!(
            r.earlier.thread.as_ref().unwrap().name.as_deref(),
            Some("a")
        );
        assert!(r.to_string().contains("host thread 1 (\"b\")"), "{r}");
        assert!(r.fix.contains("sanitizer_release"), "{}", r.fix);
    }

    #[test]
    fn a_release_and_an_acquire_order_one_thread_s_calls_after_another_s() {
        let d = entities(1)[0];
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        let a = Actor::Thread(san.host_thread(10, None));
        let b = Actor::Thread(san.host_thread(11, None));
        write_by(&mut san, a, d, 1, true, 1);
        san.release(a, 5);
        san.acquire(b, 4); // another key: nothing
        san.acquire(b, 5);
        write_by(&mut san, b, d, 2, true, 2);
        // And back, through a host sync.
        san.host_sync(a);
        write_by(&mut san, a, d, 3, true, 3);
        assert!(san.reports().is_empty(), "{:?}", san.reports());
        // A write a made after its release is not covered by what b acquired.
        write_by(&mut san, a, d, 4, true, 4);
        san.acquire(b, 5);
        write_by(&mut san, b, d, 5, true, 5);
        assert_eq!(san.reports().len(), 1, "{:?}", san.reports());
    }

    #[test]
    fn a_thread_starts_ordered_after_what_every_thread_did_before_its_first_call() {
        let d = entities(1)[0];
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        let a = Actor::Thread(san.host_thread(10, None));
        write_by(&mut san, a, d, 1, true, 1);
        let b = Actor::Thread(san.host_thread(11, None));
        assert_eq!(san.host_thread(11, None), 1, "numbered once");
        write_by(&mut san, b, d, 2, true, 2);
        assert!(san.reports().is_empty(), "{:?}", san.reports());
        assert_eq!(san.host_threads(), 2);
    }

    #[test]
    fn a_synchronous_call_is_ordered_after_its_own_thread_s_device_work_only() {
        let s = entities(2);
        let (stream, d) = (s[0], s[1]);
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        let a = Actor::Thread(san.host_thread(10, None));
        let b = Actor::Thread(san.host_thread(11, None));
        // a: an asynchronous write on its stream, done; b's synchronous write after the
        // implicit device synchronize is not ordered after it.
        write_by(&mut san, a, stream, 1, false, 1);
        san.synchronized_own_work(b, 0);
        write_by(&mut san, b, d, 1, true, 2);
        let r = san.reports()[0].clone();
        assert_eq!(r.kind, ReportKind::Race);
        assert!(r.earlier.stream.is_some(), "{r}");
        assert_eq!(r.later.thread.as_ref().map(|t| t.index), Some(1), "{r}");
        // a's own synchronous call is.
        san.synchronized_own_work(a, 0);
        write_by(&mut san, a, d, 2, true, 3);
        assert_eq!(
            san.reports().len(),
            2,
            "only b's write races with a's: {:?}",
            san.reports()
        );
        assert_eq!(
            san.reports()[1].earlier.thread.as_ref().map(|t| t.index),
            Some(1)
        );
    }

    #[test]
    fn on_a_stream_two_threads_share_a_thread_s_own_work_stops_at_its_own_last_task() {
        let s = entities(2);
        let (shared, d) = (s[0], s[1]);
        let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
        let a = Actor::Thread(san.host_thread(10, None));
        let b = Actor::Thread(san.host_thread(11, None));
        write_by(&mut san, a, shared, 1, false, 1);
        write_by(&mut san, b, shared, 2, false, 2); // stream order: after a's, no race
        assert!(san.reports().is_empty(), "{:?}", san.reports());
        // a's synchronous call waits for the device, but is ordered after its own write only.
        san.synchronized_own_work(a, 0);
        write_by(&mut san, a, d, 1, true, 3);
        let r = &san.reports()[0];
        assert_eq!(r.kind, ReportKind::Race);
        assert_eq!(
            (r.earlier.stream.is_some(), r.earlier.position),
            (true, 2),
            "{r}"
        );
        assert_eq!(r.earlier.thread.as_ref().map(|t| t.index), Some(1), "{r}");
        // b's is ordered after both, once it is told of a's call.
        san.synchronized_own_work(b, 0);
        let found = san.findings();
        san.release(a, 3);
        san.acquire(b, 3);
        write_by(&mut san, b, d, 2, true, 4);
        assert_eq!(san.findings(), found, "{:?}", san.reports());
    }

    #[test]
    fn a_clock_covers_what_it_joined() {
        let mut a = VectorClock::default();
        a.set(0, 3);
        let mut b = VectorClock::default();
        b.set(2, 5);
        a.join(&b);
        assert!(a.covers(0, 3) && a.covers(2, 5) && !a.covers(2, 6) && !a.covers(1, 1));
    }

    #[test]
    fn writes_over_a_range_leave_one_interval() {
        let mut space = BTreeMap::new();
        space.insert(
            0,
            Segment {
                end: 100,
                write: None,
                reads: SmallVec::new(),
                init: true,
            },
        );
        split(&mut space, 40);
        split(&mut space, 60);
        assert_eq!(space.len(), 3);
        coalesce(&mut space, 40, 60);
        assert_eq!(space.len(), 1);
        assert_eq!(space[&0].end, 100);
    }

    #[test]
    fn modes_parse_from_the_environment_spelling() {
        assert_eq!(SanitizerMode::parse("report"), Some(SanitizerMode::Report));
        assert_eq!(SanitizerMode::parse("ERROR"), Some(SanitizerMode::Error));
        assert_eq!(SanitizerMode::parse("off"), Some(SanitizerMode::Off));
        assert_eq!(SanitizerMode::parse("loud"), None);
    }
}
