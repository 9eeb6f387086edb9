//! Dynamic shapes (DESIGN §5): the device-side shape buffer, shape handles, the op registry
//! (shape inference, tiling and cost per op) and the data the shape-propagation and tiling
//! stages of the frame hand each other.
//!
//! How a shape travels, with no host round trip:
//!
//! 1. Each context owns a **shape buffer** in its device memory ([`ShapeBuffer`]), allocated
//!    when its first [`ShapeHandle`] is created. A handle names one slot: a [`ShapeSlot`]
//!    (tag, rank, dims) of [`SLOT_BYTES`] bytes.
//! 2. An op launch carries, per tensor, either a static shape or a slot ([`OpLaunch`], beside
//!    its descriptor): the slot is what replaces a shape that is unknown at submission.
//! 3. When the launch is ready, **shape propagation** reads its input shapes (from the slots in
//!    device memory), checks them against their buffers, runs the op's shape inference and
//!    writes the output shapes it can infer back to their slots. A data-dependent output
//!    (nonzero, NMS) gets only an upper bound; its slot is marked pending.
//! 4. **Tiling** runs the op's tiling function on those shapes and the device's resources and
//!    writes block dim, tiling key and tiling words ([`tiling_word`]) into the descriptor, and
//!    the launch's modeled work into its [`OpLaunch::cost`].
//! 5. The kernel runs in the hardware tick; it reads its sizes from the tiling words and a
//!    producer of a data-dependent output writes the actual shape into its slot
//!    ([`publish_shape`]) — where the next consumer's shape propagation will find it.
//!
//! A shape that does not fit its buffer, a negative or overflowing dimension, or a slot nobody
//! wrote fails the launch with a clear [`NpuError`] instead of touching memory past a buffer.

use std::fmt;
use std::sync::Arc;

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;
use bytemuck::{Pod, Zeroable};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use crate::descriptor::{MAX_TENSORS, MAX_TILING, TaskDescriptor};
use crate::error::{NpuError, NpuResult};
use crate::handle::Kernel;
use crate::kernel::{KernelCtx, KernelFault};

/// Highest rank a shape may have (as ACL's tensor descriptors).
pub const MAX_RANK: usize = 8;

/// A tensor shape: up to [`MAX_RANK`] dimensions whose element count fits a `u64`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    rank: u8,
    dims: [u64; MAX_RANK],
}

impl Shape {
    /// The shape of a scalar (rank 0, one element).
    pub const SCALAR: Shape = Shape {
        rank: 0,
        dims: [0; MAX_RANK],
    };

    /// Largest dimension: a slot stores dims as `i64`.
    pub const MAX_DIM: u64 = i64::MAX as u64;

    /// A shape with `dims`. Fails on a rank past [`MAX_RANK`], a dimension past
    /// [`Shape::MAX_DIM`] or an element count that overflows.
    pub fn new(dims: &[u64]) -> NpuResult<Self> {
        if dims.len() > MAX_RANK {
            return Err(NpuError::InvalidShape(format!(
                "rank {} exceeds the maximum {MAX_RANK}",
                dims.len()
            )));
        }
        let mut s = Shape {
            rank: dims.len() as u8,
            dims: [0; MAX_RANK],
        };
        let mut n = 1u64;
        for (i, &d) in dims.iter().enumerate() {
            if d > Self::MAX_DIM {
                return Err(NpuError::InvalidShape(format!(
                    "dim {i} = {d} overflows (the maximum is {})",
                    Self::MAX_DIM
                )));
            }
            n = n.checked_mul(d).ok_or_else(|| {
                NpuError::InvalidShape(format!("element count of {dims:?} overflows"))
            })?;
            s.dims[i] = d;
        }
        Ok(s)
    }

