//! [`NpuModule`] and [`NpuFunction`]: a loaded kernel binary as a value that owns it, and its
//! functions as values that keep it loaded (cudarc's `CudaModule` and `CudaFunction`). The
//! binary is unloaded when the module and every function taken from it are gone; until then no
//! launch of one of its functions can find it unloaded.

use std::sync::Arc;

use npusim_components::{Binary, Kernel, NpuError, NpuResult};

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
        // `unload_binary` waits for the device's queued work first, so launches of the
        // module's functions that are still queued run with the code in place.
        match self.ctx.with(|rt| rt.unload_binary(self.raw)) {
            Ok(()) | Err(NpuError::Destroyed(_)) => {} // unloaded here, or already by hand
            Err(e) => self.ctx.runtime().keep_drop_error(e),
        }
    }
}

/// A kernel binary loaded into a context ([`NpuContext::load_module`]; `aclrtBinaryLoad`).
/// Cheap to clone (clones share it), `Send + Sync`. Its functions ([`NpuModule::function`])
/// each hold it: the binary is unloaded when the last of the module's clones and functions is
/// dropped — after the device's queued work has run, as `aclrtBinaryUnLoad` does — so a
/// function can never be launched with its code gone. A drop that cannot unload (called from a
/// host callback of the same device, which cannot wait for its own device) keeps the error
/// ([`Runtime::take_drop_errors`](crate::Runtime::take_drop_errors)) and the binary stays
/// loaded until its context is destroyed.
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
    /// context ([`Runtime::load_binary`](crate::Runtime::load_binary)).
    pub fn load_module(&self, bytes: &[u8]) -> NpuResult<NpuModule> {
        let raw = self.with(|rt| rt.load_binary(bytes))?;
        Ok(NpuModule::new(self.clone(), raw))
    }

    /// Loads a kernel binary from a file
    /// ([`Runtime::load_binary_file`](crate::Runtime::load_binary_file)).
    pub fn load_module_file(&self, path: impl AsRef<std::path::Path>) -> NpuResult<NpuModule> {
        let raw = self.with(|rt| rt.load_binary_file(path))?;
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

    /// The function `name` (`aclrtBinaryGetFunction`); [`NpuError::KernelNotFound`]
    /// (`ACL_ERROR_RT_PARAM_INVALID`) when the binary exports no such symbol.
    pub fn function(&self, name: &str) -> NpuResult<NpuFunction> {
        let raw = self.inner.raw;
        let kernel = self.inner.ctx.with(|rt| rt.get_function(raw, name))?;
        Ok(NpuFunction {
            module: self.clone(),
            kernel,
            name: name.into(),
        })
    }

    /// The names of the functions it exports, with their entry addresses.
    pub fn functions(&self) -> NpuResult<Vec<(String, u64)>> {
        let raw = self.inner.raw;
        self.inner.ctx.with(|rt| rt.binary_functions(raw))
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

    /// The raw kernel handle, for [`Runtime::launch`](crate::Runtime::launch). It does not
    /// keep the module loaded: once the function and module are gone it is stale (an error).
    pub fn raw(&self) -> Kernel {
        self.kernel
    }
}
