//! Kernel launches and host callbacks, and the one submission path every asynchronous call
//! shares: charge the host clock, take the stream's next sequence number, ring the doorbell.
//! Nothing executes here; the task becomes an entity at the next frame's ingest.

use npusim_components::task::{MAX_ARGS, TaskDescriptor, TaskExtra};
use npusim_components::{
    Arg, Kernel, KernelRegistry, NativeKernel, NpuError, NpuResult, SimTime, Stream, StreamState,
    TaskKind,
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

/// As [`submit`], with the descriptor written in place by `encode` (into zeroed words): a
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

/// Checks that `kernel` may be launched in context `ctx`: it is registered in this runtime and,
/// for a binary kernel, its binary is loaded and is `ctx`'s. Out of line: a launch of a live
/// native kernel never gets here (`KernelRegistry::is_native` answers for it).
#[inline(never)]
fn check_kernel(inner: &Inner, kernel: Kernel, ctx: bevy_ecs::entity::Entity) -> NpuResult<()> {
    let entry = inner.registry().get(kernel)?;
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
    }
    Ok(())
}

impl Runtime {
    /// Registers a native kernel; later launches find it by the returned id or by name.
    pub fn register_kernel(&self, kernel: NativeKernel) -> Kernel {
        let mut g = self.lock();
        let name = kernel.name.clone();
        let k = g.world.resource_mut::<KernelRegistry>().register(kernel);
        g.record(|r, _| {
            r.program_kernel(k);
            crate::record::Call::RegisterKernel { name }
        });
        k
    }

    /// The kernel registered as `name`.
    pub fn kernel(&self, name: &str) -> NpuResult<Kernel> {
        self.lock().world.resource::<KernelRegistry>().lookup(name)
    }

    /// Names of every registered kernel.
    pub fn kernel_names(&self) -> Vec<String> {
        self.lock()
            .world
            .resource::<KernelRegistry>()
            .names()
            .map(str::to_string)
            .collect()
    }

    /// Enqueues `kernel` with `block_dim` blocks and `args` on `stream`. Returns before anything
    /// executes.
    #[track_caller]
    pub fn launch(
        &self,
        kernel: Kernel,
        block_dim: u32,
        args: &[Arg],
        stream: Stream,
    ) -> NpuResult<()> {
        self.launch_with_tiling(kernel, block_dim, args, &[], stream)
    }

    /// As [`Runtime::launch`], with tiling words: a native kernel reads them from
    /// [`KernelCtx::tiling`](npusim_components::KernelCtx); a binary kernel finds their device
    /// address in the `npu.tiling` CSR (`npu_tiling()` in the SDK). At most
    /// [`MAX_TILING`](npusim_components::task::MAX_TILING) (20) words, the room in the task
    /// descriptor; more is `ACL_ERROR_RT_PARAM_INVALID`. (Real CANN passes tiling data as a
    /// byte buffer of the op's own layout, by default at most 2048 bytes, the
    /// `max_tiling_data_size` of `OpImplRegisterV2::Tiling`; npusim's 20 words, 80 bytes, ride
    /// in the task descriptor.)
    #[track_caller]
    pub fn launch_with_tiling(
        &self,
        kernel: Kernel,
        block_dim: u32,
        args: &[Arg],
        tiling: &[u32],
        stream: Stream,
    ) -> NpuResult<()> {
        self.launch_configured(kernel, block_dim, args, tiling, stream, None, None)
    }

    /// As [`Runtime::launch_with_tiling`], with the launch's own AI-core timeout (simulated;
    /// `ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT`): a binary kernel that runs longer fails with
    /// `ACL_ERROR_RT_AICORE_TIMEOUT` whatever the device's kernel timeout. `None`: the
    /// device's.
    #[track_caller]
    pub fn launch_with_timeout(
        &self,
        kernel: Kernel,
        block_dim: u32,
        args: &[Arg],
        tiling: &[u32],
        stream: Stream,
        timeout: Option<SimTime>,
    ) -> NpuResult<()> {
        if timeout == Some(SimTime::ZERO) {
            return Err(NpuError::InvalidParam("a launch timeout of 0".into()));
        }
        self.launch_configured(kernel, block_dim, args, tiling, stream, timeout, None)
    }

    /// Every kernel launch: `access` is the typed launch builder's declared access set (boxed,
    /// so the raw path passes one null word).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[track_caller]
    pub(crate) fn launch_configured(
        &self,
        kernel: Kernel,
        block_dim: u32,
        args: &[Arg],
        tiling: &[u32],
        stream: Stream,
        timeout: Option<SimTime>,
        access: Option<Box<npusim_components::access::AccessSet>>,
    ) -> NpuResult<()> {
        if tiling.len() > npusim_components::task::MAX_TILING {
            return Err(NpuError::InvalidParam(format!(
                "{} tiling words; at most {}",
                tiling.len(),
                npusim_components::task::MAX_TILING
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
        // The host time the charge below returns (nothing moves the clock in between).
        let submit = g.host_now() + SimTime(cost);
        // The stream is checked first, its one lookup is the write; then the kernel, once:
        // later stages use the slot the descriptor names.
        let (mut st, _) = self.check_stream_for_write(&mut g, stream, |inner, ctx| {
            // A native kernel of this runtime, still registered, needs nothing more.
            if inner.registry().is_native(kernel) {
                return Ok(());
            }
            check_kernel(inner, kernel, ctx)
        })?;
        let extra = access.map_or(TaskExtra::None, TaskExtra::Access);
        let s = stream.entity();
        let seq = ring(&mut st, submit, extra, |d| {
            d.encode_kernel(
                kernel.index(),
                kernel.generation(),
                block_dim,
                args.iter().map(|a| (a.word(), a.is_float())),
                tiling,
            );
            d.set_timeout(timeout);
        });
        g.charge(cost);
        if g.sanitize {
            crate::sanitizer::submitted(&mut g, s, seq, std::panic::Location::caller());
        }
        crate::record::record!(g, |r, w| r
            .launch(w, kernel, block_dim, args, tiling, s, timeout));
        Ok(())
    }

    /// Enqueues a host callback on `stream`: it runs on the host, in stream order, after the
    /// stream's earlier work; later work on the stream waits for it (`aclrtLaunchCallback`,
    /// blocking). It runs outside the runtime's lock, so it may call the runtime.
    #[track_caller]
    pub fn launch_host_func(
        &self,
        stream: Stream,
        f: impl FnOnce() + Send + 'static,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, _) = self.check_stream(&g, stream)?;
        let desc = TaskDescriptor::new(TaskKind::HostCallback);
        let extra = TaskExtra::Callback(std::sync::Mutex::new(Some(Box::new(f))));
        let cost = g.costs.call_ns;
        let seq = submit(&mut g, s, desc, extra, cost);
        g.record(|r, _| r.host_func(s, seq));
        Ok(())
    }
}