    /// A shape from signed dims (as a user or a device writes them): negative dims are rejected.
    pub fn from_signed(dims: &[i64]) -> NpuResult<Self> {
        let mut u = [0u64; MAX_RANK];
        if dims.len() > MAX_RANK {
            return Err(NpuError::InvalidShape(format!(
                "rank {} exceeds the maximum {MAX_RANK}",
                dims.len()
            )));
        }
        for (i, &d) in dims.iter().enumerate() {
            u[i] = u64::try_from(d)
                .map_err(|_| NpuError::InvalidShape(format!("dim {i} of {dims:?} is negative")))?;
        }
        Self::new(&u[..dims.len()])
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u64] {
        &self.dims[..self.rank as usize]
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Dimension `i`, or `None` past the rank.
    pub fn dim(&self, i: usize) -> Option<u64> {
        self.dims().get(i).copied()
    }

    /// Number of elements (1 for a scalar). Never overflows: constructors check it.
    pub fn numel(&self) -> u64 {
        self.dims().iter().product()
    }

    /// Bytes the shape takes at `elem_bytes` per element, if that fits a `u64`.
    pub fn bytes(&self, elem_bytes: u64) -> Option<u64> {
        self.numel().checked_mul(elem_bytes)
    }

    /// Product of all dims but the first (the row length of a row-major tensor; 1 for rank ≤ 1).
    pub fn row_len(&self) -> u64 {
        self.dims().iter().skip(1).product()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Shape{:?}", self.dims())
    }
}

/// The tag of a slot a producer has written.
pub const SLOT_WRITTEN: u32 = 0x5348_5045;

/// One slot of a shape buffer, as it lies in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct ShapeSlot {
    /// [`SLOT_WRITTEN`] once written; anything else reads as "no shape yet".
    pub tag: u32,
    /// Number of dims used.
    pub rank: u32,
    /// Dims, signed as a device writes them (a negative dim is rejected when read).
    pub dims: [i64; MAX_RANK],
}

/// Bytes of one slot.
pub const SLOT_BYTES: u64 = std::mem::size_of::<ShapeSlot>() as u64;

/// Why a slot does not hold a usable shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// Nothing wrote it (or its producer failed).
    Unwritten,
    /// A rank past [`MAX_RANK`].
    Rank(u32),
    /// A negative dim.
    Negative {
        /// Which dim.
        dim: usize,
        /// Its value.
        value: i64,
    },
    /// The element count overflows.
    Overflow,
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::Unwritten => write!(f, "was never written (or its producer failed)"),
            SlotError::Rank(r) => write!(f, "has rank {r}, past the maximum {MAX_RANK}"),
            SlotError::Negative { dim, value } => write!(f, "has dim {dim} = {value} (negative)"),
            SlotError::Overflow => write!(f, "has dims whose element count overflows"),
        }
    }
}

impl ShapeSlot {
    /// A written slot holding `shape`.
    pub fn written(shape: &Shape) -> Self {
        let mut s = ShapeSlot {
            tag: SLOT_WRITTEN,
            rank: shape.rank() as u32,
            dims: [0; MAX_RANK],
        };
        for (d, &v) in s.dims.iter_mut().zip(shape.dims()) {
            *d = v as i64;
        }
        s
    }

    /// The shape it holds, validated.
    pub fn decode(&self) -> Result<Shape, SlotError> {
        if self.tag != SLOT_WRITTEN {
            return Err(SlotError::Unwritten);
        }
        if self.rank as usize > MAX_RANK {
            return Err(SlotError::Rank(self.rank));
        }
        let mut dims = [0u64; MAX_RANK];
        let mut n = 1u64;
        for (i, &v) in self.dims[..self.rank as usize].iter().enumerate() {
            let d = u64::try_from(v).map_err(|_| SlotError::Negative { dim: i, value: v })?;
            n = n.checked_mul(d).ok_or(SlotError::Overflow)?;
            dims[i] = d;
        }
        Ok(Shape {
            rank: self.rank as u8,
            dims,
        })
    }
}

/// A handle on one slot of a context's shape buffer: a shape that is produced on the device.
/// Carries its runtime, context and the slot's generation, so a freed, foreign or other
/// context's handle is an error on use, never some other shape.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeHandle {
    runtime: u32,
    context: Entity,
    slot: u32,
    generation: u32,
}

impl ShapeHandle {
    /// The handle of `slot` (at `generation`) in `context` of runtime `runtime`.
    pub fn new(runtime: u32, context: Entity, slot: u32, generation: u32) -> Self {
        Self {
            runtime,
            context,
            slot,
            generation,
        }
    }

    /// The runtime that created it.
    pub fn runtime(self) -> u32 {
        self.runtime
    }

    /// The context entity whose shape buffer holds it.
    pub fn context(self) -> Entity {
        self.context
    }

    /// The slot index.
    pub fn slot(self) -> u32 {
        self.slot
    }

    /// The slot's generation when the handle was made.
    pub fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Debug for ShapeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ShapeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shape {}v{} of context {}",
            self.slot, self.generation, self.context
        )
    }
}

/// A context's shape buffer: where its slots lie in device memory and which are in use.
/// Lives on the context entity.
#[derive(Component, Debug)]
pub struct ShapeBuffer {
    base: u64,
    /// The context's memory epoch when the buffer was allocated
    /// ([`crate::DeviceMemory::epoch`]): once it moves on, a fault released the buffer.
    epoch: u64,
    generations: Vec<u32>,
    live: Vec<bool>,
    free: Vec<u32>,
}

