//! Typed handles handed to users. Each wraps an [`Entity`] (index + generation) and the id of the
//! runtime that made it, so a destroyed handle and a handle from another runtime are both caught
//! on use instead of silently naming some other object.

use bevy_ecs::entity::Entity;
use std::fmt;

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name {
            runtime: u32,
            entity: Entity,
        }

        impl $name {
            /// Wraps an entity of the runtime with id `runtime`.
            pub fn new(runtime: u32, entity: Entity) -> Self {
                Self { runtime, entity }
            }

            /// The entity in the runtime's world.
            pub fn entity(self) -> Entity {
                self.entity
            }

            /// The id of the runtime that created this handle.
            pub fn runtime(self) -> u32 {
                self.runtime
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($label, " {}"), self.entity)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($label, " {}"), self.entity)
            }
        }
    };
}

handle!(
    /// A context: an isolated set of streams, events and memory on one device.
    Context,
    "context"
);
handle!(
    /// A stream: a FIFO of tasks that run in order on one device.
    Stream,
    "stream"
);
handle!(
    /// An event: a marker recorded into a stream, waited on by other streams or the host.
    Event,
    "event"
);
handle!(
    /// A loaded kernel binary (its code in instruction memory, its data in device memory).
    Binary,
    "binary"
);

/// A kernel registered with the runtime (native, or a function of a loaded binary): a slot in
/// the runtime's kernel registry, the slot's generation, and the runtime's id. Unloading a
/// binary frees its functions' slots and bumps their generation, so an old handle is refused
/// rather than naming whatever kernel reuses the slot; a handle of another runtime is refused
/// by its runtime id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kernel {
    runtime: u32,
    index: u32,
    generation: u32,
}

impl Kernel {
    /// Slot `index` at `generation` of the registry of runtime `runtime`.
    pub fn new(runtime: u32, index: u32, generation: u32) -> Self {
        Self {
            runtime,
            index,
            generation,
        }
    }

    /// The registry slot.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The slot's generation when this handle was made.
    pub fn generation(self) -> u32 {
        self.generation
    }

    /// The id of the runtime that made this handle.
    pub fn runtime(self) -> u32 {
        self.runtime
    }

    /// The registry slot and generation, what a task descriptor carries.
    pub fn slot(self) -> KernelSlot {
        KernelSlot {
            index: self.index,
            generation: self.generation,
        }
    }
}

/// The part of a [`Kernel`] a task descriptor carries: its registry slot and the slot's
/// generation when the launch was made (the runtime is the descriptor's own). Read with
/// [`TaskDescriptor::kernel_slot`](crate::TaskDescriptor::kernel_slot), resolved by the
/// kernel and op registries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSlot {
    /// The registry slot.
    pub index: u32,
    /// Its generation.
    pub generation: u32,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.slot(), f)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.slot(), f)
    }
}

impl fmt::Display for KernelSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel {}v{}", self.index, self.generation)
    }
}

/// A device virtual address. Arithmetic with [`DevicePtr::offset`] stays a device address;
/// bounds are checked against the owning block on every copy.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, bytemuck::Pod, bytemuck::Zeroable,
)]
#[repr(transparent)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The null device pointer; every use of it is an error.
    pub const NULL: DevicePtr = DevicePtr(0);

    /// The address `bytes` past this one.
    pub fn offset(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }

    /// The raw address.
    pub fn addr(self) -> u64 {
        self.0
    }

    /// Whether this is the null pointer.
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
