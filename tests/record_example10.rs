//! Example 10 (data-parallel MLP training on 8 devices, gradient buckets all-reduced while
//! backward goes on) run under `NPUSIM_RECORD`, as `npusim record` runs a program, then
//! replayed: the replay's timeline is the program's, task for task, both functionally (with
//! the example's own kernels replaced by stand-ins with their recorded cost) and timing-only.
//! A test binary of its own: the environment variable applies to every runtime the process
//! makes.

#[allow(dead_code)]
#[path = "../examples/10_data_parallel.rs"]
mod example;

mod common;
use common::times;
use npusim::record::{ReplayOptions, Trace, replay};

#[test]
fn example_10_recorded_through_the_environment_replays_to_its_timeline() {
    let dir = std::env::temp_dir().join(format!("npusim-ex10-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ex10.npt");
    // SAFETY: this test binary has one test, and no other thread reads the environment.
    unsafe { std::env::set_var("NPUSIM_RECORD", &path) };
    let run = example::train(&example::TrainConfig {
        devices: 8,
        local_batch: example::LOCAL_BATCH,
        steps: 3,
        overlap: true,
        threads: 1,
        timeline: true,
    })
    .unwrap();
    unsafe { std::env::remove_var("NPUSIM_RECORD") };
    let recorded = times(&run.runtime.timeline());
    assert!(run.runtime.finish_recording().unwrap().is_some());
    let trace = Trace::read(&path).unwrap();
    assert_eq!(trace.header.devices, 8);
    let functional = replay(&trace, ReplayOptions::default()).unwrap();
    assert!(functional.errors.is_empty(), "{:?}", functional.errors);
    assert_eq!(times(&functional.runtime.timeline()), recorded);
    let timing = replay(
        &trace,
        ReplayOptions {
            timing_only: true,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert_eq!(times(&timing.runtime.timeline()), recorded);
    std::fs::remove_dir_all(&dir).ok();
}
