//! What an NPU instruction (or a scalar access to a local buffer) can do wrong. Operand faults
//! are found when the instruction issues, so they are precise: the trap's pc is the offending
//! instruction and nothing of it has happened. Faults of the global-memory side of a transfer
//! are found when the transfer runs and are reported as the usual load / store page faults,
//! attributed to the transfer's instruction.

use super::layout::Buffer;
use super::pipes::Pipe;

/// Why an NPU instruction or a local-buffer access faulted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NpuFault {
    /// An operand region runs past the buffer's configured size.
    #[error(
        "{len} bytes at {addr:#x} run past the end of {buffer} ({size} bytes at {base:#x})",
        base = buffer.base()
    )]
    OutOfBuffer {
        /// The buffer.
        buffer: Buffer,
        /// First address of the region.
        addr: u64,
        /// Length of the region in bytes (first row start to last row end).
        len: u64,
        /// The buffer's configured size.
        size: u32,
    },
    /// An operand that must be in one buffer points elsewhere.
    #[error("{operand} address {addr:#x} is not in {expected} (at {base:#x})", base = expected.base())]
    WrongBuffer {
        /// Which operand (`"dst"`, `"src"`, `"a"`, …).
        operand: &'static str,
        /// The buffer the instruction requires.
        expected: Buffer,
        /// The address given.
        addr: u64,
    },
    /// A local-buffer address or row stride that is not a multiple of 32 bytes.
    #[error("{buffer} {what} {value:#x} is not a multiple of 32 bytes")]
    Misaligned {
        /// The buffer.
        buffer: Buffer,
        /// `"address"` or `"stride"`.
        what: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A UB operand not aligned to its element (the mask-register instructions' destinations
    /// and gather sources need only their element's alignment).
    #[error("{operand} address {addr:#x} is not aligned to {align} bytes")]
    Unaligned {
        /// Which operand.
        operand: &'static str,
        /// The address given.
        addr: u64,
        /// The alignment required.
        align: u64,
    },
    /// A reduction whose mask register selects no element of a repeat.
    #[error("{op}: the vector mask selects no element (set it with vmask)")]
    EmptyMask {
        /// The instruction's mnemonic.
        op: &'static str,
    },
    /// A gather offset that does not name a whole element inside UB.
    #[error(
        "gather element {element}: byte offset {offset:#x} reads {addr:#x}, which is not an aligned element inside UB"
    )]
    BadGatherOffset {
        /// The element's position (repeat × elements per repeat + slot).
        element: u32,
        /// The offset read from the offsets tensor.
        offset: u64,
        /// The address it names.
        addr: u64,
    },
    /// A local-side row stride smaller than the row: rows would overlap.
    #[error("{buffer} stride {stride} is smaller than the row ({row_bytes} bytes)")]
    OverlappingRows {
        /// The buffer.
        buffer: Buffer,
        /// The stride given.
        stride: u64,
        /// The row length.
        row_bytes: u64,
    },
    /// A scalar load or store to a local buffer other than the unified buffer.
    #[error("scalar {access} at {addr:#x} in {buffer}: only UB is scalar-accessible")]
    ScalarAccess {
        /// `"load"` or `"store"`.
        access: &'static str,
        /// The buffer.
        buffer: Buffer,
        /// The address.
        addr: u64,
    },
    /// A data-mover row that its mode cannot take: a transposing copy's rows are 512-byte
    /// fractals, an f32 → f16 copy's rows whole f32s.
    #[error(
        "{op} in mode {mode:?}: rows of {row_bytes} bytes (transpose: 512; f32 -> f16: a multiple of 4)"
    )]
    BadCopyRow {
        /// The instruction's SDK name.
        op: &'static str,
        /// The copy's mode.
        mode: super::isa::CopyMode,
        /// The row length given.
        row_bytes: u64,
    },
    /// A vector instruction's `rs3` operand with an undefined type, mode or reserved bit.
    #[error("{op}: undefined type / mode bits in operand {value:#x}")]
    BadVectorOperand {
        /// The instruction's mnemonic.
        op: &'static str,
        /// The `rs3` operand.
        value: u64,
    },
    /// A vector instruction on an element type it is not defined for (`vexp` on integers).
    #[error("{op} is not defined on {dtype} elements")]
    UnsupportedType {
        /// The instruction's mnemonic.
        op: &'static str,
        /// The element type.
        dtype: super::dtype::DType,
    },
    /// A pipe number that does not exist (or `PIPE_ALL` where one pipe is required), or a
    /// flag from a pipe to itself.
    #[error("invalid pipe operand {value:#x} for {what}")]
    BadPipe {
        /// The instruction.
        what: &'static str,
        /// The packed operand.
        value: u64,
    },
    /// An event id past the last one.
    #[error("event id {event} out of range (0..{max})")]
    BadEvent {
        /// The event id given.
        event: u64,
        /// The number of event ids.
        max: usize,
    },
    /// `wait_flag` with no earlier `set_flag` of the same flag to consume: it would wait for
    /// ever (sets must be issued before the waits they release).
    #[error(
        "wait_flag({src}->{dst}, event {event}) has no set_flag issued before it: it would wait for ever"
    )]
    WaitWithoutSet {
        /// Source pipe.
        src: Pipe,
        /// Destination pipe.
        dst: Pipe,
        /// Event id.
        event: u8,
    },
    /// `set_flag` on a flag that already holds the maximum number of unconsumed sets.
    #[error("set_flag({src}->{dst}, event {event}): {depth} sets are already pending")]
    FlagOverflow {
        /// Source pipe.
        src: Pipe,
        /// Destination pipe.
        dst: Pipe,
        /// Event id.
        event: u8,
        /// The limit.
        depth: usize,
    },
    /// `sync_all` with a block count that is not a 32-bit unsigned number (a negative
    /// `usedCores`, say).
    #[error("sync_all for {blocks:#x} blocks: the count must be 0 (every block) or a block count")]
    BadSyncAll {
        /// The operand given.
        blocks: u64,
    },
    /// `cross_set` / `cross_wait` with a flag id past 15 or a mode past 2.
    #[error("cross-core flag operand {value:#x}: flag ids are 0..16 and modes 0..=2")]
    BadCrossFlag {
        /// The operand given.
        value: u64,
    },
}

impl NpuFault {
    /// The address the fault is about, when there is one.
    pub fn addr(&self) -> Option<u64> {
        match *self {
            NpuFault::OutOfBuffer { addr, .. }
            | NpuFault::WrongBuffer { addr, .. }
            | NpuFault::ScalarAccess { addr, .. }
            | NpuFault::Unaligned { addr, .. }
            | NpuFault::BadGatherOffset { addr, .. } => Some(addr),
            NpuFault::Misaligned {
                value,
                what: "address",
                ..
            } => Some(value),
            _ => None,
        }
    }
}
