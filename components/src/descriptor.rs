//! The task descriptor: one task's plain-old-data words, the same bytes a real runtime would
//! write into the device's submission queue, with the typed constructors and views that are
//! the only code to read or write them. The task entity that carries a descriptor is
//! [`crate::Task`].

use bevy_ecs::entity::Entity;
use bytemuck::{Pod, Zeroable};

use crate::time::SimTime;

/// Most argument words a launch carries.
pub const MAX_ARGS: usize = 16;
/// Most tiling words a launch carries.
pub const MAX_TILING: usize = 20;
/// Most tensors (inputs and outputs) an op launch describes (the `shape` module).
pub const MAX_TENSORS: usize = 8;

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TaskKind {
    /// A kernel launch.
    Kernel = 1,
    /// A copy.
    Memcpy = 2,
    /// A memset.
    Memset = 3,
    /// An event record.
    EventRecord = 4,
    /// A wait for an event record.
    EventWait = 5,
    /// A host callback.
    HostCallback = 6,
    /// A collective.
    Collective = 7,
}

impl TaskKind {
    /// From the descriptor's `kind` word.
    #[inline]
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => TaskKind::Kernel,
            2 => TaskKind::Memcpy,
            3 => TaskKind::Memset,
            4 => TaskKind::EventRecord,
            5 => TaskKind::EventWait,
            6 => TaskKind::HostCallback,
            7 => TaskKind::Collective,
            _ => return None,
        })
    }

    /// A short name for timelines.
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Kernel => "kernel",
            TaskKind::Memcpy => "memcpy",
            TaskKind::Memset => "memset",
            TaskKind::EventRecord => "event_record",
            TaskKind::EventWait => "event_wait",
            TaskKind::HostCallback => "host_callback",
            TaskKind::Collective => "collective",
        }
    }
}

/// Which way a copy goes (the `flags` word of a memcpy descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CopyDir {
    /// Host to device.
    HostToDevice = 1,
    /// Device to host.
    DeviceToHost = 2,
    /// Device to device, within one context.
    DeviceToDevice = 3,
    /// Device to another device, over the interconnect (its words are
    /// `PeerCopy`'s).
    Peer = 4,
}

impl CopyDir {
    #[inline]
    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => CopyDir::HostToDevice,
            2 => CopyDir::DeviceToHost,
            3 => CopyDir::DeviceToDevice,
            4 => CopyDir::Peer,
            _ => return None,
        })
    }
}

/// The task descriptor, as written to the submission queue: plain data, the same bytes for
/// every kind. Each kind's use of the words is encoded and decoded only here, by the typed
/// constructors and views below (collectives and peer copies: by
/// [`crate::CollectiveCall`] and `PeerCopy`); nothing else
/// indexes `args` by number. What is not fixed-size plain data (an op launch's shapes, a host
/// buffer, a callback) rides beside it in [`crate::TaskExtra`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct TaskDescriptor {
    /// [`TaskKind`] as a number.
    pub kind: u32,
    /// Kind-specific flags (a copy's [`CopyDir`], a collective's kind, type and operation).
    pub flags: u32,
    /// Blocks of a kernel launch.
    pub block_dim: u32,
    /// Kernel slot in the registry ([`KernelRegistry`](crate::KernelRegistry)).
    pub kernel: u32,
    /// Generation of that slot when the launch was made.
    pub kernel_generation: u32,
    /// Argument words used.
    pub arg_count: u32,
    /// Bit `i` set when argument `i` is a float.
    pub float_mask: u32,
    /// Tiling words used.
    pub tiling_len: u32,
    /// Tiling key chosen by the tiling function.
    pub tiling_key: u32,
    /// The task's own time limit in microseconds of simulated time (0: its device's): a
    /// kernel's AI-core timeout, an event wait's wait timeout.
    pub timeout_us: u32,
    /// Entry PC of a binary kernel (0 for native kernels).
    pub pc: u64,
    /// Argument words.
    pub args: [u64; MAX_ARGS],
    /// Tiling words.
    pub tiling: [u32; MAX_TILING],
}

/// A copy's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyView {
    /// Destination device address (0 for device-to-host: the host side rides in [`TaskExtra`](crate::TaskExtra)).
    pub dst: u64,
    /// Source device address (0 for host-to-device).
    pub src: u64,
    /// Bytes.
    pub bytes: u64,
    /// Direction (never [`CopyDir::Peer`]: peer copies are `PeerCopy`).
    pub dir: CopyDir,
}

