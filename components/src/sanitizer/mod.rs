//! The stream sanitizer's data: exact happens-before as vector clocks, interval shadow memory,
//! and the reports. One concept over three layers: this module holds the state and every rule
//! (what orders what, what is a race, a use after free, an unordered reuse, an uninitialised
//! read); completion (`systems/src/complete.rs`) feeds it each task as the task finishes, and
//! the API (`engine/src/sanitizer.rs`) feeds it the host's side — submissions, synchronizes,
//! allocations and frees — and hands out the reports. The vector clocks, the shadow's intervals
//! and the configuration are the bevy-free engine in [`npusim_device::sanitizer`]; this module
//! keys them by the world's entities and reads the world's tasks.
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
use npusim_device::sanitizer::{
    EnqueueSite, Epoch, HostThread, Operand, ReportKind, SanitizerConfig, SanitizerMode,
    ShadowStats, VectorClock, coalesce, prune, split,
};
use smallvec::SmallVec;

use crate::access::{Access, AccessMode, Space};
use crate::collective::{CollectiveCall, OpKey, PeerCopy};
use crate::error::NpuError;
use crate::handle::Stream;
use crate::task::{Task, TaskKind};
use crate::time::SimTime;

mod check;
mod complete;
mod host;
mod memory;
mod report;
mod submit;

#[cfg(test)]
mod tests;

pub use report::{ReportSide, SanitizerReport};

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

impl Epoch for AccessRec {
    fn epoch(&self) -> (u32, u64) {
        (self.slot, self.clock)
    }
}

/// One interval of shadow state.
type Segment = npusim_device::sanitizer::Segment<AccessRec>;

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
    Kernel(crate::handle::KernelSlot),
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
            NameKey::Kernel(slot) => match self.kernels.get(slot.index as usize) {
                Some(Some((gen_, n))) if *gen_ == slot.generation => Some(n),
                _ => None,
            },
            NameKey::Call(c) => self.calls.iter().find(|(k, _)| *k == c).map(|(_, n)| n),
        }
    }

    fn insert(&mut self, key: NameKey, name: Arc<str>) {
        match key {
            NameKey::Kernel(slot) => {
                let i = slot.index as usize;
                if self.kernels.len() <= i {
                    self.kernels.resize(i + 1, None);
                }
                self.kernels[i] = Some((slot.generation, name));
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
            floor.meet(c);
        }
        floor
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
