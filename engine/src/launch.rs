//! Kernel launches and host callbacks, and the one submission path every asynchronous call
//! shares: charge the host clock, take the stream's next sequence number, ring the doorbell.
//! Nothing executes here; the task becomes an entity at the next frame's ingest.

/// Most arguments one launch may have, and most tiling words (the room in the task descriptor).
pub use npusim_components::task::{MAX_ARGS, MAX_TILING};
use npusim_components::task::{TaskDescriptor, TaskExtra};
use npusim_components::{
    Arg, Kernel, KernelRegistry, NativeKernel, NpuError, NpuResult, SimTime, Stream, StreamState,
    TaskKind, WorldResources,
};

use crate::runtime::{Inner, Runtime};

/// Most blocks one launch may have (as ACL's `blockDim` limit).
pub const MAX_BLOCK_DIM: u32 = 65_535;

/// Pushes a task for stream `s` onto the doorbell, charging `host_cost_ns` to the host clock.
/// The stream must have been checked.
#[track_caller]
pub(crate) fn submit(
    inner: &mut Inner,
    s: bevy_ecs::entity::Entity,
    desc: TaskDescriptor,
    extra: TaskExtra,
    host_cost_ns: u64,
) -> u64 {
    submit_with(inner, s, extra, host_cost_ns, |d| *d = desc)
}

/// As [`submit`], with the descriptor written in place by `encode` (as
/// [`Doorbell::push_with`](npusim_components::doorbell::Doorbell::push_with) says): a
/// launch then copies its descriptor once, into the doorbell.
#[track_caller]
pub(crate) fn submit_with(
    inner: &mut Inner,
    s: bevy_ecs::entity::Entity,
    extra: TaskExtra,
    host_cost_ns: u64,
    encode: impl FnOnce(&mut TaskDescriptor),
) -> u64 {
    let submit = inner.charge(host_cost_ns);
    let mut st = inner.stream_mut(s).expect("stream checked by caller");
    let seq = ring(&mut st, submit, extra, encode);
    if inner.sanitize {
        crate::sanitizer::submitted(inner, s, seq, std::panic::Location::caller());
    }
    seq
}

/// Takes the stream's next sequence number and pushes the entry onto its doorbell (submitted at
/// host time `submit`, already charged or about to be); returns the sequence number.
#[inline]
fn ring(
    st: &mut StreamState,
    submit: SimTime,
    extra: TaskExtra,
    encode: impl FnOnce(&mut TaskDescriptor),
) -> u64 {
    st.submitted += 1;
    let seq = st.submitted;
    st.doorbell.push_with(seq, submit, extra, encode);
    seq
}

/// The native kernels this runtime's launches have found registered, by registry slot: a launch
/// of one of them looks nothing up. A native kernel's slot is never freed or reused (the
/// registry removes only a binary's functions), so a handle found native stays launchable for
/// as long as the registry it was found in is the world's. Only code outside the runtime can
/// replace the registry (a user system during a frame, an embedder through a
/// [`RuntimeGuard`](crate::RuntimeGuard)), so what is known is forgotten after every frame and
/// when a guard is dropped; the next launch of each kernel checks it again.
#[derive(Debug, Default)]
pub(crate) struct KnownNatives {
    /// Per registry slot: the generation found native, plus one (0: nothing known).
    slots: Vec<u32>,
}

impl KnownNatives {
    /// Whether `kernel`'s slot was found native at `kernel`'s generation since the last
    /// [`Self::forget`] (its runtime is the caller's to check).
    #[inline]
    pub(crate) fn knows(&self, kernel: Kernel) -> bool {
        self.slots.get(kernel.index() as usize) == Some(&kernel.generation().wrapping_add(1))
    }

    /// Notes that `kernel` was found native and registered.
    fn learn(&mut self, kernel: Kernel) {
        let i = kernel.index() as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, 0);
        }
        self.slots[i] = kernel.generation().wrapping_add(1);
    }

    /// Forgets every kernel (the world may have been changed outside the runtime).
    pub(crate) fn forget(&mut self) {
        self.slots.clear();
    }
}

