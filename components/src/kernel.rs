//! Kernels: the registry of what can be launched, and the view a native kernel gets of its
//! launch (arguments, block dim, tiling words, device memory). A native kernel is a Rust
//! function; it reads and writes simulated device memory through typed, bounds-checked views,
//! so a wrong pointer is a fault of that task, never a crash of the host.

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use crate::error::{NpuError, NpuResult};
use crate::handle::{DevicePtr, Kernel};
use crate::memory::{AccessFault, DeviceMemory};

/// A kernel argument, packed into one 64-bit word of the task descriptor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A device pointer.
    Ptr(DevicePtr),
    /// An unsigned integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A single-precision float (passed in a float register to binary kernels).
    F32(f32),
}

impl Arg {
    /// The descriptor word for this argument.
    pub fn word(self) -> u64 {
        match self {
            Arg::Ptr(p) => p.0,
            Arg::U64(v) => v,
            Arg::I64(v) => v as u64,
            Arg::F32(v) => v.to_bits() as u64,
        }
    }

    /// Whether this argument travels in a float register.
    pub fn is_float(self) -> bool {
        matches!(self, Arg::F32(_))
    }
}

impl From<DevicePtr> for Arg {
    fn from(p: DevicePtr) -> Self {
        Arg::Ptr(p)
    }
}

impl From<u64> for Arg {
    fn from(v: u64) -> Self {
        Arg::U64(v)
    }
}

impl From<usize> for Arg {
    fn from(v: usize) -> Self {
        Arg::U64(v as u64)
    }
}

impl From<u32> for Arg {
    fn from(v: u32) -> Self {
        Arg::U64(v as u64)
    }
}

impl From<i32> for Arg {
    fn from(v: i32) -> Self {
        Arg::I64(v as i64)
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::I64(v)
    }
}

impl From<f32> for Arg {
    fn from(v: f32) -> Self {
        Arg::F32(v)
    }
}

/// Why a kernel stopped abnormally. The runtime turns it into the task's error code.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelFault {
    /// A memory access outside the context's live allocations.
    Memory(AccessFault),
    /// Integer division by zero (an NPU trap).
    DivideByZero,
    /// The kernel ran past its time budget (watchdog).
    Timeout(String),
    /// The kernel's arguments are unusable (too few, wrong shape).
    BadArgs(String),
    /// Any other trap (illegal instruction, ebreak, kernel-reported abort).
    Trap(String),
    /// A fault the kernel reports with its final error (a shape past its buffer, a shape that
    /// shape propagation rejected): the task fails with exactly this error.
    Raised(Box<NpuError>),
}

impl From<AccessFault> for KernelFault {
    fn from(f: AccessFault) -> Self {
        KernelFault::Memory(f)
    }
}

impl KernelFault {
    /// The error a task that faulted this way fails with.
    pub fn into_error(self, kernel: &str) -> NpuError {
        let kernel = kernel.to_string();
        match self {
            KernelFault::Memory(f) => NpuError::AicoreException {
                kernel,
                detail: f.to_string(),
            },
            KernelFault::BadArgs(d) => NpuError::AicoreException { kernel, detail: d },
            KernelFault::DivideByZero => NpuError::AicoreTrap {
                kernel,
                detail: "integer division by zero".into(),
            },
            KernelFault::Trap(d) => NpuError::AicoreTrap { kernel, detail: d },
            KernelFault::Timeout(d) => NpuError::AicoreTimeout { kernel, detail: d },
            KernelFault::Raised(e) => *e,
        }
    }
}

/// What a native kernel sees when it runs: its launch and the device memory of its context.
pub struct KernelCtx<'a> {
    /// Argument words, in launch order.
    pub args: &'a [u64],
    /// Blocks of the launch.
    pub block_dim: u32,
    /// Tiling words computed for this launch (empty without a tiling function).
    pub tiling: &'a [u32],
    /// The device's datasheet.
    pub config: &'a DeviceConfig,
    context: Entity,
    memory: &'a mut DeviceMemory,
}

impl<'a> KernelCtx<'a> {
    /// A view for a launch in `context` on `memory`.
    pub fn new(
        args: &'a [u64],
        block_dim: u32,
        tiling: &'a [u32],
        config: &'a DeviceConfig,
        context: Entity,
        memory: &'a mut DeviceMemory,
    ) -> Self {
        Self {
            args,
            block_dim,
            tiling,
            config,
            context,
            memory,
        }
    }

