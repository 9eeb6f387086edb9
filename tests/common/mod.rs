//! Helpers the recording tests share.

use npusim::TaskRecord;

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
