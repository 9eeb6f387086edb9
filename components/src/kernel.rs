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

use crate::access::{Access, AccessMode, AccessSet};
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
    touched: AccessSet,
}

impl<'a> KernelCtx<'a> {
    /// A view for a launch in `context` on `memory`.
    #[inline]
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
            touched: AccessSet::new(),
        }
    }

    /// What the kernel has loaded and stored so far (one range per call), for checking a
    /// kernel's declared accesses against what it does.
    pub fn touched(&self) -> &AccessSet {
        &self.touched
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
        self.touched.record(Access::read(ptr, bytes as u64));
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
        self.touched
            .record(Access::write(ptr, std::mem::size_of_val(values) as u64));
        Ok(())
    }
}

/// The body of a native kernel.
pub type KernelFn = dyn Fn(&mut KernelCtx<'_>) -> Result<(), KernelFault> + Send + Sync;
/// The cost function of a kernel: its total work, from its argument words and block dim.
pub type CostFn = dyn Fn(&[u64], u32) -> KernelCost + Send + Sync;
/// What a native kernel reads and writes, from its argument words and block dim: it pushes one
/// [`Access`] per buffer argument (see [`NativeKernel::with_access`]).
pub type AccessFn = dyn Fn(&[u64], u32, &mut AccessSet) + Send + Sync;

/// A kernel implemented in Rust.
#[derive(Clone)]
pub struct NativeKernel {
    /// The name it is registered under.
    pub name: String,
    /// The body.
    pub run: Arc<KernelFn>,
    /// The cost function.
    pub cost: Arc<CostFn>,
    /// What it reads and writes (`None`: not declared; the blocks behind its non-float
    /// argument words are taken as read and written).
    pub access: Option<Arc<AccessFn>>,
    /// Its parameter list, when declared ([`NativeKernel::with_params`]): a launch builder
    /// refuses a launch whose arguments do not match it before anything is queued.
    pub params: Option<Arc<[Param]>>,
}

/// The kind of one kernel parameter, as a native kernel declares it
/// ([`NativeKernel::with_params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// A device buffer (a pointer into the launch's context).
    Buffer,
    /// An unsigned integer (a count, a size, an index).
    U64,
    /// A signed integer.
    I64,
    /// A single-precision float (a float register for binary kernels).
    F32,
}

impl Param {
    /// Whether argument `arg` may be passed for this parameter: buffers for buffers, floats for
    /// floats, and an integer for an integer parameter when its value fits the parameter's
    /// signedness (a literal `3` is an `i32`, and should launch a kernel that takes a `u64`).
    pub fn accepts(self, arg: Arg) -> bool {
        match (self, arg) {
            (Param::Buffer, Arg::Ptr(_)) | (Param::F32, Arg::F32(_)) => true,
            (Param::U64, Arg::U64(_)) | (Param::I64, Arg::I64(_)) => true,
            (Param::U64, Arg::I64(v)) => v >= 0,
            (Param::I64, Arg::U64(v)) => v <= i64::MAX as u64,
            _ => false,
        }
    }
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Param::Buffer => "a buffer",
            Param::U64 => "an unsigned integer",
            Param::I64 => "a signed integer",
            Param::F32 => "an f32",
        })
    }
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
            access: None,
            params: None,
        }
    }

    /// Declares the kernel's parameter list, in launch order. A launch builder
    /// (`stream.launch_builder(&kernel)`) checks its arguments' count and kinds against it and
    /// returns an error before anything is queued; the raw `Runtime::submit(Launch)` does not (it
    /// mirrors `aclrtLaunchKernel`, which takes untyped argument slots).
    pub fn with_params(mut self, params: &[Param]) -> Self {
        self.params = Some(params.into());
        self
    }

    /// Declares what the kernel reads and writes: `access` gets the launch's argument words
    /// and block dim and pushes one range per buffer it touches, with its direction. The
    /// declaration is the kernel's contract (its tests should check it): deferred free and any
    /// reader of access sets rely on it.
    pub fn with_access(
        mut self,
        access: impl Fn(&[u64], u32, &mut AccessSet) + Send + Sync + 'static,
    ) -> Self {
        self.access = Some(Arc::new(access));
        self
    }

    /// The access set of a launch with `args` and `block_dim`.
    #[inline]
    pub fn accesses(&self, args: &[u64], float_mask: u32, block_dim: u32, out: &mut AccessSet) {
        match &self.access {
            Some(f) => f(args, block_dim, out),
            None => pointer_blocks(args, float_mask, out),
        }
    }
}