    fn word(&self, i: usize) -> Result<u64, KernelFault> {
        self.args.get(i).copied().ok_or_else(|| {
            KernelFault::BadArgs(format!("argument {i} missing ({} given)", self.args.len()))
        })
    }

    /// Argument `i` as a device address.
    pub fn ptr(&self, i: usize) -> Result<u64, KernelFault> {
        self.word(i)
    }

    /// Argument `i` as an unsigned integer.
    pub fn u64(&self, i: usize) -> Result<u64, KernelFault> {
        self.word(i)
    }

    /// Argument `i` as a count of elements that fits host memory.
    pub fn usize(&self, i: usize) -> Result<usize, KernelFault> {
        let v = self.word(i)?;
        usize::try_from(v)
            .map_err(|_| KernelFault::BadArgs(format!("argument {i} = {v} is too large")))
    }

    /// Argument `i` as a float.
    pub fn f32(&self, i: usize) -> Result<f32, KernelFault> {
        Ok(f32::from_bits(self.word(i)? as u32))
    }

    /// Reads `n` values of `T` at device address `ptr`.
    pub fn load<T: bytemuck::Pod>(&mut self, ptr: u64, n: usize) -> Result<Vec<T>, KernelFault> {
        let bytes = n
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| KernelFault::BadArgs(format!("{n} elements overflow")))?;
        // Check before allocating, so an absurd `n` is a fault rather than a huge allocation.
        self.memory.check(ptr, bytes as u64, self.context)?;
        let mut out = vec![T::zeroed(); n];
        self.memory
            .read(ptr, bytemuck::cast_slice_mut(&mut out), self.context)?;
        Ok(out)
    }

    /// Checks that `bytes` bytes at device address `ptr` lie in one allocation of the launch's
    /// context, without touching them: what a kernel calls before building a host buffer whose
    /// size comes from its arguments.
    pub fn check(&self, ptr: u64, bytes: u64) -> Result<(), KernelFault> {
        self.memory.check(ptr, bytes, self.context)?;
        Ok(())
    }

    /// Writes `values` at device address `ptr`.
    pub fn store<T: bytemuck::Pod>(&mut self, ptr: u64, values: &[T]) -> Result<(), KernelFault> {
        self.memory
            .write(ptr, bytemuck::cast_slice(values), self.context)?;
        Ok(())
    }
}

/// The body of a native kernel.
pub type KernelFn = dyn Fn(&mut KernelCtx<'_>) -> Result<(), KernelFault> + Send + Sync;
/// The cost function of a kernel: its total work, from its argument words and block dim.
pub type CostFn = dyn Fn(&[u64], u32) -> KernelCost + Send + Sync;

/// A kernel implemented in Rust.
#[derive(Clone)]
pub struct NativeKernel {
    /// The name it is registered under.
    pub name: String,
    /// The body.
    pub run: Arc<KernelFn>,
    /// The cost function.
    pub cost: Arc<CostFn>,
    /// For a kernel loaded from a binary: the code the AI core runs (then `run` is unused and
    /// the duration comes from the cycles the core counts, not from `cost`).
    pub code: Option<Arc<crate::binary::BinaryCode>>,
}

impl NativeKernel {
    /// A kernel named `name` with body `run` and cost function `cost`.
    pub fn new(
        name: impl Into<String>,
        run: impl Fn(&mut KernelCtx<'_>) -> Result<(), KernelFault> + Send + Sync + 'static,
        cost: impl Fn(&[u64], u32) -> KernelCost + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            run: Arc::new(run),
            cost: Arc::new(cost),
            code: None,
        }
    }
}

impl std::fmt::Debug for NativeKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NativeKernel({})", self.name)
    }
}

/// Every kernel that can be launched, by id and by name.
#[derive(Resource, Default, Debug)]
pub struct KernelRegistry {
    kernels: Vec<NativeKernel>,
    by_name: BTreeMap<String, Kernel>,
}

impl KernelRegistry {
    /// Registers `kernel`; a kernel of the same name is replaced for later lookups.
    pub fn register(&mut self, kernel: NativeKernel) -> Kernel {
        let id = Kernel(self.kernels.len() as u32);
        self.by_name.insert(kernel.name.clone(), id);
        self.kernels.push(kernel);
        id
    }

    /// The kernel registered as `name`.
    pub fn lookup(&self, name: &str) -> NpuResult<Kernel> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| NpuError::KernelNotFound(name.to_string()))
    }

    /// The kernel with id `id`.
    pub fn get(&self, id: Kernel) -> Option<&NativeKernel> {
        self.kernels.get(id.0 as usize)
    }

    /// Names of all registered kernels, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}
