//! npusim — a simulated NPU and its runtime.
//!
//! A host program uses npusim the way it uses a real accelerator runtime (ACL, the CUDA
//! runtime): contexts, streams, asynchronous kernel launches, events, device memory. No
//! accelerator is needed: kernels compute real results in simulated device memory, and every
//! task gets a simulated start and end from a cost model, so timelines and overlap can be
//! studied. Inside, it is a `bevy_ecs` world advanced by ordered systems ([`NpuSet`]).
//!
//! Start with [`prelude`], [`Runtime`] and the Rust idiom in [`safe`]; the examples (`cargo run --release --example
//! 01_quickstart`) are a numbered tour.
#![warn(missing_docs)]

pub use npusim_engine::*;