impl std::fmt::Debug for NativeKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NativeKernel({})", self.name)
    }
}

/// The upper bound for a kernel that declared nothing: the block behind every non-float
/// argument word in the heap, read and written.
pub fn pointer_blocks(args: &[u64], float_mask: u32, out: &mut AccessSet) {
    out.mark_inexact();
    for (i, &w) in args.iter().enumerate() {
        if float_mask & (1 << i) == 0 && w >= npusim_device::abi::HEAP_BASE {
            out.push(Access {
                addr: w,
                bytes: 0,
                mode: AccessMode::ReadWrite,
                space: crate::access::Space::Local,
            });
        }
    }
}

/// What a registered kernel runs.
#[derive(Clone, Debug)]
pub enum KernelBody {
    /// A Rust function.
    Native(NativeKernel),
    /// A function of a loaded binary, run by the AI cores.
    Binary(Arc<crate::binary::BinaryCode>),
}

/// One registered kernel.
#[derive(Clone, Debug)]
pub struct KernelEntry {
    /// Its name (a binary function's symbol name).
    pub name: String,
    /// What it runs.
    pub body: KernelBody,
}

impl KernelEntry {
    /// The declared parameter list (native kernels that declared one).
    pub fn params(&self) -> Option<&[Param]> {
        match &self.body {
            KernelBody::Native(k) => k.params.as_deref(),
            KernelBody::Binary(_) => None,
        }
    }

    /// The binary code, for a binary kernel.
    pub fn code(&self) -> Option<&Arc<crate::binary::BinaryCode>> {
        match &self.body {
            KernelBody::Binary(code) => Some(code),
            KernelBody::Native(_) => None,
        }
    }

    /// Whether the kernel declares its accesses itself (a native kernel
    /// [`NativeKernel::with_access`]); otherwise a launch's caller may declare them
    /// ([`crate::TaskExtra::Access`]).
    pub fn declares_access(&self) -> bool {
        matches!(&self.body, KernelBody::Native(k) if k.access.is_some())
    }

