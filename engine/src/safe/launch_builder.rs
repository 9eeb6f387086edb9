//! [`LaunchBuilder`]: a kernel launch assembled argument by argument. It knows which arguments
//! are buffers (checked live and of the stream's context), floats and integers, and checks them
//! against the kernel's declared parameter list ([`NativeKernel::with_params`]) before anything
//! is queued.
//!
//! [`NativeKernel::with_params`]: npusim_components::NativeKernel::with_params

use std::marker::PhantomData;

use bevy_ecs::entity::Entity;
use bytemuck::Pod;
use npusim_components::WorldResources;
use npusim_components::access::{Access, AccessMode, AccessSet};
use npusim_components::task::MAX_ARGS;
use npusim_components::{
    Arg, ContextState, DevicePtr, DeviceState, Kernel, KernelRegistry, NpuError, NpuResult,
};
use smallvec::SmallVec;

use super::{
    DeviceBuffer, DeviceSlice, DeviceSliceMut, DeviceView, DeviceViewMut, NpuFunction, NpuStream,
};

/// One argument of a [`LaunchBuilder`]: its word and, for a buffer, the buffer's owner (its
/// context and the memory epoch it was allocated at, checked at launch) and the bytes it
/// names, with their direction (the launch's access set).
#[derive(Debug)]
pub struct KernelArg<'a> {
    arg: Arg,
    buffer: Option<Owner>,
    access: Option<Access>,
    _borrow: PhantomData<&'a ()>,
}

/// Whose memory a buffer argument is: (runtime id, context, epoch).
type Owner = (u32, Entity, u64);

impl KernelArg<'_> {
    fn scalar(arg: Arg) -> Self {
        // An integer in the heap's range may be an address a kernel dereferences (one taken
        // with `device_ptr()`): the whole block behind it stays the launch's, as for a
        // kernel launched without the builder, so a free cannot release it under the kernel.
        let access =
            (!arg.is_float() && arg.word() >= npusim_device::abi::HEAP_BASE).then(|| Access {
                mode: AccessMode::ReadWrite,
                ..Access::read(arg.word(), 0)
            });
        Self {
            arg,
            buffer: None,
            access,
            _borrow: PhantomData,
        }
    }

    fn buffer<T: Pod>(s: &(impl DeviceSlice<T> + ?Sized), mode: AccessMode) -> Self {
        let ctx = s.context();
        Self {
            arg: Arg::Ptr(s.device_ptr()),
            buffer: Some((ctx.runtime().id(), ctx.entity(), s.epoch())),
            // An empty view names no bytes.
            access: (s.byte_len() > 0).then(|| Access {
                mode,
                ..Access::read(s.device_ptr().0, s.byte_len())
            }),
            _borrow: PhantomData,
        }
    }
}

/// A raw device address ([`DeviceBuffer::into_raw`], [`Memory::malloc`](crate::Memory::malloc)):
/// not checked, and its extent unknown, so the launch's access set takes the whole block behind
/// it as read and written (as it does for an integer argument in the heap's address range).
impl From<DevicePtr> for KernelArg<'_> {
    fn from(p: DevicePtr) -> Self {
        Self {
            arg: Arg::Ptr(p),
            buffer: None,
            access: Some(Access {
                mode: AccessMode::ReadWrite,
                ..Access::read(p.0, 0)
            }),
            _borrow: PhantomData,
        }
    }
}

macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        impl From<$t> for KernelArg<'_> {
            fn from(v: $t) -> Self {
                KernelArg::scalar(Arg::from(v))
            }
        }
        impl From<&$t> for KernelArg<'_> {
            fn from(v: &$t) -> Self {
                KernelArg::scalar(Arg::from(*v))
            }
        }
    )*};
}
scalar_args!(u64, usize, u32, i32, i64, f32);

impl<'a, T: Pod> From<&'a DeviceBuffer<T>> for KernelArg<'a> {
    fn from(b: &'a DeviceBuffer<T>) -> Self {
        KernelArg::buffer(b, AccessMode::Read)
    }
}

