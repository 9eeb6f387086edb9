//! The stream sanitizer's API and the host's side of it: what the program reads (the reports,
//! the shadow's size) and the calls that feed the checker from the host — submissions (with
//! where they were made), synchronizes, allocations and frees. The rules live in
//! [`npusim_components::sanitizer`]; completion feeds it each finished task.
//!
//! Off by default ([`RuntimeConfig::sanitizer`](crate::RuntimeConfig::sanitizer), or
//! `NPUSIM_SANITIZE`): no sanitizer state then exists, and each hook is one test of a flag.
//!
//! Each host thread is a thread of the clock: this file numbers the calling thread (cached in
//! a thread-local per runtime), marks the parts of a synchronous copy or memset
//! ([`SyncCallGuard`]) and serves the annotations for hand-offs between threads the runtime
//! cannot see ([`StreamSanitizer::release`](crate::StreamSanitizer::release), [`StreamSanitizer::acquire`](crate::StreamSanitizer::acquire),
//! [`StreamSanitizer::host_sync`](crate::StreamSanitizer::host_sync)).
//!
//! ```
//! use npusim_engine::{Runtime, RuntimeConfig, SanitizerConfig};
//! let rt = Runtime::new(RuntimeConfig {
//!     sanitizer: SanitizerConfig::report(),
//!     ..RuntimeConfig::default()
//! })
//! .unwrap();
//! let (a, b) = (rt.streams().create().unwrap(), rt.streams().create().unwrap());
//! let buf = rt.memory().malloc(4096).unwrap();
//! rt.memory().memset_async(buf, 1, 4096, a).unwrap(); // writes on a ...
//! rt.memory().memset_async(buf, 2, 4096, b).unwrap(); // ... and on b, with no event between
//! rt.synchronize_device().unwrap();
//! let reports = rt.sanitizer().reports();
//! assert_eq!(reports.len(), 1);
//! assert_eq!(reports[0].kind, npusim_engine::ReportKind::Race);
//! assert_eq!((reports[0].addr, reports[0].bytes), (buf.0, 4096));
//! ```

use std::cell::Cell;
use std::panic::Location;

use bevy_ecs::entity::Entity;
use bevy_ecs::world::World;
use npusim_components::collective::CollectiveCall;
use npusim_components::resources::Finished;
use npusim_components::sanitizer::{Actor, NameKey};
use npusim_components::task::CopyDir;
use npusim_components::{
    DeviceState, HostBuffer, KernelRegistry, NpuResult, Sanitizer, SanitizerReport, TaskKind,
};
use npusim_device::sanitizer::{EnqueueSite, SanitizerConfig, ShadowStats};

use crate::callback::current_callback;
use crate::runtime::{Inner, Runtime, Shared};

/// Process-unique host thread numbers (a `ThreadId` is not a number).
static NEXT_THREAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

thread_local! {
    /// Where the current API call was made, when the caller knows better than
    /// `#[track_caller]` (the C API, a synchronous copy that enqueues through a closure).
    static SITE: Cell<Option<EnqueueSite>> = const { Cell::new(None) };
    /// This thread's process-unique number, by which each sanitizer numbers it.
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    /// This thread's index in the sanitizer that last numbered it: (its runtime's id, the
    /// index). Runtime ids are never reused and a runtime's sanitizer is made with it, so the
    /// id names the sanitizer; a thread usually calls one runtime, so one entry answers almost
    /// every lookup without touching the world.
    static THREAD_INDEX: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    /// Whether this thread is inside a synchronous call (a copy or memset that returns when
    /// done), whose task is the thread's own access.
    static SYNC_CALL: Cell<bool> = const { Cell::new(false) };
}

/// While alive, the calls this thread makes are the parts of one synchronous copy or memset
/// (the C API's `aclrtMemcpy` and `aclrtMemset` set it around their enqueue and wait): the
/// task they enqueue is the thread's own access, and the waits inside order the thread only
/// after its own work (see [`Sanitizer::sync_call_submitted`]).
#[must_use = "the call is synchronous only while the guard lives"]
pub struct SyncCallGuard(bool);

