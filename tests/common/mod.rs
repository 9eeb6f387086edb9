//! Helpers the recording tests share.

use npusim::record::{Call, Trace};
use npusim::{DevicePtr, TaskRecord};

/// One task as a user compares it: name, device, stream position, submit, start, end, cores,
/// success.
pub type TaskTimes = (String, u32, u64, u64, u64, u64, u32, bool);

/// What a user compares between two timelines: every task's name, device, stream position,
/// times, cores and outcome.
pub fn times(tl: &[TaskRecord]) -> Vec<TaskTimes> {
    tl.iter()
        .map(|r| {
            (
                r.name.clone(),
                r.device,
                r.seq,
                r.submit.as_ns(),
                r.start.as_ns(),
                r.end.as_ns(),
                r.cores,
                r.ok,
            )
        })
        .collect()
}

/// The address the trace's `n`-th allocation returned (a replay on the same preset puts it at
/// the same place).
#[allow(dead_code)]
pub fn recorded_malloc(trace: &Trace, n: usize) -> DevicePtr {
    trace
        .entries
        .iter()
        .filter_map(|e| match e.call {
            Call::Malloc { ptr, .. } => Some(DevicePtr(ptr)),
            _ => None,
        })
        .nth(n)
        .expect("the program allocates that often")
}