impl<'a, T: Pod> From<&'a mut DeviceBuffer<T>> for KernelArg<'a> {
    fn from(b: &'a mut DeviceBuffer<T>) -> Self {
        KernelArg::buffer(&*b, AccessMode::ReadWrite)
    }
}

impl<'a, T: Pod> From<&'a DeviceView<'_, T>> for KernelArg<'a> {
    fn from(b: &'a DeviceView<'_, T>) -> Self {
        KernelArg::buffer(b, AccessMode::Read)
    }
}

impl<'a, T: Pod> From<&'a mut DeviceViewMut<'_, T>> for KernelArg<'a> {
    fn from(b: &'a mut DeviceViewMut<'_, T>) -> Self {
        KernelArg::buffer(&*b, AccessMode::ReadWrite)
    }
}

/// What a [`LaunchBuilder`] launches: a registered [`Kernel`] (native kernels, op kernels, and
/// raw binary functions from [`Binaries::get_function`](crate::Binaries::get_function)) or an
/// [`NpuFunction`], which keeps its module loaded. Sealed.
pub trait Launchable: sealed::Sealed {
    /// The kernel handle.
    fn kernel(&self) -> Kernel;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for npusim_components::Kernel {}
    impl Sealed for crate::safe::NpuFunction {}
}

impl Launchable for Kernel {
    fn kernel(&self) -> Kernel {
        *self
    }
}

impl Launchable for NpuFunction {
    fn kernel(&self) -> Kernel {
        self.raw()
    }
}

/// A kernel launch being assembled on a stream (cudarc's `LaunchArgs`):
/// `stream.launch_builder(&kernel).arg(&a).arg(n).arg(2.5f32).grid(8).launch()?`.
///
/// Buffers are passed by reference (`&buf` for what the kernel reads, `&mut buf` for what it
/// writes), so none can be dropped or moved while the builder holds it; after
/// [`LaunchBuilder::launch`] they may be, since a drop frees in stream order. Integers and
/// `f32`s are passed by value or reference. The grid defaults to one block.
///
/// A kernel that declared its parameters is checked: a wrong count or kind is an
/// `ACL_ERROR_RT_PARAM_INVALID` error and nothing is queued.
///
/// The builder knows the exact bytes of each buffer argument and whether it is written
/// (`&mut`), so the launch carries them as its access set: `&buf` read, `&mut buf` read and
/// written, [`LaunchBuilder::arg_out`] written only; a [`DevicePtr`], or an integer in the
/// heap's address range (perhaps an address from `device_ptr()`), the whole block behind it. A
/// kernel that declares no accesses of its own — a binary kernel before it runs, a native
/// kernel without [`NativeKernel::with_access`](npusim_components::NativeKernel::with_access) —
/// gets these ranges, for deferred free and any reader of access sets, instead of the blocks
/// behind every argument word.
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let stream = ctx.stream()?;
/// let mut y = stream.alloc_zeros::<f32>(4)?;
/// let fill = rt.kernel("fill_f32")?; // (buffer, u64 count, f32 value)
/// let wrong = stream.launch_builder(&fill).arg(&mut y).arg(2.5f32).arg(4usize).launch();
/// assert!(wrong.is_err(), "an f32 where the count goes is refused");
/// stream.launch_builder(&fill).arg(&mut y).arg(4usize).arg(2.5f32).launch()?;
/// assert_eq!(stream.clone_dtoh(&y)?, [2.5; 4]);
/// # Ok::<(), NpuError>(())
/// ```
#[must_use = "a launch builder does nothing until `.launch()`"]
pub struct LaunchBuilder<'a> {
    stream: &'a NpuStream,
    kernel: Kernel,
    args: SmallVec<[Arg; 8]>,
    /// The epochs the buffer arguments were allocated at (all of the stream's context).
    epochs: SmallVec<[u64; 8]>,
    /// The buffer arguments' ranges and directions.
    access: AccessSet,
    /// The first argument error, reported at launch.
    error: Option<NpuError>,
    grid: u32,
    tiling: SmallVec<[u32; 8]>,
}