impl SyncCallGuard {
    /// Marks this thread's calls as one synchronous call until the guard drops.
    pub fn enter() -> Self {
        SyncCallGuard(SYNC_CALL.with(|c| c.replace(true)))
    }
}

impl Drop for SyncCallGuard {
    fn drop(&mut self) {
        SYNC_CALL.with(|c| c.set(self.0));
    }
}

fn in_sync_call() -> bool {
    SYNC_CALL.try_with(|c| c.get()).unwrap_or(false)
}

/// While alive, API calls on this thread are reported as made at `site` (the C API sets the
/// ACL function and its call number; an outer call keeps its own site for the calls it makes).
#[must_use = "the site holds only while the guard lives"]
pub struct SiteGuard(Option<EnqueueSite>);

impl SiteGuard {
    /// Reports calls on this thread as made at `site` until the guard drops (an enclosing
    /// guard's site wins).
    pub fn enter(site: EnqueueSite) -> Self {
        let previous = SITE.with(|s| s.get());
        if previous.is_none() {
            SITE.with(|s| s.set(Some(site)));
        }
        SiteGuard(previous)
    }

    /// As [`SiteGuard::enter`] with the Rust caller's location.
    #[track_caller]
    pub fn here() -> Self {
        let l = Location::caller();
        Self::enter(EnqueueSite::Rust {
            file: l.file(),
            line: l.line(),
        })
    }
}

impl Drop for SiteGuard {
    fn drop(&mut self) {
        SITE.with(|s| s.set(self.0));
    }
}

/// Reports logged by every runtime of the process so far (a test of whole programs reads it).
static FOUND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many sanitizer reports every runtime of this process has found so far.
pub fn reports_found() -> u64 {
    FOUND.load(std::sync::atomic::Ordering::Relaxed)
}

/// The configuration `NPUSIM_SANITIZE` (`off`, `report` or `error`) and
/// `NPUSIM_SANITIZE_UNINIT` (`1`: also uninitialised reads) spell, printing each report as it
/// is found; `None` for a mode it does not know.
pub fn config_from(mode: &str, uninit: Option<String>) -> Option<SanitizerConfig> {
    let mode = npusim_device::sanitizer::SanitizerMode::parse(mode)?;
    Some(SanitizerConfig {
        mode,
        uninitialized: uninit.is_some_and(|v| matches!(v.trim(), "1" | "on" | "true")),
        print: true,
    })
}

/// The default of [`RuntimeConfig::sanitizer`](crate::RuntimeConfig::sanitizer): off, or what
/// `NPUSIM_SANITIZE` says (so any program can be run under the sanitizer without a change).
pub fn default_config() -> SanitizerConfig {
    std::env::var("NPUSIM_SANITIZE")
        .ok()
        .and_then(|m| config_from(&m, std::env::var("NPUSIM_SANITIZE_UNINIT").ok()))
        .unwrap_or_default()
}

/// Runtimes of the process whose sanitizer is on: a host access to pinned memory names no
/// runtime, so it is checked against each of them.
static WATCHING: std::sync::Mutex<Vec<std::sync::Weak<Shared>>> = std::sync::Mutex::new(Vec::new());
/// How many runtimes [`WATCHING`] holds (0: a host access costs one load).
static WATCHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Notes `rt`, whose sanitizer is on, as one host accesses to pinned memory are checked in.
pub(crate) fn watch(rt: &Runtime) {
    let mut w = WATCHING.lock().unwrap_or_else(|p| p.into_inner());
    w.retain(|r| r.strong_count() > 0);
    w.push(rt.weak());
    WATCHED.store(w.len(), std::sync::atomic::Ordering::Release);
}