    /// The access set of a launch before it runs (exact for a native kernel that declares its
    /// accesses; for a binary kernel, the blocks behind its argument words until the cores
    /// record what it really touched).
    #[inline]
    pub fn accesses(&self, args: &[u64], float_mask: u32, block_dim: u32, out: &mut AccessSet) {
        match &self.body {
            KernelBody::Native(k) => k.accesses(args, float_mask, block_dim, out),
            KernelBody::Binary(_) => pointer_blocks(args, float_mask, out),
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    entry: Option<KernelEntry>,
}

/// Every kernel that can be launched: generational slots, found by handle, by name (native
/// kernels) or by binary and symbol (binary functions, registered once each and removed when
/// their binary is unloaded, so the registry does not grow with repeated lookups).
///
/// A native kernel's slot is never freed or reused: its handle stays valid for as long as the
/// registry (registering another kernel under its name replaces it for lookups only). The
/// runtime's launch path relies on this to check a native kernel once.
#[derive(Resource, Default, Debug)]
pub struct KernelRegistry {
    runtime: u32,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_name: BTreeMap<String, u32>,
    by_function: BTreeMap<(Entity, String), u32>,
}

impl KernelRegistry {
    /// Sets the id of the runtime whose handles this registry makes and accepts.
    pub fn set_runtime(&mut self, runtime: u32) {
        self.runtime = runtime;
    }

    fn handle(&self, index: u32) -> Kernel {
        Kernel::new(self.runtime, index, self.slots[index as usize].generation)
    }

    fn insert(&mut self, entry: KernelEntry) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize].entry = Some(entry);
                i
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: Some(entry),
                });
                self.slots.len() as u32 - 1
            }
        }
    }

    /// Registers `kernel`; a kernel of the same name is replaced for later lookups (launches
    /// of the old handle still run the old kernel).
    pub fn register(&mut self, kernel: NativeKernel) -> Kernel {
        let name = kernel.name.clone();
        let i = self.insert(KernelEntry {
            name: name.clone(),
            body: KernelBody::Native(kernel),
        });
        self.by_name.insert(name, i);
        self.handle(i)
    }

    /// The kernel for function `name` of `binary`: registered on first use, the same handle
    /// on every later call.
    pub fn register_function(
        &mut self,
        binary: Entity,
        name: &str,
        code: impl FnOnce() -> crate::binary::BinaryCode,
    ) -> Kernel {
        if let Some(&i) = self.by_function.get(&(binary, name.to_string())) {
            return self.handle(i);
        }
        let i = self.insert(KernelEntry {
            name: name.to_string(),
            body: KernelBody::Binary(Arc::new(code())),
        });
        self.by_function.insert((binary, name.to_string()), i);
        self.handle(i)
    }

    /// Makes `kernel` findable by `name` too (an op whose kernel is a binary function).
    pub fn alias(&mut self, name: &str, kernel: Kernel) {
        if self.get(kernel).is_ok() {
            self.by_name.insert(name.to_string(), kernel.index());
        }
    }

    /// Removes every function of `binary`: their handles become stale. Returns how many.
    pub fn remove_binary(&mut self, binary: Entity) -> usize {
        let gone: Vec<u32> = self
            .by_function
            .range((binary, String::new())..)
            .take_while(|((b, _), _)| *b == binary)
            .map(|(_, &i)| i)
            .collect();
        self.by_function.retain(|(b, _), _| *b != binary);
        self.by_name.retain(|_, i| !gone.contains(i));
        for &i in &gone {
            let slot = &mut self.slots[i as usize];
            slot.entry = None;
            slot.generation = slot.generation.wrapping_add(1);
            self.free.push(i);
        }
        gone.len()
    }

    /// The kernel registered as `name`.
    pub fn lookup(&self, name: &str) -> NpuResult<Kernel> {
        self.by_name
            .get(name)
            .map(|&i| self.handle(i))
            .ok_or_else(|| NpuError::KernelNotFound(name.to_string()))
    }

    /// The kernel `kernel` names: an error when it is of another runtime, or its binary was
    /// unloaded.
    pub fn get(&self, kernel: Kernel) -> NpuResult<&KernelEntry> {
        if kernel.runtime() != self.runtime {
            return Err(NpuError::ForeignHandle(kernel.to_string()));
        }
        if kernel.index() as usize >= self.slots.len() {
            return Err(NpuError::KernelNotFound(format!(
                "{kernel} was never registered"
            )));
        }
        self.resolve(kernel.slot())
            .ok_or_else(|| NpuError::Destroyed(format!("{kernel} (its binary was unloaded)")))
    }

    /// Whether `kernel` is a registered native kernel of this runtime: what [`Self::get`]
    /// accepts with nothing more to check (a binary kernel also needs its binary loaded and
    /// its context current), in one look at its slot.
    #[inline]
    pub fn is_native(&self, kernel: Kernel) -> bool {
        kernel.runtime() == self.runtime
            && self
                .resolve(kernel.slot())
                .is_some_and(|e| matches!(e.body, KernelBody::Native(_)))
    }

    /// The kernel in `slot` at its generation (what a task descriptor names), if it is
    /// still registered.
    #[inline]
    pub fn resolve(&self, slot: crate::handle::KernelSlot) -> Option<&KernelEntry> {
        let crate::handle::KernelSlot { index, generation } = slot;
        let slot = self.slots.get(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        slot.entry.as_ref()
    }

    /// Names of all native kernels, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Kernels registered now (native kernels and loaded functions).
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::BinaryCode;

    fn code(binary: Entity) -> BinaryCode {
        BinaryCode {
            program: Arc::new(npusim_device::core::Program::decode(0, &[])),
            entry: 0,
            binary,
            context: Entity::PLACEHOLDER,
            kind: Default::default(),
        }
    }

    fn noop(name: &str) -> NativeKernel {
        NativeKernel::new(name, |_| Ok(()), |_, _| KernelCost::default())
    }

    #[test]
    fn a_function_is_registered_once_however_often_it_is_looked_up() {
        let mut r = KernelRegistry::default();
        let b = Entity::from_raw_u32(7).unwrap();
        let k1 = r.register_function(b, "add", || code(b));
        let k2 = r.register_function(b, "add", || code(b));
        assert_eq!(k1, k2);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn unloading_a_binary_makes_its_kernels_stale_and_reuses_their_slots() {
        let mut r = KernelRegistry::default();
        let b = Entity::from_raw_u32(7).unwrap();
        let old = r.register_function(b, "add", || code(b));
        assert_eq!(r.remove_binary(b), 1);
        assert!(r.get(old).is_err());
        let new = r.register_function(b, "add", || code(b));
        assert_eq!(new.index(), old.index(), "the slot is reused");
        assert_ne!(new.generation(), old.generation());
        assert!(r.get(old).is_err(), "the old handle stays stale");
        assert!(r.get(new).is_ok());
    }

    #[test]
    fn another_runtimes_kernel_is_refused() {
        let mut a = KernelRegistry::default();
        a.set_runtime(1);
        let mut b = KernelRegistry::default();
        b.set_runtime(2);
        let ka = a.register(noop("x"));
        b.register(noop("x"));
        assert!(b.get(ka).is_err());
        assert!(a.get(ka).is_ok());
    }

    #[test]
    fn only_a_live_native_kernel_of_this_runtime_is_native() {
        let mut r = KernelRegistry::default();
        r.set_runtime(1);
        let native = r.register(noop("x"));
        let bin = Entity::from_raw_u32(7).unwrap();
        let function = r.register_function(bin, "add", || code(bin));
        assert!(r.is_native(native) && r.get(native).is_ok());
        assert!(
            !r.is_native(function),
            "a binary kernel has its binary checked"
        );
        let mut other = KernelRegistry::default();
        other.set_runtime(2);
        other.register(noop("x"));
        assert!(!other.is_native(native), "another runtime's");
        r.remove_binary(bin);
        let stale = Kernel::new(1, function.index(), function.generation().wrapping_add(1));
        assert!(!r.is_native(stale) && r.get(stale).is_err());
    }

    #[test]
    fn a_native_kernels_slot_is_never_freed_or_reused() {
        let mut r = KernelRegistry::default();
        let bin = Entity::from_raw_u32(7).unwrap();
        let function = r.register_function(bin, "add", || code(bin));
        r.remove_binary(bin);
        // A native kernel may take a freed function's slot, at a later generation...
        let native = r.register(noop("x"));
        assert_eq!(native.index(), function.index());
        let replacement = r.register(noop("x"));
        // ...and neither unloading every binary nor replacing its name frees it.
        assert_eq!(r.remove_binary(bin), 0);
        let again = r.register_function(bin, "add", || code(bin));
        assert_ne!(
            again.index(),
            native.index(),
            "the slot is not handed out again"
        );
        assert!(r.is_native(native) && r.is_native(replacement));
        assert_eq!(r.lookup("x").unwrap(), replacement);
    }

    #[test]
    fn undeclared_kernels_touch_the_blocks_behind_their_pointer_words() {
        let k = noop("x");
        let heap = npusim_device::abi::HEAP_BASE;
        let mut s = AccessSet::new();
        k.accesses(&[heap + 64, 3, heap + 4096], 0b100, 1, &mut s);
        assert!(!s.exact());
        assert_eq!(
            s.ranges().len(),
            1,
            "small integers and floats are not pointers"
        );
        assert_eq!(s.ranges()[0].addr, heap + 64);
    }
}