/// A memset's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemsetView {
    /// Device address.
    pub dst: u64,
    /// The byte value.
    pub value: u8,
    /// Bytes.
    pub bytes: u64,
}

/// An event record's or wait's words: the event and the record number (a wait's is the record
/// that was latest when it was enqueued; 0 means "never recorded").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventView {
    /// The event entity.
    pub event: Entity,
    /// The record number.
    pub record: u64,
}

impl TaskDescriptor {
    /// An all-zero descriptor of `kind`.
    #[inline]
    pub fn new(kind: TaskKind) -> Self {
        Self {
            kind: kind as u32,
            ..Zeroable::zeroed()
        }
    }

    /// The kernel a launch names (a kernel, or an op's kernel): its slot and generation.
    pub fn kernel_slot(&self) -> crate::handle::KernelSlot {
        crate::handle::KernelSlot {
            index: self.kernel,
            generation: self.kernel_generation,
        }
    }

    /// The kind, if the word is valid.
    #[inline]
    pub fn task_kind(&self) -> Option<TaskKind> {
        TaskKind::from_u32(self.kind)
    }

    /// A launch of the kernel in `slot` with `block_dim` blocks, argument words `args` (bit `i` of `float_mask` set for float arguments) and
    /// tiling words `tiling`. The caller checks the counts (at most [`MAX_ARGS`] and
    /// [`MAX_TILING`]); longer slices are cut.
    pub fn kernel(
        slot: crate::handle::KernelSlot,
        block_dim: u32,
        args: impl IntoIterator<Item = (u64, bool)>,
        tiling: &[u32],
    ) -> Self {
        let mut d = Self::new(TaskKind::Kernel);
        d.encode_kernel(slot, block_dim, args, tiling);
        d
    }

    /// Writes a kernel launch's words in place (what [`TaskDescriptor::kernel`] returns), so a
    /// launch need not copy it: into a descriptor whose fixed words are zero; of the argument
    /// and tiling words it writes the ones it counts (see
    /// `Doorbell::push_with`).
    #[inline]
    pub fn encode_kernel(
        &mut self,
        slot: crate::handle::KernelSlot,
        block_dim: u32,
        args: impl IntoIterator<Item = (u64, bool)>,
        tiling: &[u32],
    ) {
        self.kind = TaskKind::Kernel as u32;
        self.kernel = slot.index;
        self.kernel_generation = slot.generation;
        self.block_dim = block_dim;
        for (i, (word, float)) in args.into_iter().take(MAX_ARGS).enumerate() {
            self.args[i] = word;
            self.float_mask |= (float as u32) << i;
            self.arg_count = i as u32 + 1;
        }
        let n = tiling.len().min(MAX_TILING);
        // Most launches have none: no call to copy nothing.
        if n > 0 {
            self.tiling[..n].copy_from_slice(&tiling[..n]);
        }
        self.tiling_len = n as u32;
    }

    /// Sets the task's own time limit (see `timeout_us`; `None`: its device's). Limits past
    /// `u32::MAX` µs (about 71 minutes) are held at that.
    #[inline]
    pub fn set_timeout(&mut self, timeout: Option<SimTime>) {
        self.timeout_us =
            timeout.map_or(0, |t| (t.as_ns() / 1_000).clamp(1, u32::MAX as u64) as u32);
    }

    /// The task's own time limit, if it has one.
    #[inline]
    pub fn timeout(&self) -> Option<SimTime> {
        (self.timeout_us != 0).then(|| SimTime::from_us(self.timeout_us as u64))
    }

    /// Replaces the tiling words (at most [`MAX_TILING`]; longer slices are cut).
    pub fn set_tiling(&mut self, tiling: &[u32]) {
        let n = tiling.len().min(MAX_TILING);
        self.tiling = [0; MAX_TILING];
        self.tiling[..n].copy_from_slice(&tiling[..n]);
        self.tiling_len = n as u32;
    }

    /// The argument words in use.
    #[inline]
    pub fn arg_words(&self) -> &[u64] {
        &self.args[..(self.arg_count as usize).min(MAX_ARGS)]
    }

    /// Whether argument `i` is a float.
    #[inline]
    pub fn arg_is_float(&self, i: usize) -> bool {
        i < 32 && self.float_mask & (1 << i) != 0
    }