/// The copy just submitted at `seq` on `stream` moves `bytes` bytes at `offset` of host
/// buffer `host`, writing them when `writes` (device to host). Only pinned memory is tracked
/// (a pageable copy stages its bytes at the call).
pub(crate) fn host_copy(
    inner: &mut Inner,
    stream: Entity,
    seq: u64,
    (host, offset, bytes): (&HostBuffer, u64, u64),
    writes: bool,
) {
    // A synchronous call's copy is done when the call returns: nothing is left queued.
    if !host.is_pinned() || !inner.sanitize || (in_sync_call() && current_callback().is_none()) {
        return;
    }
    let len = host.len() as u64;
    let now = inner.host_now();
    if let Some(mut san) = sanitizer(inner) {
        let range = (offset, offset.saturating_add(bytes));
        san.host_copy_submitted(stream, seq, (host.id(), len), range, writes, now);
    }
    flush(inner);
}

/// Pinned host buffer `host` was freed.
pub(crate) fn host_freed(inner: &mut Inner, host: &HostBuffer) {
    if let Some(mut san) = sanitizer(inner) {
        san.host_freed(host.id());
    }
}

/// The calling thread reads (or writes, `writes`) bytes `range` of host buffer `host` itself,
/// at `caller`: checked against the queued copies of every runtime whose sanitizer is on. In
/// error mode a race fails the access with `SanitizerViolation`.
pub(crate) fn host_accessed(
    host: &HostBuffer,
    range: (u64, u64),
    writes: bool,
    caller: &'static Location<'static>,
) -> NpuResult<()> {
    if WATCHED.load(std::sync::atomic::Ordering::Acquire) == 0 || !host.is_pinned() {
        return Ok(());
    }
    let runtimes: Vec<Runtime> = {
        let mut w = WATCHING.lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|r| r.strong_count() > 0);
        WATCHED.store(w.len(), std::sync::atomic::Ordering::Release);
        w.iter()
            .filter_map(std::sync::Weak::upgrade)
            .map(Runtime::from_shared)
            .collect()
    };
    let site = site(caller);
    for rt in runtimes {
        let mut g = rt.lock();
        let who = actor(&mut g);
        let now = g.host_now();
        let err = sanitizer(&mut g).and_then(|mut san| {
            let buffer = (host.id(), host.len() as u64);
            san.host_accessed(who, buffer, range, writes, site, now)
        });
        flush(&mut g);
        if let Some(e) = err {
            return Err(e);
        }
    }
    Ok(())
}

/// The calling thread reads (or writes, `writes`) `bytes` bytes at `offset` of pinned host
/// buffer `host` itself, outside a copy (the C API's `aclrtMemset` and host-to-host
/// `aclrtMemcpy` on `aclrtMallocHost` memory): checked, and kept as the thread's own access,
/// as [`PinnedBuffer`](crate::safe::PinnedBuffer)'s reads and writes are. In error mode a
/// race fails the access with `SanitizerViolation`. One load when no sanitizer is on.
#[track_caller]
pub fn host_access(host: &HostBuffer, offset: u64, bytes: u64, writes: bool) -> NpuResult<()> {
    let range = (offset, offset.saturating_add(bytes));
    host_accessed(host, range, writes, Location::caller())
}

/// The site of a call whose `#[track_caller]` location is `caller`.
fn site(caller: &'static Location<'static>) -> EnqueueSite {
    SITE.with(|s| s.get()).unwrap_or(EnqueueSite::Rust {
        file: caller.file(),
        line: caller.line(),
    })
}

/// Who is calling: the host callback this thread runs, or the host thread itself (numbered
/// by the sanitizer on its first call). Only called with the sanitizer on.
fn actor(inner: &mut Inner) -> Actor {
    match current_callback() {
        Some((rt, stream, seq)) if rt == inner.runtime_id => Actor::Callback { stream, seq },
        _ => host_thread(inner),
    }
}

