//! The stream sanitizer's engine, with no runtime objects in it: vector clocks (exact
//! happens-before), interval shadow memory, and what the sanitizer is configured with and names
//! in its reports. The checker that applies the rules to a runtime's tasks, streams, events and
//! allocations (`npusim_components::sanitizer`) builds on these.

mod clock;
mod report;
mod shadow;

pub use clock::VectorClock;
pub use report::{EnqueueSite, HostThread, Operand, ReportKind, SanitizerConfig, SanitizerMode};
pub use shadow::{Epoch, Segment, Shadow, ShadowStats, coalesce, prune, split};