impl ShapeBuffer {
    /// Slots per context.
    pub const SLOTS: u32 = 4096;
    /// Bytes of device memory a shape buffer takes.
    pub const BYTES: u64 = Self::SLOTS as u64 * SLOT_BYTES;

    /// A buffer at device address `base`, every slot free, allocated at memory epoch 0.
    pub fn new(base: u64) -> Self {
        Self::at(base, 0)
    }

    /// A buffer at device address `base` allocated at the context's memory epoch `epoch`,
    /// every slot free.
    pub fn at(base: u64, epoch: u64) -> Self {
        Self {
            base,
            epoch,
            generations: Vec::new(),
            live: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Its device address.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The context's memory epoch it was allocated at.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether it still owns its memory: no fault released the context's memory since it was
    /// allocated (`epoch`, the context's current epoch) and its block is still allocated.
    pub fn is_alive(&self, memory: &crate::DeviceMemory, context: Entity) -> bool {
        memory.epoch(context) == Some(self.epoch)
            && memory
                .block_at(self.base, context)
                .is_some_and(|b| b.size >= Self::BYTES)
    }

    /// The device address of `slot`.
    pub fn slot_addr(&self, slot: u32) -> Option<u64> {
        (slot < Self::SLOTS).then(|| self.base + slot as u64 * SLOT_BYTES)
    }

    /// Takes a free slot; returns it with its generation.
    pub fn acquire(&mut self) -> Option<(u32, u32)> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None if (self.live.len() as u32) < Self::SLOTS => {
                self.live.push(false);
                self.generations.push(0);
                self.live.len() as u32 - 1
            }
            None => return None,
        };
        self.live[slot as usize] = true;
        Some((slot, self.generations[slot as usize]))
    }

    /// Whether `slot` is held at `generation`.
    pub fn is_live(&self, slot: u32, generation: u32) -> bool {
        self.live.get(slot as usize).copied().unwrap_or(false)
            && self.generations.get(slot as usize) == Some(&generation)
    }

    /// Returns `slot` (held at `generation`); later uses of its handles are errors.
    pub fn release(&mut self, slot: u32, generation: u32) -> bool {
        if !self.is_live(slot, generation) {
            return false;
        }
        self.live[slot as usize] = false;
        self.generations[slot as usize] = generation.wrapping_add(1);
        self.free.push(slot);
        true
    }

    /// Slots held.
    pub fn live_slots(&self) -> usize {
        self.live.iter().filter(|l| **l).count()
    }

    /// Moves the buffer to `base`, allocated at memory epoch `epoch`, after its memory was
    /// lost (a fault released the context's memory): every existing handle becomes stale.
    pub fn rebase(&mut self, base: u64, epoch: u64) {
        self.base = base;
        self.epoch = epoch;
        for (i, live) in self.live.iter_mut().enumerate() {
            if *live {
                *live = false;
                self.generations[i] = self.generations[i].wrapping_add(1);
            }
        }
        self.free = (0..self.live.len() as u32).rev().collect();
    }
}

/// Where one tensor of an op launch gets its shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TensorSource {
    /// Known at submission.
    Static(Shape),
    /// In this slot of the context's shape buffer, written by a producer on the device.
    Slot(u32),
    /// An output whose shape the op infers.
    #[default]
    Inferred,
}

/// How far the shape and tiling stages got with an op launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OpState {
    /// Submitted; shapes not resolved yet.
    #[default]
    Submitted,
    /// Shapes resolved (and output shapes written to their slots).
    Resolved,
    /// Tiled: block dim, tiling words and cost are set.
    Tiled,
    /// Rejected by shape propagation or tiling: the task's `error` says why, and its kernel
    /// fails with it instead of running.
    Faulted,
}

/// The cold part of an op launch, beside its descriptor: where each tensor's shape comes from
/// and what the shape and tiling stages made of it. The descriptor's argument words are the
/// tensors' addresses (inputs, then outputs), then the op's attributes.
///
/// It is boxed once per op launch and freed at retire, so it is kept small: a tensor's source
/// is a packed word and static shapes keep only their dims, concatenated (inline up to
/// [`OpLaunch::INLINE_DIMS`] dims in all, on the heap beyond).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpLaunch {
    /// Inputs.
    pub n_in: u8,
    /// Outputs.
    pub n_out: u8,
    /// How far the stages got.
    pub state: OpState,
    /// Device workspace the tiling asked for, in bytes.
    pub workspace_bytes: u64,
    /// The launch's modeled work, priced by the op's cost function from the actual shapes and
    /// tiling (the cost model reads it at dispatch).
    pub cost: KernelCost,
    /// Per tensor (inputs, then outputs): where its shape comes from.
    sources: [Source; MAX_TENSORS],
    /// The static shapes' dims, in the order their tensors were set.
    dims: smallvec::SmallVec<[u64; OpLaunch::INLINE_DIMS]>,
}