/// The calling host thread, as the sanitizer numbers it.
fn host_thread(inner: &mut Inner) -> Actor {
    let runtime = inner.runtime_id;
    let (cached, index) = THREAD_INDEX.with(|c| c.get());
    if cached == runtime {
        return Actor::Thread(index);
    }
    let key = THREAD.with(|k| *k);
    let Some(mut san) = sanitizer(inner) else {
        return Actor::Host;
    };
    let index = san.host_thread(key, std::thread::current().name());
    THREAD_INDEX.with(|c| c.set((runtime, index)));
    Actor::Thread(index)
}

/// The calling thread chose a current context (its first call, usually): numbered now, it
/// starts ordered after what every host thread did so far, as a thread just spawned.
pub(crate) fn thread_seen(inner: &mut Inner) {
    if inner.sanitize && current_callback().is_none() {
        host_thread(inner);
    }
}

/// The sanitizer, when it is on.
fn sanitizer(inner: &mut Inner) -> Option<bevy_ecs::world::Mut<'_, Sanitizer>> {
    if !inner.sanitize {
        return None;
    }
    sanitizer_of(&mut inner.world)
}

/// The sanitizer in `world`, if it is on.
fn sanitizer_of(world: &mut World) -> Option<bevy_ecs::world::Mut<'_, Sanitizer>> {
    let f = world.get_resource_mut::<Finished>()?;
    f.sanitizer.as_ref()?;
    Some(f.map_unchanged(|f| &mut **f.sanitizer.as_mut().expect("checked")))
}

/// The sanitizer in `world`, read-only, if it is on.
pub(crate) fn sanitizer_ref(world: &World) -> Option<&Sanitizer> {
    world.get_resource::<Finished>()?.sanitizer.as_deref()
}

/// Installs the sanitizer in a new runtime's world when `config` turns it on.
pub(crate) fn install(inner: &mut Inner, config: SanitizerConfig) {
    if config.on() {
        let id = inner.runtime_id;
        inner.world.resource_mut::<Finished>().sanitizer =
            Some(Box::new(Sanitizer::new(config, id)));
        inner.sanitize = true;
    }
}

/// A task was just pushed at `seq` on `stream`'s doorbell, by a call made at `caller`.
/// (Kept out of line: the submission path it hangs off stays as small as without it.)
#[cold]
#[inline(never)]
pub(crate) fn submitted(
    inner: &mut Inner,
    stream: Entity,
    seq: u64,
    caller: &'static Location<'static>,
) {
    let actor = actor(inner);
    let sync = in_sync_call() && matches!(actor, Actor::Thread(_));
    let Some(st) = inner.stream(stream) else {
        return;
    };
    let device = st.device_index;
    let Some(new) = st.doorbell.last() else {
        return;
    };
    let desc = new.descriptor();
    let kind = desc.task_kind().unwrap_or(TaskKind::Kernel);
    let wait = (kind == TaskKind::EventWait)
        .then(|| desc.as_event().map(|e| (e.event, e.record)))
        .flatten();
    let collective = CollectiveCall::decode(&desc);
    let site = site(caller);
    let key = match kind {
        TaskKind::Kernel => NameKey::Kernel(desc.kernel_slot()),
        TaskKind::Memcpy => NameKey::Call(match desc.copy_dir() {
            Some(CopyDir::HostToDevice) => "memcpy host to device",
            Some(CopyDir::DeviceToHost) => "memcpy device to host",
            Some(CopyDir::DeviceToDevice) => "memcpy device to device",
            _ => "memcpy_peer",
        }),
        TaskKind::Collective => {
            NameKey::Call(collective.as_ref().map_or("collective", |c| c.kind.name()))
        }
        TaskKind::HostCallback => NameKey::Call("host callback"),
        other => NameKey::Call(other.name()),
    };
    let world = &mut inner.world;
    let Some(cached) = sanitizer_ref(world).map(|s| s.cached_name(key)) else {
        return;
    };
    // A kernel's name is looked up in the registry once per kernel.
    let made = cached.is_none().then(|| match key {
        NameKey::Kernel(slot) => world
            .get_resource::<KernelRegistry>()
            .and_then(|r| r.resolve(slot))
            .map_or_else(|| "unknown kernel".to_string(), |e| e.name.clone()),
        NameKey::Call(n) => n.to_string(),
    });
    let Some(mut san) = sanitizer_of(world) else {
        return;
    };
    let name = match cached {
        Some(n) => n,
        None => san.name(key, || made.unwrap_or_default()),
    };
    san.submitted(
        actor,
        stream,
        device,
        seq,
        wait,
        collective.as_ref(),
        name,
        site,
    );
    if sync {
        san.sync_call_submitted(stream, seq);
    }
}

