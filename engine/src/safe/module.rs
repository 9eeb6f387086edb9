//! [`NpuModule`] and [`NpuFunction`]: a loaded kernel binary as a value that owns it, and its
//! functions as values that keep it loaded (cudarc's `CudaModule` and `CudaFunction`). The
//! binary is unloaded when the module and every function taken from it are gone; until then no
//! launch of one of its functions can find it unloaded.

use crate::HostFunc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use npusim_components::{Binary, Kernel, NpuResult, Stream};

use super::NpuContext;

struct ModuleInner {
    ctx: NpuContext,
    raw: Binary,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.ctx.epoch().is_none() {
            return; // the context went, and its binaries with it
        }
        let rt = self.ctx.runtime();
        // The module's functions run only in its context: the streams of the context with work
        // queued are all the binary has to wait for.
        let busy: Vec<Stream> = {
            let g = rt.lock();
            let Some(c) = g.context(self.ctx.entity()) else {
                return;
            };
            c.streams
                .iter()
                .filter(|&&s| g.stream(s).is_some_and(|st| st.completed < st.submitted))
                .map(|&s| Stream::new(rt.id(), s))
                .collect()
        };
        // In stream order, without waiting: a host callback behind each busy stream's work
        // holds a share of the countdown, and the last share to go releases the binary —
        // dropped after its callback ran, or unrun when a fault aborts the callback. (It holds
        // the runtime weakly: queued work must not keep its own world alive.)
        let share = Countdown {
            left: Arc::new(AtomicUsize::new(busy.len() + 1)),
            runtime: rt.weak(),
            binary: self.raw.entity(),
        };
        for s in busy {
            let mine = share.clone_share();
            // A stream that takes no more work drops its share at once (nothing queued on it
            // will run either).
            let _ = self
                .ctx
                .with(|rt| rt.submit(HostFunc::new(s, move || drop(mine))));
        }
        drop(share);
    }
}

/// One share of a dropped module's countdown: the last share dropped releases the binary.
struct Countdown {
    left: Arc<AtomicUsize>,
    runtime: std::sync::Weak<crate::runtime::Shared>,
    binary: bevy_ecs::entity::Entity,
}

impl Countdown {
    /// Another share (the count already includes it).
    fn clone_share(&self) -> Self {
        Self {
            left: self.left.clone(),
            runtime: self.runtime.clone(),
            binary: self.binary,
        }
    }
}

impl Drop for Countdown {
    fn drop(&mut self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1
            && let Some(shared) = self.runtime.upgrade()
        {
            shared.release_binary_soon(self.binary);
        }
    }
}

/// A kernel binary loaded into a context ([`NpuContext::load_module`]; `aclrtBinaryLoad`).
/// Cheap to clone (clones share it), `Send + Sync`. Its functions ([`NpuModule::function`])
/// each hold it: the binary is unloaded when the last of the module's clones and functions is
/// dropped, in stream order — the drop returns at once, and the binary goes when every stream
/// of its context has run the work enqueued before the drop (a host callback behind each busy
/// stream's work; at once when none is busy) — so no launch of one of its functions, queued
/// through the builder or the raw handle, finds its code gone. Work enqueued after the drop
/// through a raw handle fails (`ACL_ERROR_RT_INVALID_HANDLE`), never runs other code. If its
/// context faults first, the aborted work releases it all the same.
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let stream = ctx.stream()?;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kernels/vector_add.o");
/// let module = ctx.load_module_file(path)?;
/// let vadd = module.function("vadd_f32")?;
/// drop(module); // the function keeps the binary loaded
/// let n = 1000;
/// let a = stream.clone_htod(&vec![1.0f32; n])?;
/// let b = stream.clone_htod(&vec![2.0f32; n])?;
/// let mut c = ctx.alloc::<f32>(n)?;
/// stream.launch_builder(&vadd).arg(&a).arg(&b).arg(&mut c).arg(n).grid(4).launch()?;
/// assert!(stream.clone_dtoh(&c)?.iter().all(|&x| x == 3.0));
/// # Ok::<(), NpuError>(())
/// ```
///
/// A function cannot be dropped (or moved) while a launch builder holds it:
///
/// ```compile_fail
/// use npusim_engine::prelude::*;
/// fn f(stream: &NpuStream, module: &NpuModule) -> NpuResult<()> {
///     let vadd = module.function("vadd_f32")?;
///     let launch = stream.launch_builder(&vadd).grid(4);
///     drop(vadd);
///     launch.launch()
/// }
/// ```
///
/// and a module cannot be used once it has moved:
///
/// ```compile_fail
/// use npusim_engine::prelude::*;
/// fn f(module: NpuModule) -> NpuResult<NpuFunction> {
///     drop(module);
///     module.function("vadd_f32")
/// }
/// ```
#[derive(Clone)]
pub struct NpuModule {
    inner: Arc<ModuleInner>,
}