/// A [`TensorSource`] as an [`OpLaunch`] keeps it: a static shape is a run of its `dims`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Source {
    #[default]
    Inferred,
    Slot(u32),
    Static {
        at: u32,
        rank: u8,
    },
}

impl OpLaunch {
    /// Static dims an op launch holds without a second allocation.
    pub const INLINE_DIMS: usize = 8;

    /// A launch of `n_in` inputs and `n_out` outputs whose tensors are all
    /// [`TensorSource::Inferred`] until set.
    pub fn new(n_in: u8, n_out: u8) -> Self {
        Self {
            n_in,
            n_out,
            ..Self::default()
        }
    }

    /// Makes it [`OpLaunch::new`]`(n_in, n_out)` in place, keeping its static dims'
    /// allocation (a box reused for the next launch).
    pub fn reset(&mut self, n_in: u8, n_out: u8) {
        let mut dims = std::mem::take(&mut self.dims);
        dims.clear();
        *self = Self {
            n_in,
            n_out,
            dims,
            ..Self::default()
        };
    }

    /// Tensors in all.
    pub fn tensor_count(&self) -> usize {
        self.n_in as usize + self.n_out as usize
    }

    /// Where tensor `i` (inputs, then outputs) gets its shape; [`TensorSource::Inferred`] for
    /// one never set (or past [`MAX_TENSORS`]).
    pub fn tensor(&self, i: usize) -> TensorSource {
        match self.sources.get(i).copied().unwrap_or_default() {
            Source::Inferred => TensorSource::Inferred,
            Source::Slot(slot) => TensorSource::Slot(slot),
            Source::Static { at, rank } => {
                // The dims came from a checked `Shape`: no need to check them again.
                let at = at as usize;
                let mut shape = Shape {
                    rank,
                    dims: [0; MAX_RANK],
                };
                shape.dims[..rank as usize].copy_from_slice(&self.dims[at..at + rank as usize]);
                TensorSource::Static(shape)
            }
        }
    }

    /// Sets where tensor `i` gets its shape. Each tensor is meant to be set once: setting one
    /// again leaves its earlier dims unused in the launch.
    ///
    /// # Panics
    /// If `i` is not below [`MAX_TENSORS`] (the runtime checks tensor counts first).
    pub fn set_tensor(&mut self, i: usize, source: TensorSource) {
        self.sources[i] = match source {
            TensorSource::Inferred => Source::Inferred,
            TensorSource::Slot(slot) => Source::Slot(slot),
            TensorSource::Static(shape) => {
                let at = self.dims.len();
                self.dims.extend_from_slice(shape.dims());
                Source::Static {
                    at: at as u32,
                    rank: shape.rank() as u8,
                }
            }
        };
    }

    /// The op's attribute words in `desc` (the argument words after the tensors').
    pub fn attrs<'a>(&self, desc: &'a TaskDescriptor) -> &'a [u64] {
        desc.arg_words().get(self.tensor_count()..).unwrap_or(&[])
    }
}

/// Layout of an op launch's tiling words (the descriptor's `tiling`, the kernel's
/// [`KernelCtx::tiling`]): a header written by the frame, then the op's own words.
pub mod tiling_word {
    /// The tiling key.
    pub const KEY: usize = 0;
    /// Reserved (0).
    pub const FLAGS: usize = 1;
    /// Two words: device address of the first output's shape slot (0 when it has none).
    pub const OUT_SLOT: usize = 2;
    /// Two words: bytes the first output's buffer holds.
    pub const OUT_CAPACITY: usize = 4;
    /// First word of the op's own tiling words.
    pub const OP: usize = 6;
}

/// Tiling words an op's tiling function may use.
pub const OP_TILING_WORDS: usize = MAX_TILING - tiling_word::OP;

/// What a tiling function chose for one launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tiling {
    /// Blocks (AI cores) the launch uses: at most the device's core count.
    pub block_dim: u32,
    /// The tiling key: which code path of the kernel runs.
    pub key: u32,
    /// Device workspace the kernel needs, in bytes.
    pub workspace_bytes: u64,
    /// Unified-buffer bytes one core uses at once (double buffering included).
    pub ub_bytes: u64,
    /// L1 bytes one core uses at once.
    pub l1_bytes: u64,
    words: [u32; OP_TILING_WORDS],
    len: u8,
    overflow: bool,
}

