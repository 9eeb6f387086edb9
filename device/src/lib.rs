//! The simulated NPU hardware and its driver interface. Plain Rust, no ECS: configuration
//! presets, execution units, the cost model, physical memory and address spaces, the runtime's
//! memory pool and software TLB, the AI core, and the stream sanitizer's engine.
#![warn(missing_docs)]

pub mod abi;
pub mod config;
pub mod core;
pub mod cost;
pub mod link;
pub mod memory;
pub mod sanitizer;