impl std::fmt::Debug for LaunchBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchBuilder")
            .field("kernel", &self.kernel)
            .field("args", &self.args)
            .field("grid", &self.grid)
            .finish()
    }
}

impl<'a> LaunchBuilder<'a> {
    pub(crate) fn new(stream: &'a NpuStream, kernel: Kernel) -> Self {
        Self {
            stream,
            kernel,
            args: SmallVec::new(),
            epochs: SmallVec::new(),
            access: AccessSet::new(),
            error: None,
            grid: 1,
            tiling: SmallVec::new(),
        }
    }

    /// Appends an argument: a buffer or view (`&buf`, `&mut buf`), an integer or an `f32`.
    pub fn arg(mut self, arg: impl Into<KernelArg<'a>>) -> Self {
        let a = arg.into();
        if let Some((runtime, owner, epoch)) = a.buffer {
            let ctx = self.stream.context();
            if runtime != ctx.runtime().id() || owner != ctx.entity() {
                self.error.get_or_insert(NpuError::WrongContext {
                    handle: format!(
                        "argument {} (a buffer at {})",
                        self.args.len(),
                        a.arg.word()
                    ),
                    owner: format!("context {owner}"),
                    current: format!("{ctx:?}"),
                });
            }
            self.epochs.push(epoch);
        }
        if let Some(range) = a.access {
            if range.bytes == 0 {
                self.access.mark_inexact();
            }
            self.access.push(range);
        }
        self.args.push(a.arg);
        self
    }

    /// Appends a buffer the kernel only writes (every byte of it, before reading any): as
    /// `.arg(&mut buf)`, but the launch's access set names it written, not read — so a reader of
    /// access sets (an uninitialised-read check) does not take the launch for a read of it.
    pub fn arg_out<T: Pod>(self, buf: &'a mut (impl DeviceSliceMut<T> + ?Sized)) -> Self {
        self.arg(KernelArg::buffer(&*buf, AccessMode::Write))
    }

    /// The number of blocks (`blockDim`); 1 unless set.
    pub fn grid(mut self, blocks: u32) -> Self {
        self.grid = blocks;
        self
    }

    /// Tiling words the kernel reads ([`Launch::tiling`](crate::Launch::tiling)).
    pub fn tiling(mut self, words: &[u32]) -> Self {
        self.tiling = words.into();
        self
    }

    /// Checks the arguments and enqueues the launch; returns before anything runs.
    #[track_caller]
    pub fn launch(self) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.args.len() > MAX_ARGS {
            return Err(NpuError::InvalidParam(format!(
                "{} arguments; at most {MAX_ARGS}",
                self.args.len()
            )));
        }
        // One look at the world for every check: the buffers' memory is still theirs (their
        // context's epoch has not moved on), and the arguments fit the declared parameters.
        let ctx = self.stream.context();
        {
            let g = ctx.runtime().lock();
            let epoch = g
                .world
                .get::<ContextState>(ctx.entity())
                .and_then(|c| g.world.get::<DeviceState>(c.device))
                .and_then(|d| d.memory.epoch(ctx.entity()));
            if let Some(i) = self.epochs.iter().position(|&e| Some(e) != epoch) {
                return Err(NpuError::Destroyed(format!(
                    "buffer argument {i}: its context's memory was released (by a fault, or \
                     with the context)"
                )));
            }
            let entry = g.world.res::<KernelRegistry>()?.get(self.kernel)?;
            if let Some(params) = entry.params() {
                if params.len() != self.args.len() {
                    return Err(NpuError::InvalidParam(format!(
                        "kernel {} takes {} arguments, {} given",
                        entry.name,
                        params.len(),
                        self.args.len()
                    )));
                }
                for (i, (p, a)) in params.iter().zip(&self.args).enumerate() {
                    if !p.accepts(*a) {
                        return Err(NpuError::InvalidParam(format!(
                            "kernel {}: argument {i} must be {p}, got {a:?}",
                            entry.name
                        )));
                    }
                }
            }
        }
        let access = Box::new(self.access);
        self.stream
            .launch_declared(self.kernel, self.grid, &self.args, &self.tiling, access)
    }
}
