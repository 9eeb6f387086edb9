//! Chakra execution traces in and out of npusim (MLCommons Chakra, the format PyTorch
//! execution traces convert to and ASTRA-sim reads).
//!
//! 1. [`EtFile`] reads and writes one rank's file: varint-length-prefixed protobuf messages,
//!    a `GlobalMetadata` first, then `Node`s, gzip when the name ends in `.gz`. The messages
//!    are prost types compiled from `proto/et_def.proto` ([`schema`]).
//!
//! 2. [`import`](mod@import) turns a workload (one file per rank) into an npusim `Trace` — streams,
//!    events, kernels priced by the preset's roofline, collectives on communicators built from
//!    `pg_name`, sends and receives — and [`replay`] runs it timing-only on the existing
//!    replay machinery (`npusim_engine::record::replay`).
//! 3. [`export`](mod@export) writes a recorded npusim trace as one Chakra file per device, for ASTRA-sim or
//!    for npusim's own import.

#![warn(missing_docs)]

pub mod error;
pub mod export;
pub mod file;
pub mod import;
pub mod schema;

pub use error::ChakraError;
pub use export::export;
pub use file::{EtFile, SCHEMA_VERSION};
pub use import::{ImportOptions, Workload, import, replay};