/// The calling thread synchronized with everything `stream` has completed. (Inside a
/// synchronous call, the wait for the call's own task orders the thread after nothing more.)
pub(crate) fn synchronized_stream(inner: &mut Inner, stream: Entity) {
    if !inner.sanitize {
        return;
    }
    let actor = actor(inner);
    if in_sync_call() && matches!(actor, Actor::Thread(_)) {
        return;
    }
    if let Some(mut san) = sanitizer(inner) {
        san.synchronized_stream(actor, stream);
    }
}

/// The calling thread synchronized with device `device` (`None`: every device). Inside a
/// synchronous call, only with its own work there.
pub(crate) fn synchronized_device(inner: &mut Inner, device: Option<u32>) {
    if !inner.sanitize {
        return;
    }
    let actor = actor(inner);
    let own = in_sync_call() && matches!(actor, Actor::Thread(_));
    if let Some(mut san) = sanitizer(inner) {
        match device {
            Some(d) if own => san.synchronized_own_work(actor, d),
            _ => san.synchronized_device(actor, device),
        }
    }
}

/// The calling thread synchronized with record `record` of `event`.
pub(crate) fn synchronized_event(inner: &mut Inner, event: Entity, record: u64) {
    if !inner.sanitize {
        return;
    }
    let actor = actor(inner);
    if let Some(mut san) = sanitizer(inner) {
        san.synchronized_event(actor, event, record);
    }
}

/// What a host call on the block at `base` in `ctx` tells the sanitizer: who calls, the
/// block's device and size, the stream position it is ordered behind, and the call's site.
fn host_call(
    inner: &mut Inner,
    ctx: Entity,
    base: u64,
    stream: Option<Entity>,
    caller: &'static Location<'static>,
) -> Option<HostCall> {
    let (device, size) = block_of(inner, ctx, base)?;
    let at = stream.and_then(|s| inner.stream(s).map(|st| (s, st.submitted)));
    Some((actor(inner), device, size, at, site(caller)))
}

/// (who, device index, block size, stream position, site) of a host call on a block.
type HostCall = (Actor, u32, u64, Option<(Entity, u64)>, EnqueueSite);

/// A block at `base` was allocated in `ctx` (stream-ordered behind `stream`'s submitted
/// position when given).
pub(crate) fn allocated(
    inner: &mut Inner,
    ctx: Entity,
    base: u64,
    stream: Option<Entity>,
    caller: &'static Location<'static>,
) {
    if !inner.sanitize {
        return;
    }
    let Some((actor, device, size, at, site)) = host_call(inner, ctx, base, stream, caller) else {
        return;
    };
    if let Some(mut san) = sanitizer(inner) {
        san.allocated(actor, ctx, device, base, size, at, site);
    }
}

/// The block at `base` in `ctx` is being freed (behind `stream`'s submitted position when
/// given). Called before the free, while the block is still live.
pub(crate) fn freed(
    inner: &mut Inner,
    ctx: Entity,
    base: u64,
    stream: Option<Entity>,
    caller: &'static Location<'static>,
) {
    if !inner.sanitize {
        return;
    }
    let Some((actor, device, _, at, site)) = host_call(inner, ctx, base, stream, caller) else {
        return;
    };
    let now = inner.host_now();
    if let Some(mut san) = sanitizer(inner) {
        san.freed(actor, ctx, device, base, at, site, now);
    }
    flush(inner);
}

