//! The simulated NPU hardware and its driver interface. Plain Rust, no ECS: configuration
//! presets, execution units, the cost model, physical memory and address spaces, the AI core.
#![warn(missing_docs)]

pub mod abi;
pub mod config;
pub mod core;
pub mod cost;
pub mod link;
pub mod memory;
