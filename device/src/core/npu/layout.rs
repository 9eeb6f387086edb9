//! Where the local buffers live. Each buffer has a fixed 16 MiB window in the core-local part
//! of the address space (`abi::UB_BASE` …); the configured size is a prefix of its window and
//! any address past it faults. Every address an NPU instruction names inside a buffer is
//! 32-byte aligned (`abi::LOCAL_BUFFER_ALIGN`).

use crate::abi;

/// One of the AI core's local buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buffer {
    /// The unified buffer: vector operands, scalar-accessible.
    Ub,
    /// The L1 buffer: the cube's staging memory.
    L1,
    /// L0A: the cube's left operand.
    L0a,
    /// L0B: the cube's right operand.
    L0b,
    /// L0C: the cube's f32 accumulator.
    L0c,
    /// BT (bias table): f32 bias rows a cube instruction can start C from.
    Bt,
}

impl Buffer {
    /// All buffers, in window order.
    pub const ALL: [Buffer; 6] = [
        Buffer::Ub,
        Buffer::L1,
        Buffer::L0a,
        Buffer::L0b,
        Buffer::L0c,
        Buffer::Bt,
    ];

    /// The address of the buffer's first byte.
    pub const fn base(self) -> u64 {
        match self {
            Buffer::Ub => abi::UB_BASE,
            Buffer::L1 => abi::L1_BASE,
            Buffer::L0a => abi::L0A_BASE,
            Buffer::L0b => abi::L0B_BASE,
            Buffer::L0c => abi::L0C_BASE,
            Buffer::Bt => abi::BT_BASE,
        }
    }

    /// The name used in docs and fault messages.
    pub const fn name(self) -> &'static str {
        match self {
            Buffer::Ub => "UB",
            Buffer::L1 => "L1",
            Buffer::L0a => "L0A",
            Buffer::L0b => "L0B",
            Buffer::L0c => "L0C",
            Buffer::Bt => "BT",
        }
    }

    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The buffer whose window contains `addr`, and the offset of `addr` in it. The offset may
    /// lie past the buffer's configured size; callers check that.
    #[inline]
    pub fn at(addr: u64) -> Option<(Buffer, u64)> {
        let off = addr.wrapping_sub(abi::UB_BASE);
        let i = off / abi::LOCAL_BUFFER_WINDOW;
        let b = *Buffer::ALL.get(usize::try_from(i).ok()?)?;
        Some((b, off % abi::LOCAL_BUFFER_WINDOW))
    }
}

impl std::fmt::Display for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Rounds `bytes` up to the local-buffer alignment: the row pitch of a cube operand whose rows
/// are `bytes` long, and the burst size the data movers charge for a row.
#[inline]
pub const fn pitch(bytes: u64) -> u64 {
    (bytes + abi::LOCAL_BUFFER_ALIGN - 1) & !(abi::LOCAL_BUFFER_ALIGN - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_map_back_to_their_buffer() {
        for b in Buffer::ALL {
            assert_eq!(Buffer::at(b.base()), Some((b, 0)));
            assert_eq!(Buffer::at(b.base() + 100), Some((b, 100)));
            assert_eq!(
                Buffer::at(b.base() + abi::LOCAL_BUFFER_WINDOW - 1),
                Some((b, abi::LOCAL_BUFFER_WINDOW - 1))
            );
        }
        assert_eq!(Buffer::at(abi::UB_BASE - 1), None);
        assert_eq!(Buffer::at(abi::BT_BASE + abi::LOCAL_BUFFER_WINDOW), None);
        assert_eq!(Buffer::at(abi::LOCAL_BASE), None);
    }

    // The buffers sit between the stack and the exit pc.
    const _: () = assert!(abi::LOCAL_BASE + abi::LOCAL_STACK_SIZE <= abi::UB_BASE);
    const _: () = assert!(abi::BT_BASE + abi::LOCAL_BUFFER_WINDOW <= abi::EXIT_PC);
}
