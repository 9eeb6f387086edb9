//! Chakra execution traces in and out of npusim (MLCommons Chakra, the format PyTorch
//! execution traces convert to and ASTRA-sim reads).
//!
//! 1. [`EtFile`] reads and writes one rank's file: varint-length-prefixed protobuf messages,
//!    a `GlobalMetadata` first, then `Node`s, gzip when the name ends in `.gz`. The messages
//!    are prost types compiled from `proto/et_def.proto` ([`schema`]).
//!
//! Import (a Chakra workload as a timing-only replay) and export (a recorded trace as Chakra
//! files) build on these.

#![warn(missing_docs)]

pub mod error;
pub mod file;
pub mod schema;

pub use error::ChakraError;
pub use file::{EtFile, SCHEMA_VERSION};