/// Checks that `kernel` may be launched in context `ctx`: it is registered in this runtime and,
/// for a binary kernel, its binary is loaded and is `ctx`'s. Returns whether it is a native
/// kernel (then [`KnownNatives`] may remember it). Out of line: a launch of a known native
/// kernel never gets here.
#[inline(never)]
fn check_kernel(inner: &Inner, kernel: Kernel, ctx: bevy_ecs::entity::Entity) -> NpuResult<bool> {
    let entry = inner.registry()?.get(kernel)?;
    // A binary kernel runs in its binary's context, while the binary is loaded.
    if let Some(code) = entry.code() {
        if inner
            .world
            .get::<npusim_components::binary::BinaryState>(code.binary)
            .is_none()
        {
            return Err(NpuError::Destroyed(format!(
                "the binary of kernel {}",
                entry.name
            )));
        }
        if code.context != ctx {
            return Err(NpuError::WrongContext {
                handle: format!("kernel {}", entry.name),
                owner: format!("context {}", code.context),
                current: format!("context {ctx}"),
            });
        }
        return Ok(false);
    }
    Ok(true)
}

impl Runtime {
    /// The kernel registered as `name`.
    pub fn kernel(&self, name: &str) -> NpuResult<Kernel> {
        self.lock().world.res::<KernelRegistry>()?.lookup(name)
    }

    /// Enqueues `command` — a [`Launch`], a [`HostFunc`], a [`LaunchOp`](crate::LaunchOp) or a
    /// [`Collective`](crate::Collective) — on its stream and returns which task it became.
    /// Returns before anything executes; a command the runtime refuses enqueues nothing and
    /// charges the host clock nothing.
    #[track_caller]
    pub fn submit(&self, command: impl Command) -> NpuResult<Submission> {
        command.enqueue(self)
    }

    /// Every kernel launch, checked and rung.
    #[inline]
    #[track_caller]
    fn enqueue_launch(&self, launch: Launch<'_>) -> NpuResult<Submission> {
        let Launch {
            kernel,
            grid: block_dim,
            args,
            tiling,
            stream,
            timeout,
            access,
        } = launch;
        if timeout == Some(SimTime::ZERO) {
            return Err(NpuError::InvalidParam("a launch timeout of 0".into()));
        }
        if tiling.len() > MAX_TILING {
            return Err(NpuError::InvalidParam(format!(
                "{} tiling words; at most {}",
                tiling.len(),
                MAX_TILING
            )));
        }
        if block_dim == 0 || block_dim > MAX_BLOCK_DIM {
            return Err(NpuError::InvalidParam(format!(
                "block dim {block_dim} is outside 1..={MAX_BLOCK_DIM}"
            )));
        }
        if args.len() > MAX_ARGS {
            return Err(NpuError::InvalidParam(format!(
                "{} arguments; at most {MAX_ARGS}",
                args.len()
            )));
        }
        let mut g = self.lock();
        let cost = g.costs.launch_ns;
        // Charged first, so the host clock is looked at once; a refused launch takes it back.
        let submit = g.charge(cost);
        // The stream is checked first, its one lookup is the write; then the kernel, once:
        // later stages use the slot the descriptor names. A native kernel of this runtime
        // already known to be registered needs nothing more.
        let known = kernel.runtime() == self.id() && g.known_natives.knows(kernel);
        let mut native = known;
        let checked = self.check_stream_for_write(&mut g, stream, |inner, ctx| {
            if !known {
                native = check_kernel(inner, kernel, ctx)?;
            }
            Ok(())
        });
        let (mut st, _) = match checked {
            Ok(found) => found,
            Err(e) => {
                g.set_host_now(submit - SimTime(cost));
                return Err(e);
            }
        };
        let extra = access.map_or(TaskExtra::None, TaskExtra::Access);
        let s = stream.entity();
        let seq = ring(&mut st, submit, extra, |d| {
            d.encode_kernel(
                kernel.slot(),
                block_dim,
                args.iter().map(|a| (a.word(), a.is_float())),
                tiling,
            );
            d.set_timeout(timeout);
        });
        if native && !known {
            g.known_natives.learn(kernel);
        }
        if g.sanitize {
            crate::sanitizer::submitted(&mut g, s, seq, std::panic::Location::caller());
        }
        crate::record::record!(g, |r, w| r
            .launch(w, kernel, block_dim, args, tiling, s, timeout));
        Ok(Submission { stream, seq })
    }