impl Tiling {
    /// A tiling with `block_dim` blocks and key `key`, no words yet.
    pub fn new(block_dim: u32, key: u32) -> Self {
        Self {
            block_dim,
            key,
            ..Self::default()
        }
    }

    /// Appends a word (more than [`OP_TILING_WORDS`] makes the tiling invalid).
    pub fn push(mut self, w: u32) -> Self {
        if (self.len as usize) < OP_TILING_WORDS {
            self.words[self.len as usize] = w;
            self.len += 1;
        } else {
            self.overflow = true;
        }
        self
    }

    /// Appends a `u64` as two words, low first.
    pub fn push_u64(self, v: u64) -> Self {
        self.push(v as u32).push((v >> 32) as u32)
    }

    /// Sets the per-core buffer use.
    pub fn with_buffers(mut self, ub_bytes: u64, l1_bytes: u64) -> Self {
        self.ub_bytes = ub_bytes;
        self.l1_bytes = l1_bytes;
        self
    }

    /// Sets the workspace size.
    pub fn with_workspace(mut self, bytes: u64) -> Self {
        self.workspace_bytes = bytes;
        self
    }

    /// The op's tiling words.
    pub fn words(&self) -> &[u32] {
        &self.words[..self.len as usize]
    }

    /// Word `i`, 0 past the end.
    pub fn word(&self, i: usize) -> u32 {
        self.words().get(i).copied().unwrap_or(0)
    }

    /// Words `i` and `i + 1` as a `u64`.
    pub fn u64_at(&self, i: usize) -> u64 {
        self.word(i) as u64 | (self.word(i + 1) as u64) << 32
    }

    /// Checks the tiling against the device: block dim within the cores, buffers within the
    /// core's unified buffer and L1, words within the descriptor.
    pub fn check(&self, config: &DeviceConfig) -> Result<(), String> {
        if self.block_dim == 0 || self.block_dim > config.ai_cores {
            return Err(format!(
                "block dim {} is outside 1..={} (the device's AI cores)",
                self.block_dim, config.ai_cores
            ));
        }
        if self.ub_bytes > config.ub_bytes as u64 {
            return Err(format!(
                "tiles use {} bytes of unified buffer per core; the device has {}",
                self.ub_bytes, config.ub_bytes
            ));
        }
        if self.l1_bytes > config.l1_bytes as u64 {
            return Err(format!(
                "tiles use {} bytes of L1 per core; the device has {}",
                self.l1_bytes, config.l1_bytes
            ));
        }
        if self.overflow {
            return Err(format!("more than {OP_TILING_WORDS} tiling words"));
        }
        Ok(())
    }
}

/// An op's tiling words as its kernel sees them ([`KernelCtx::tiling`]).
#[derive(Clone, Copy, Debug)]
pub struct OpTiling<'a> {
    words: &'a [u32],
}

impl<'a> OpTiling<'a> {
    /// Parses the tiling words of an op launch; `None` when the frame wrote none (the op's
    /// kernel was launched as a plain kernel).
    pub fn parse(words: &'a [u32]) -> Option<Self> {
        (words.len() >= tiling_word::OP).then_some(Self { words })
    }

    fn u64_at_abs(&self, i: usize) -> u64 {
        let w = |i: usize| self.words.get(i).copied().unwrap_or(0) as u64;
        w(i) | w(i + 1) << 32
    }

    /// The tiling key.
    pub fn key(&self) -> u32 {
        self.words[tiling_word::KEY]
    }

    /// Device address of the first output's shape slot (0 when it has none).
    pub fn out_slot(&self) -> u64 {
        self.u64_at_abs(tiling_word::OUT_SLOT)
    }

    /// Bytes the first output's buffer holds.
    pub fn out_capacity(&self) -> u64 {
        self.u64_at_abs(tiling_word::OUT_CAPACITY)
    }

    /// The op's word `i` (0 past the end).
    pub fn word(&self, i: usize) -> u32 {
        self.words.get(tiling_word::OP + i).copied().unwrap_or(0)
    }

    /// The op's words `i` and `i + 1` as a `u64`.
    pub fn u64_at(&self, i: usize) -> u64 {
        self.u64_at_abs(tiling_word::OP + i)
    }
}

/// Writes `shape` into the shape slot at `slot_addr` (from [`OpTiling::out_slot`]): how a
/// producer kernel publishes a data-dependent output shape. Does nothing when `slot_addr` is 0.
pub fn publish_shape(
    k: &mut KernelCtx<'_>,
    slot_addr: u64,
    shape: &Shape,
) -> Result<(), KernelFault> {
    if slot_addr == 0 {
        return Ok(());
    }
    k.store(slot_addr, std::slice::from_ref(&ShapeSlot::written(shape)))
}