/// The block at `base` in `ctx` (on device entity `device`) was just freed behind every
/// stream position that may name it: `positions`, how far each stream of the context was
/// submitted.
pub(crate) fn freed_behind_uses(
    inner: &mut Inner,
    ctx: Entity,
    base: u64,
    device: Entity,
    positions: &[(Entity, u64)],
    caller: &'static Location<'static>,
) {
    if !inner.sanitize {
        return;
    }
    let actor = actor(inner);
    let Some(d) = inner.world.get::<DeviceState>(device) else {
        return;
    };
    let index = d.index;
    let site = site(caller);
    let now = inner.host_now();
    if let Some(mut san) = sanitizer(inner) {
        san.freed_behind(actor, ctx, index, base, positions, site, now);
    }
    flush(inner);
}

/// A stream is being destroyed.
pub(crate) fn stream_destroyed(inner: &mut Inner, stream: Entity) {
    if let Some(mut san) = sanitizer(inner) {
        san.stream_destroyed(stream);
    }
}

/// Context `ctx` is being destroyed, with its `streams`.
pub(crate) fn context_destroyed(inner: &mut Inner, ctx: Entity, streams: &[Entity]) {
    if let Some(mut san) = sanitizer(inner) {
        san.context_destroyed(ctx, streams);
    }
}

/// `ctx`'s memory on device entity `device` was trimmed: freed blocks that went back to the
/// pool are forgotten (their addresses may come back only through a new allocation).
pub(crate) fn trimmed(inner: &mut Inner, ctx: Entity, device: Entity) {
    if !inner.sanitize {
        return;
    }
    let world = &mut inner.world;
    // Without the finished list (an embedder removed it) the sanitizer went with it.
    world.try_resource_scope(|world, mut finished: bevy_ecs::world::Mut<Finished>| {
        let (Some(san), Some(d)) = (
            finished.sanitizer.as_deref_mut(),
            world.get::<DeviceState>(device),
        ) else {
            return;
        };
        let m = &d.memory;
        san.forget_released(ctx, |base| {
            m.block_containing(base, ctx).is_none() && m.pending_positions(base, ctx).is_empty()
        });
    });
}

/// An event is being destroyed.
pub(crate) fn event_destroyed(inner: &mut Inner, event: Entity) {
    if let Some(mut san) = sanitizer(inner) {
        san.event_destroyed(event);
    }
}

/// Logs (and prints, when asked) the reports found since the last flush.
pub(crate) fn flush(inner: &mut Inner) {
    let Some(mut san) = sanitizer(inner) else {
        return;
    };
    let print = san.config().print;
    for r in san.fresh_reports() {
        FOUND.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        log::warn!("{r}");
        if print {
            eprintln!("{r}");
        }
    }
}

/// (device index, block size) of the live block at `base` in `ctx`.
fn block_of(inner: &Inner, ctx: Entity, base: u64) -> Option<(u32, u64)> {
    let device = inner
        .world
        .get::<npusim_components::ContextState>(ctx)?
        .device;
    let d = inner.world.get::<DeviceState>(device)?;
    let b = d.memory.block_containing(base, ctx)?;
    Some((d.index, b.size))
}

impl Runtime {
    /// Runs `f` on the sanitizer, if it is on, as the calling thread.
    fn annotate(&self, f: impl FnOnce(&mut Sanitizer, Actor)) {
        let mut g = self.lock();
        if !g.sanitize {
            return;
        }
        let actor = actor(&mut g);
        if let Some(mut san) = sanitizer(&mut g) {
            f(&mut san, actor);
        }
    }
}

/// The stream sanitizer's reports and its host-side synchronization annotations.
/// Reached through [`Runtime::sanitizer`].
#[derive(Clone, Copy)]
pub struct StreamSanitizer<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// The stream sanitizer's reports and annotations.
    pub fn sanitizer(&self) -> StreamSanitizer<'_> {
        StreamSanitizer { rt: self }
    }
}