    /// A host callback, checked and rung.
    #[track_caller]
    fn enqueue_host_func(&self, host: HostFunc) -> NpuResult<Submission> {
        let HostFunc { stream, f } = host;
        let mut g = self.lock();
        let (s, _) = self.check_stream(&g, stream)?;
        let desc = TaskDescriptor::new(TaskKind::HostCallback);
        let extra = TaskExtra::Callback(std::sync::Mutex::new(Some(f)));
        let cost = g.costs.call_ns;
        let seq = submit(&mut g, s, desc, extra, cost);
        g.record(|r, _| r.host_func(s, seq));
        Ok(Submission { stream, seq })
    }
}

/// Which task a [`Runtime::submit`] became: its stream and its sequence number there (1-based,
/// in enqueue order; the number a [`Events::stream_wait_record`](crate::Events::stream_wait_record)
/// counts in is the event's, not this).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Submission {
    stream: Stream,
    seq: u64,
}

impl Submission {
    /// The stream the command was enqueued on.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// The task's sequence number on its stream: the stream's first task is 1.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// A submission of task `seq` on `stream` (the other commands' modules make theirs).
    pub(crate) fn new(stream: Stream, seq: u64) -> Self {
        Self { stream, seq }
    }
}

/// Work [`Runtime::submit`] enqueues on a stream. Implemented by the command types of this
/// crate only.
pub trait Command: sealed::Sealed {
    /// Checks the command and rings its stream's doorbell.
    #[doc(hidden)]
    #[track_caller]
    fn enqueue(self, rt: &Runtime) -> NpuResult<Submission>;
}

pub(crate) mod sealed {
    /// Only this crate's commands are [`Command`](super::Command)s.
    pub trait Sealed {}
}

/// A kernel launch (`aclrtLaunchKernel`): `kernel` with `grid` blocks and `args` on `stream`,
/// with optional tiling words and an AI-core timeout.
///
/// ```
/// # use npusim_engine::prelude::*;
/// # let rt = Runtime::new(RuntimeConfig::default())?;
/// # let s = rt.streams().create()?;
/// let noop = rt.kernel("noop")?;
/// let done = rt.submit(Launch::new(noop, 1, &[], s).timeout(SimTime::from_us(10)))?;
/// assert_eq!(done.seq(), 1);
/// # Ok::<(), NpuError>(())
/// ```
#[derive(Debug)]
#[must_use = "a launch does nothing until it is submitted"]
pub struct Launch<'a> {
    kernel: Kernel,
    grid: u32,
    args: &'a [Arg],
    tiling: &'a [u32],
    stream: Stream,
    timeout: Option<SimTime>,
    access: Option<Box<npusim_components::access::AccessSet>>,
}

impl<'a> Launch<'a> {
    /// `kernel` with `grid` blocks (1 ..= [`MAX_BLOCK_DIM`]) and `args` (at most
    /// [`MAX_ARGS`]) on `stream`; no tiling words, the device's kernel timeout.
    pub fn new(kernel: Kernel, grid: u32, args: &'a [Arg], stream: Stream) -> Self {
        Self {
            kernel,
            grid,
            args,
            tiling: &[],
            stream,
            timeout: None,
            access: None,
        }
    }