/// One tensor of an op's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Its name, for errors.
    pub name: String,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// For an output: its shape depends on the data, so inference gives only an upper bound
    /// and the kernel publishes the actual shape.
    pub data_dependent: bool,
}

/// The shapes of one launch, as shape inference, tiling and cost see them.
#[derive(Clone, Copy, Debug)]
pub struct OpShapes<'a> {
    /// Actual input shapes.
    pub inputs: &'a [Shape],
    /// Output shapes (an upper bound for a data-dependent output).
    pub outputs: &'a [Shape],
    /// The attribute words, in launch order.
    pub attrs: &'a [u64],
    /// Bytes each tensor's buffer holds (inputs, then outputs).
    pub capacities: &'a [u64],
}

impl OpShapes<'_> {
    /// Attribute `i` as an `f32` (0 when missing).
    pub fn attr_f32(&self, i: usize) -> f32 {
        f32::from_bits(self.attrs.get(i).copied().unwrap_or(0) as u32)
    }

    /// Attribute `i` as a `u64` (0 when missing).
    pub fn attr_u64(&self, i: usize) -> u64 {
        self.attrs.get(i).copied().unwrap_or(0)
    }
}

/// Shape inference: from the input shapes and attribute words, fills the output shapes (an
/// upper bound for a data-dependent output). Errors are [`NpuError::InvalidShape`] messages.
pub type InferFn = dyn Fn(&[Shape], &[u64], &mut [Shape]) -> Result<(), String> + Send + Sync;
/// A tiling function: from actual shapes and the device's resources, the tiling.
pub type TilingFn = dyn Fn(&OpShapes<'_>, &DeviceConfig) -> Result<Tiling, String> + Send + Sync;
/// A cost function: the modeled work of one launch, from its shapes and tiling.
pub type OpCostFn = dyn Fn(&OpShapes<'_>, &Tiling) -> KernelCost + Send + Sync;
/// The body of an op's kernel: its launch and its parsed tiling words.
pub type OpKernelFn =
    dyn Fn(&mut KernelCtx<'_>, &OpTiling<'_>) -> Result<(), KernelFault> + Send + Sync;

/// A registered op: its signature and its shape inference, tiling and cost functions. Its
/// kernel is registered in the [`crate::KernelRegistry`] under the same name.
#[derive(Clone)]
pub struct OpDef {
    /// Its name.
    pub name: String,
    /// The kernel that runs it.
    pub kernel: Kernel,
    /// Input tensors, in argument order.
    pub inputs: Vec<TensorSpec>,
    /// Output tensors, in argument order after the inputs.
    pub outputs: Vec<TensorSpec>,
    /// Attribute names, in argument order after the tensors.
    pub attrs: Vec<String>,
    /// Shape inference.
    pub infer: Arc<InferFn>,
    /// Tiling.
    pub tiling: Arc<TilingFn>,
    /// Cost.
    pub cost: Arc<OpCostFn>,
}

impl fmt::Debug for OpDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpDef({})", self.name)
    }
}

impl OpDef {
    /// The name of tensor `i` (inputs first).
    pub fn tensor_name(&self, i: usize) -> &str {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .nth(i)
            .map_or("?", |t| t.name.as_str())
    }

    /// The spec of tensor `i` (inputs first).
    pub fn tensor(&self, i: usize) -> Option<&TensorSpec> {
        self.inputs.iter().chain(&self.outputs).nth(i)
    }
}

/// Every registered op, by kernel id.
#[derive(Resource, Default, Debug)]
pub struct OpRegistry {
    ops: Vec<Arc<OpDef>>,
    by_kernel: Vec<u32>,
}

impl OpRegistry {
    /// Adds `op` (its kernel must already be registered); a later op on the same kernel replaces it.
    pub fn insert(&mut self, op: OpDef) -> Arc<OpDef> {
        let op = Arc::new(op);
        let k = op.kernel.index() as usize;
        if self.by_kernel.len() <= k {
            self.by_kernel.resize(k + 1, 0);
        }
        self.ops.push(op.clone());
        self.by_kernel[k] = self.ops.len() as u32;
        op
    }

    /// The op whose kernel is `kernel`.
    pub fn get(&self, kernel: Kernel) -> Option<&Arc<OpDef>> {
        self.resolve(kernel.slot())
    }