impl std::fmt::Debug for NpuModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuModule({})", self.inner.raw)
    }
}

/// A function of an [`NpuModule`], launched with
/// [`NpuStream::launch_builder`](super::NpuStream::launch_builder). Cheap to clone,
/// `Send + Sync`; it holds its module, so the binary stays loaded while it lives.
#[derive(Clone)]
pub struct NpuFunction {
    module: NpuModule,
    kernel: Kernel,
    name: Arc<str>,
}

impl std::fmt::Debug for NpuFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuFunction({} of {})", self.name, self.module.inner.raw)
    }
}

impl NpuContext {
    /// Loads a kernel binary (a relocatable RISC-V object or a linked image) into this
    /// context ([`Binaries::load`](crate::Binaries::load)).
    #[track_caller]
    pub fn load_module(&self, bytes: &[u8]) -> NpuResult<NpuModule> {
        let _site = crate::sanitizer::SiteGuard::here();
        let raw = self.with(|rt| rt.binaries().load(bytes))?;
        Ok(NpuModule::new(self.clone(), raw))
    }

    /// Loads a kernel binary from a file
    /// ([`Binaries::load_file`](crate::Binaries::load_file)).
    #[track_caller]
    pub fn load_module_file(&self, path: impl AsRef<std::path::Path>) -> NpuResult<NpuModule> {
        let _site = crate::sanitizer::SiteGuard::here();
        let raw = self.with(|rt| rt.binaries().load_file(path))?;
        Ok(NpuModule::new(self.clone(), raw))
    }
}

impl NpuModule {
    fn new(ctx: NpuContext, raw: Binary) -> Self {
        Self {
            inner: Arc::new(ModuleInner { ctx, raw }),
        }
    }

    /// The context it is loaded in.
    pub fn context(&self) -> &NpuContext {
        &self.inner.ctx
    }

    /// The raw handle, for the ACL-style methods (do not unload it through them: the module
    /// owns it).
    pub fn raw(&self) -> Binary {
        self.inner.raw
    }

    /// The function `name` (`aclrtBinaryGetFunction`);
    /// [`NpuError::KernelNotFound`](crate::NpuError::KernelNotFound)
    /// (`ACL_ERROR_RT_PARAM_INVALID`) when the binary exports no such symbol.
    #[track_caller]
    pub fn function(&self, name: &str) -> NpuResult<NpuFunction> {
        let _site = crate::sanitizer::SiteGuard::here();
        let raw = self.inner.raw;
        let kernel = self
            .inner
            .ctx
            .with(|rt| rt.binaries().get_function(raw, name))?;
        Ok(NpuFunction {
            module: self.clone(),
            kernel,
            name: name.into(),
        })
    }

    /// The names of the functions it exports, with their entry addresses.
    pub fn functions(&self) -> NpuResult<Vec<(String, u64)>> {
        let raw = self.inner.raw;
        self.inner.ctx.with(|rt| rt.binaries().functions(raw))
    }
}

impl NpuFunction {
    /// The module it belongs to.
    pub fn module(&self) -> &NpuModule {
        &self.module
    }

    /// Its symbol name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw kernel handle, for [`Launch`](crate::Launch). It does not
    /// keep the module loaded: once the function and module are gone it is stale (an error).
    pub fn raw(&self) -> Kernel {
        self.kernel
    }
}