    /// Tiling words: a native kernel reads them from
    /// [`KernelCtx::tiling`](npusim_components::KernelCtx); a binary kernel finds their device
    /// address in the `npu.tiling` CSR (`npu_tiling()` in the SDK). At most
    /// [`MAX_TILING`] (20) words, the room in the task
    /// descriptor; more is `ACL_ERROR_RT_PARAM_INVALID`. (Real CANN passes tiling data as a
    /// byte buffer of the op's own layout, by default at most 2048 bytes, the
    /// `max_tiling_data_size` of `OpImplRegisterV2::Tiling`; npusim's 20 words, 80 bytes, ride
    /// in the task descriptor.)
    pub fn tiling(mut self, words: &'a [u32]) -> Self {
        self.tiling = words;
        self
    }

    /// The launch's own AI-core timeout (simulated; `ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT`): a
    /// binary kernel that runs longer fails with `ACL_ERROR_RT_AICORE_TIMEOUT` whatever the
    /// device's kernel timeout. `None`: the device's. A timeout of 0 is refused
    /// (`ACL_ERROR_RT_PARAM_INVALID`).
    pub fn timeout(mut self, timeout: impl Into<Option<SimTime>>) -> Self {
        self.timeout = timeout.into();
        self
    }

    /// The access set the typed launch builder (or a recorded launch) declared.
    pub(crate) fn declared(
        mut self,
        access: Option<Box<npusim_components::access::AccessSet>>,
    ) -> Self {
        self.access = access;
        self
    }
}

impl sealed::Sealed for Launch<'_> {}

impl Command for Launch<'_> {
    #[track_caller]
    fn enqueue(self, rt: &Runtime) -> NpuResult<Submission> {
        rt.enqueue_launch(self)
    }
}

/// A host callback (`aclrtLaunchCallback`, blocking): `f` runs on the host, in stream order,
/// after the stream's earlier work; later work on the stream waits for it. It runs outside the
/// runtime's lock, so it may call the runtime.
#[must_use = "a host callback does nothing until it is submitted"]
pub struct HostFunc {
    stream: Stream,
    f: Box<dyn FnOnce() + Send>,
}

impl HostFunc {
    /// `f`, to run on the host once `stream`'s earlier work is done.
    pub fn new(stream: Stream, f: impl FnOnce() + Send + 'static) -> Self {
        Self {
            stream,
            f: Box::new(f),
        }
    }
}

impl std::fmt::Debug for HostFunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostFunc")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl sealed::Sealed for HostFunc {}

impl Command for HostFunc {
    #[track_caller]
    fn enqueue(self, rt: &Runtime) -> NpuResult<Submission> {
        rt.enqueue_host_func(self)
    }
}

/// The kernel registry: native kernels registered by the host program.
/// Reached through [`Runtime::kernels`].
#[derive(Clone, Copy)]
pub struct Kernels<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// The registry of native kernels.
    pub fn kernels(&self) -> Kernels<'_> {
        Kernels { rt: self }
    }
}