    /// The op whose kernel is in registry slot `slot` at its generation (what a task
    /// descriptor names).
    #[inline]
    pub fn resolve(&self, slot: crate::handle::KernelSlot) -> Option<&Arc<OpDef>> {
        let crate::handle::KernelSlot { index, generation } = slot;
        let i = *self.by_kernel.get(index as usize)?;
        let op = self.ops.get((i as usize).checked_sub(1)?)?;
        (op.kernel.generation() == generation).then_some(op)
    }

    /// Names of the registered ops, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.ops.iter().map(|o| o.name.as_str())
    }
}

/// One launch whose shapes shape propagation resolved this frame, for the tiling stage.
#[derive(Clone, Copy, Debug)]
pub struct ResolvedLaunch {
    /// The task.
    pub task: Entity,
    /// Input shapes, then output shapes.
    pub shapes: [Shape; MAX_TENSORS],
    /// Bytes each tensor's buffer holds.
    pub capacities: [u64; MAX_TENSORS],
    /// Inputs.
    pub n_in: u8,
    /// Outputs.
    pub n_out: u8,
    /// Device address of the first output's slot, when it is data-dependent and has one.
    pub out_slot: u64,
}

impl ResolvedLaunch {
    /// A launch with nothing resolved yet.
    pub const EMPTY: ResolvedLaunch = ResolvedLaunch {
        task: Entity::PLACEHOLDER,
        shapes: [Shape::SCALAR; MAX_TENSORS],
        capacities: [0; MAX_TENSORS],
        n_in: 0,
        n_out: 0,
        out_slot: 0,
    };

    /// The resolved shapes as an op's functions see them (`attrs` from the descriptor).
    pub fn op_shapes<'a>(&'a self, attrs: &'a [u64]) -> OpShapes<'a> {
        let (n_in, n_out) = (self.n_in as usize, self.n_out as usize);
        OpShapes {
            inputs: &self.shapes[..n_in],
            outputs: &self.shapes[n_in..n_in + n_out],
            attrs,
            capacities: &self.capacities[..n_in + n_out],
        }
    }
}

/// Launches resolved by shape propagation and not yet tiled (emptied by the tiling stage each
/// frame; its capacity is reused).
#[derive(Resource, Default, Debug)]
pub struct ResolvedShapes {
    /// The launches.
    pub launches: Vec<ResolvedLaunch>,
}

/// Counters of the dynamic-shape stages.
#[derive(Resource, Default, Debug, Clone, PartialEq, Eq)]
pub struct ShapeStats {
    /// Shapes the host read back from the device (each one a host round trip).
    pub host_shape_reads: u64,
    /// Op launches whose shapes were resolved on the device.
    pub launches_resolved: u64,
    /// Input shapes read from the device shape buffer.
    pub dynamic_inputs_read: u64,
    /// Output shapes shape propagation wrote to the shape buffer.
    pub outputs_written: u64,
    /// Tilings computed.
    pub tilings: u64,
    /// Launches rejected by shape propagation or tiling.
    pub shape_faults: u64,
}

/// One tiling decision, as recorded when [`TilingLog::enabled`] is set.
#[derive(Clone, Debug, PartialEq)]
pub struct TilingRecord {
    /// The op's name.
    pub op: String,
    /// The stream entity.
    pub stream: Entity,
    /// The launch's sequence number on it.
    pub seq: u64,
    /// Actual input shapes.
    pub inputs: Vec<Shape>,
    /// Output shapes (upper bounds for data-dependent outputs).
    pub outputs: Vec<Shape>,
    /// What the tiling function chose.
    pub tiling: Tiling,
}

/// Tiling decisions, in the order they were made (off by default).
#[derive(Resource, Default, Debug)]
pub struct TilingLog {
    /// Whether decisions are recorded.
    pub enabled: bool,
    /// The records.
    pub records: Vec<TilingRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_buffer_is_alive_until_its_block_goes_or_its_contexts_memory_is_released() {
        let ctx = Entity::from_raw_u32(1).unwrap();
        let mut m = crate::DeviceMemory::new(1 << 30).unwrap();
        m.create_space(ctx).unwrap();
        let base = m.alloc(ShapeBuffer::BYTES, ctx).unwrap();
        let mut b = ShapeBuffer::at(base, m.epoch(ctx).unwrap());
        assert!(b.is_alive(&m, ctx));
        assert!(
            !ShapeBuffer::at(base, 7).is_alive(&m, ctx),
            "another epoch's"
        );
        // A fault releases the context's memory: the buffer is gone, whatever is at its base.
        m.free_all_of(ctx);
        assert!(!b.is_alive(&m, ctx));
        let again = m.alloc(ShapeBuffer::BYTES, ctx).unwrap();
        let (slot, generation) = b.acquire().unwrap();
        b.rebase(again, m.epoch(ctx).unwrap());
        assert!(b.is_alive(&m, ctx));
        assert!(
            !b.is_live(slot, generation),
            "a rebase makes old handles stale"
        );
        m.free(again, ctx).unwrap();
        assert!(!b.is_alive(&m, ctx), "its block freed");
    }