    /// The tiling words in use.
    #[inline]
    pub fn tiling_words(&self) -> &[u32] {
        &self.tiling[..(self.tiling_len as usize).min(MAX_TILING)]
    }

    /// A copy (not a peer copy: see `PeerCopy::encode`).
    pub fn copy(view: CopyView) -> Self {
        let mut d = Self::new(TaskKind::Memcpy);
        d.flags = view.dir as u32;
        d.args[..3].copy_from_slice(&[view.dst, view.src, view.bytes]);
        d.arg_count = 3;
        d
    }

    /// The copy direction of a memcpy (`None` for other kinds or a corrupt word).
    #[inline]
    pub fn copy_dir(&self) -> Option<CopyDir> {
        match self.task_kind() {
            Some(TaskKind::Memcpy) => CopyDir::from_u32(self.flags),
            _ => None,
        }
    }

    /// Whether this is a copy between devices.
    #[inline]
    pub fn is_peer_copy(&self) -> bool {
        self.copy_dir() == Some(CopyDir::Peer)
    }

    /// The words of a copy within one device.
    #[inline]
    pub fn as_copy(&self) -> Option<CopyView> {
        let dir = self.copy_dir().filter(|d| *d != CopyDir::Peer)?;
        Some(CopyView {
            dst: self.args[0],
            src: self.args[1],
            bytes: self.args[2],
            dir,
        })
    }

    /// A memset.
    pub fn memset(view: MemsetView) -> Self {
        let mut d = Self::new(TaskKind::Memset);
        d.args[..3].copy_from_slice(&[view.dst, view.value as u64, view.bytes]);
        d.arg_count = 3;
        d
    }

    /// The words of a memset.
    #[inline]
    pub fn as_memset(&self) -> Option<MemsetView> {
        (self.task_kind() == Some(TaskKind::Memset)).then(|| MemsetView {
            dst: self.args[0],
            value: self.args[1] as u8,
            bytes: self.args[2],
        })
    }

    /// An event record (`wait == false`) or wait.
    pub fn event(view: EventView, wait: bool) -> Self {
        let mut d = Zeroable::zeroed();
        Self::encode_event(&mut d, view, wait);
        d
    }

    /// Writes an event record's or wait's words in place (what [`TaskDescriptor::event`]
    /// returns), so the call need not copy it: into a descriptor whose fixed words are zero;
    /// it writes the two argument words it counts.
    #[inline]
    pub fn encode_event(&mut self, view: EventView, wait: bool) {
        let kind = if wait {
            TaskKind::EventWait
        } else {
            TaskKind::EventRecord
        };
        self.kind = kind as u32;
        self.args[..2].copy_from_slice(&[view.event.to_bits(), view.record]);
        self.arg_count = 2;
    }

    /// The words of an event record or wait (`None` for other kinds; a corrupt event word
    /// names no event).
    #[inline]
    pub fn as_event(&self) -> Option<EventView> {
        match self.task_kind() {
            Some(TaskKind::EventRecord | TaskKind::EventWait) => Some(EventView {
                event: Entity::try_from_bits(self.args[0])?,
                record: self.args[1],
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_s_descriptor_names_the_kernel_slot_of_its_handle() {
        let k = crate::handle::Kernel::new(4, 9, 3);
        let d = TaskDescriptor::kernel(k.slot(), 2, [(7, false)], &[]);
        assert_eq!(d.kernel_slot(), k.slot());
        assert_eq!(d.kernel_slot().to_string(), k.to_string());
        assert_eq!(d.task_kind(), Some(TaskKind::Kernel));
    }

    #[test]
    fn an_event_encoded_in_place_is_the_built_one_and_reads_back() {
        let event = Entity::from_raw_u32(7).unwrap();
        for wait in [false, true] {
            let view = EventView { event, record: 3 };
            let mut in_place: TaskDescriptor = Zeroable::zeroed();
            in_place.encode_event(view, wait);
            let built = TaskDescriptor::event(view, wait);
            assert_eq!(bytemuck::bytes_of(&in_place), bytemuck::bytes_of(&built));
            let kind = if wait {
                TaskKind::EventWait
            } else {
                TaskKind::EventRecord
            };
            assert_eq!(built.task_kind(), Some(kind));
            let back = built.as_event().unwrap();
            assert_eq!((back.event, back.record), (event, 3));
            // Not any other kind's view.
            assert!(built.as_copy().is_none() && built.as_memset().is_none());
        }
    }
}