impl Kernels<'_> {
    /// Registers a native kernel; later launches find it by the returned id or by name.
    /// If an embedder removed the kernel registry, the kernel is dropped and the handle names
    /// nothing (a launch of it fails); [`Kernels::try_register`](crate::Kernels::try_register) says so instead.
    pub fn register(&self, kernel: NativeKernel) -> Kernel {
        self.try_register(kernel)
            .unwrap_or_else(|_| Kernel::new(self.rt.id(), u32::MAX, u32::MAX))
    }

    /// As [`Kernels::register`](crate::Kernels::register), or [`NpuError::MissingResource`] if an embedder
    /// removed the kernel registry.
    pub fn try_register(&self, kernel: NativeKernel) -> NpuResult<Kernel> {
        let mut g = self.rt.lock();
        let name = kernel.name.clone();
        let k = g.world.res_mut::<KernelRegistry>()?.register(kernel);
        g.record(|r, _| {
            r.program_kernel(k);
            crate::record::Call::RegisterKernel { name }
        });
        Ok(k)
    }

    /// Names of every registered kernel (none if an embedder removed the kernel registry).
    pub fn names(&self) -> Vec<String> {
        self.rt
            .lock()
            .world
            .get_resource::<KernelRegistry>()
            .map_or_else(Vec::new, |r| r.names().map(str::to_string).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::RuntimeConfig;
    use bevy_ecs::prelude::ResMut;

    #[test]
    fn a_kernel_is_known_at_the_generation_it_was_found_until_forgotten() {
        let mut known = KnownNatives::default();
        let k = Kernel::new(1, 3, 5);
        assert!(!known.knows(k));
        known.learn(k);
        assert!(known.knows(k));
        assert!(!known.knows(Kernel::new(1, 3, 6)), "another generation");
        assert!(!known.knows(Kernel::new(1, 2, 5)), "another slot");
        known.forget();
        assert!(!known.knows(k));
    }

    #[test]
    fn a_refused_launch_charges_the_host_nothing_on_either_clock() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let s = rt.streams().create().unwrap();
        let gone = rt.streams().create().unwrap();
        rt.streams().destroy(gone).unwrap();
        let noop = rt.kernel("noop").unwrap();
        let launch_ns = rt.lock_quiet().costs.launch_ns;
        let before = rt.host_now();
        assert!(
            rt.submit(Launch::new(noop, 1, &[], gone)).is_err(),
            "a destroyed stream"
        );
        assert!(
            rt.submit(Launch::new(Kernel::new(rt.id(), 999, 0), 1, &[], s))
                .is_err()
        );
        assert_eq!(rt.host_now(), before);
        rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
        assert_eq!(rt.host_now(), before + SimTime(launch_ns));
        // On a callback's own clock too.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        let (rt2, seen2) = (rt.clone(), seen.clone());
        rt.submit(HostFunc::new(s, move || {
            let t = rt2.host_now();
            let refused = rt2.submit(Launch::new(noop, 1, &[], gone)).is_err();
            let after_refusal = rt2.host_now();
            rt2.submit(Launch::new(noop, 1, &[], s)).unwrap();
            *seen2.lock().unwrap() = Some((refused, after_refusal - t, rt2.host_now() - t));
        }))
        .unwrap();
        rt.streams().synchronize(s).unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            Some((true, SimTime::ZERO, SimTime(launch_ns)))
        );
    }

    /// The registry `rt` starts with, emptied: what an embedder that replaces it leaves.
    fn empty_registry(rt: &Runtime) -> KernelRegistry {
        let mut r = KernelRegistry::default();
        r.set_runtime(rt.id());
        r
    }

    #[test]
    fn a_known_kernel_is_checked_again_once_an_embedder_replaced_the_registry() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let s = rt.streams().create().unwrap();
        let noop = rt.kernel("noop").unwrap();
        rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
        rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
        assert!(rt.lock_quiet().known_natives.knows(noop));
        let empty = empty_registry(&rt);
        rt.lock_world().world_mut().insert_resource(empty);
        assert!(matches!(
            rt.submit(Launch::new(noop, 1, &[], s)),
            Err(NpuError::KernelNotFound(_))
        ));
        // The two launches queued before fail when they come to run: their kernel is gone.
        assert!(matches!(
            rt.synchronize_device(),
            Err(NpuError::Destroyed(_))
        ));
    }

    #[test]
    fn a_known_kernel_is_checked_again_after_a_frame_in_which_a_system_replaced_the_registry() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let s = rt.streams().create().unwrap();
        let noop = rt.kernel("noop").unwrap();
        rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
        let empty = empty_registry(&rt);
        let mut g = rt.lock_world();
        let once = std::sync::Mutex::new(Some(empty));
        g.schedule_mut()
            .add_systems(move |mut r: ResMut<KernelRegistry>| {
                if let Some(empty) = once.lock().unwrap().take() {
                    *r = empty;
                }
            });
        drop(g);
        rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
        assert!(rt.lock_quiet().known_natives.knows(noop));
        rt.step();
        assert!(matches!(
            rt.submit(Launch::new(noop, 1, &[], s)),
            Err(NpuError::KernelNotFound(_))
        ));
    }
}