    #[test]
    fn shapes_reject_negative_and_overflowing_dims() {
        assert!(Shape::from_signed(&[3, -1]).is_err());
        assert!(Shape::new(&[1 << 40, 1 << 40]).is_err());
        assert!(Shape::new(&[1; MAX_RANK + 1]).is_err());
        let s = Shape::from_signed(&[2, 3, 4]).unwrap();
        assert_eq!(s.numel(), 24);
        assert_eq!(s.row_len(), 12);
        assert_eq!(Shape::SCALAR.numel(), 1);
    }

    #[test]
    fn an_op_launch_gives_back_each_tensor_source_as_set() {
        let a = Shape::new(&[4, 8]).unwrap();
        let b = Shape::new(&[2, 3, 5, 7, 11]).unwrap();
        let mut op = OpLaunch::new(3, 2);
        op.set_tensor(0, TensorSource::Static(a));
        op.set_tensor(1, TensorSource::Slot(7));
        op.set_tensor(2, TensorSource::Static(b));
        op.set_tensor(4, TensorSource::Static(Shape::SCALAR));
        assert_eq!(op.tensor(0), TensorSource::Static(a));
        assert_eq!(op.tensor(1), TensorSource::Slot(7));
        assert_eq!(op.tensor(2), TensorSource::Static(b));
        assert_eq!(op.tensor(3), TensorSource::Inferred);
        assert_eq!(op.tensor(4), TensorSource::Static(Shape::SCALAR));
        assert_eq!(op.tensor(MAX_TENSORS), TensorSource::Inferred);
        // 7 dims so far; five more spill past the inline ones.
        op.set_tensor(3, TensorSource::Static(b));
        assert_eq!(op.tensor(3), TensorSource::Static(b));
        assert_eq!(
            op.tensor(2),
            TensorSource::Static(b),
            "a spill keeps earlier shapes"
        );
        assert_eq!(op.tensor_count(), 5);
        // The box an op launch allocates stays a fraction of eight full shapes.
        assert!(std::mem::size_of::<OpLaunch>() <= 200);
        // Reset for the next launch: nothing of this one left, its spilled dims' allocation
        // kept.
        let spilled = op.dims.as_ptr();
        op.workspace_bytes = 64;
        op.reset(1, 1);
        assert_eq!(op, OpLaunch::new(1, 1));
        op.set_tensor(0, TensorSource::Static(b));
        op.set_tensor(1, TensorSource::Static(b));
        assert_eq!(op.dims.as_ptr(), spilled, "no new allocation");
        assert_eq!(op.tensor(1), TensorSource::Static(b));
    }

    #[test]
    fn slots_round_trip_and_refuse_garbage() {
        let s = Shape::new(&[7, 4]).unwrap();
        assert_eq!(ShapeSlot::written(&s).decode(), Ok(s));
        assert_eq!(ShapeSlot::zeroed().decode(), Err(SlotError::Unwritten));
        let mut bad = ShapeSlot::written(&s);
        bad.dims[1] = -3;
        assert_eq!(bad.decode(), Err(SlotError::Negative { dim: 1, value: -3 }));
        bad.rank = 99;
        assert_eq!(bad.decode(), Err(SlotError::Rank(99)));
        assert_eq!(SLOT_BYTES, 72);
    }

    #[test]
    fn released_slots_make_old_handles_stale() {
        let mut b = ShapeBuffer::new(0x1000);
        let (s, g) = b.acquire().unwrap();
        assert!(b.is_live(s, g));
        assert!(b.release(s, g));
        assert!(!b.release(s, g));
        let (s2, g2) = b.acquire().unwrap();
        assert_eq!(s2, s);
        assert_ne!(g2, g);
        assert!(!b.is_live(s, g));
    }

    #[test]
    fn tiling_check_enforces_the_preset() {
        let cfg = DeviceConfig::small();
        assert!(Tiling::new(4, 0).check(&cfg).is_ok());
        assert!(Tiling::new(5, 0).check(&cfg).is_err());
        assert!(
            Tiling::new(1, 0)
                .with_buffers(cfg.ub_bytes as u64 + 1, 0)
                .check(&cfg)
                .is_err()
        );
        let mut t = Tiling::new(1, 0);
        for i in 0..=OP_TILING_WORDS as u32 {
            t = t.push(i);
        }
        assert!(t.check(&cfg).is_err());
    }
}