impl StreamSanitizer<'_> {
    /// Every stream-sanitizer report so far, in the order they were found (empty when the
    /// sanitizer is off).
    pub fn reports(&self) -> Vec<SanitizerReport> {
        sanitizer_ref(&self.rt.lock().world).map_or_else(Vec::new, |s| s.reports().to_vec())
    }

    /// Takes the stream-sanitizer reports, leaving none.
    pub fn take_reports(&self) -> Vec<SanitizerReport> {
        sanitizer_of(&mut self.rt.lock().world).map_or_else(Vec::new, |mut s| s.take_reports())
    }

    /// How the stream sanitizer runs (off unless the runtime was built with it).
    pub fn config(&self) -> SanitizerConfig {
        sanitizer_ref(&self.rt.lock().world).map_or_else(SanitizerConfig::default, |s| s.config())
    }

    /// Tells the stream sanitizer of a hand-off it cannot see, as `AnnotateHappensBefore`
    /// does for ThreadSanitizer: everything the calling thread is ordered after so far —
    /// its own calls included — is published under `key`; a later
    /// [`StreamSanitizer::acquire`](crate::StreamSanitizer::acquire) of the same key, on any thread, is ordered after it.
    /// Call it just before the hand-off (sending on a channel, unlocking, a barrier). A no-op
    /// when the sanitizer is off.
    ///
    /// ```
    /// use npusim_engine::{Runtime, RuntimeConfig, SanitizerConfig};
    /// let rt = Runtime::new(RuntimeConfig {
    ///     sanitizer: SanitizerConfig::report(),
    ///     ..RuntimeConfig::default()
    /// })
    /// .unwrap();
    /// let buf = rt.memory().malloc(256).unwrap();
    /// let (ready, ready_rx) = std::sync::mpsc::channel();
    /// let (done, done_rx) = std::sync::mpsc::channel();
    /// std::thread::scope(|s| {
    ///     let rt = &rt;
    ///     s.spawn(move || {
    ///         rt.contexts().set_device(0).unwrap(); // the sanitizer knows this thread from here on
    ///         ready.send(()).unwrap();
    ///         done_rx.recv().unwrap(); // the main thread's copy is done ...
    ///         rt.sanitizer().acquire(7); // ... and the sanitizer is told so
    ///         rt.memory().memcpy_htod(buf, &[2u8; 256]).unwrap();
    ///     });
    ///     ready_rx.recv().unwrap();
    ///     rt.memory().memcpy_htod(buf, &[1u8; 256]).unwrap();
    ///     rt.sanitizer().release(7);
    ///     done.send(()).unwrap();
    /// });
    /// assert!(rt.sanitizer().reports().is_empty());
    /// ```
    pub fn release(&self, key: u64) {
        if WATCHED.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            self.rt.annotate(|san, actor| san.release(actor, key));
        }
    }

    /// Orders the calling thread after everything published under `key` by
    /// [`StreamSanitizer::release`](crate::StreamSanitizer::release) so far (as ThreadSanitizer's `AnnotateHappensAfter`).
    /// Call it just after the hand-off (receiving, locking). A no-op when the sanitizer is
    /// off, or when nothing was published under `key`.
    pub fn acquire(&self, key: u64) {
        if WATCHED.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            self.rt.annotate(|san, actor| san.acquire(actor, key));
        }
    }

    /// Orders the calling thread after everything every host thread did so far: call it
    /// after joining threads (`JoinHandle::join`, the end of `std::thread::scope`) or
    /// meeting them at a barrier. A no-op when the sanitizer is off.
    pub fn host_sync(&self) {
        if WATCHED.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            self.rt.annotate(Sanitizer::host_sync);
        }
    }

    /// The sanitizer's shadow memory in use (all zero when it is off).
    pub fn shadow(&self) -> ShadowStats {
        sanitizer_ref(&self.rt.lock().world).map_or_else(ShadowStats::default, |s| s.shadow_stats())
    }
}
