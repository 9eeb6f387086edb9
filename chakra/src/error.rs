//! What can go wrong reading, importing or exporting Chakra traces. Each error says which file
//! (or rank) and which node; [`ChakraError::code`] gives the ACL code the runtime's API would
//! return for it.

use npusim_engine::NpuError;

/// A Chakra trace that cannot be read, imported or exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChakraError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes are not a Chakra ET file: a truncated length or message, a message that does
    /// not decode, no `GlobalMetadata`, a file whose name says gzip but is not.
    #[error("{path}: {what}")]
    Malformed {
        /// The file (or `<memory>`).
        path: String,
        /// What is wrong, and where.
        what: String,
    },
    /// The trace reads, but describes a workload that cannot run: a dependency on a node the
    /// rank does not have, a cycle, a receive no send matches, a collective its group's ranks
    /// do not all make, a node type or collective npusim does not model.
    #[error("rank {rank}: {what}")]
    Workload {
        /// The rank whose trace it is.
        rank: u32,
        /// What is wrong.
        what: String,
    },
    /// The options do not fit the traces (no rank files, a bad pattern).
    #[error("{0}")]
    Options(String),
    /// The replay of the workload failed, or stopped with work that can never finish.
    #[error("replay: {0}")]
    Replay(#[from] NpuError),
}

impl ChakraError {
    /// The ACL error code of this error (`ACL_ERROR_INVALID_PARAM` for a bad trace or options,
    /// the runtime's own code for a failed replay).
    pub fn code(&self) -> i32 {
        match self {
            ChakraError::Replay(e) => e.code(),
            _ => NpuError::InvalidParam(String::new()).code(),
        }
    }

    pub(crate) fn malformed(path: &str, what: impl Into<String>) -> Self {
        ChakraError::Malformed {
            path: path.to_string(),
            what: what.into(),
        }
    }

    pub(crate) fn workload(rank: u32, what: impl Into<String>) -> Self {
        ChakraError::Workload {
            rank,
            what: what.into(),
        }
    }
}

impl From<ChakraError> for NpuError {
    fn from(e: ChakraError) -> Self {
        match e {
            ChakraError::Replay(e) => e,
            other => NpuError::InvalidParam(other.to_string()),
        }
    }
}
