//! Device memory in the world: [`npusim_device::memory::spaces`] (a device's address spaces,
//! pools, TLBs and allocation tables) keyed by the world's entities, contexts and streams. The
//! types here name its instantiation with [`Entity`].

use bevy_ecs::entity::Entity;
use npusim_device::memory::spaces;

/// The memory of one device ([`spaces::DeviceMemory`]), contexts and streams by entity.
pub type DeviceMemory = spaces::DeviceMemory<Entity>;

/// A live allocation ([`spaces::BlockInfo`]).
pub type BlockInfo = spaces::BlockInfo<Entity>;

/// Why a device memory access failed ([`spaces::AccessFault`]).
pub type AccessFault = spaces::AccessFault<Entity>;

/// A free waiting for stream positions ([`spaces::PendingFree`]).
pub type PendingFree = spaces::PendingFree<Entity>;

/// A stream position: (stream entity, sequence number) ([`spaces::StreamPosition`]).
pub type StreamPosition = spaces::StreamPosition<Entity>;
