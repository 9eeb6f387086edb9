//! Example 13 (a GEMM per device, then a 100 MB ring all-reduce, on 8 devices) recorded under
//! `NPUSIM_RECORD`, exported as Chakra ET (one file per device, through the files on disk) and
//! imported back: the imported workload's simulated time is the program's within 1%. A test
//! binary of its own: the environment variable applies to every runtime the process makes.

#[allow(dead_code)]
#[path = "../examples/13_data_parallel_step.rs"]
mod example;

use npusim::record::Trace;
use npusim_chakra::{EtFile, ImportOptions, Workload, export, replay};

#[test]
fn example_13_exported_to_chakra_and_imported_keeps_its_simulated_time() {
    let dir = std::env::temp_dir().join(format!("npusim-chakra-ex13-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("step.npt");
    // SAFETY: this test binary has one test, and no other thread reads the environment.
    unsafe { std::env::set_var("NPUSIM_RECORD", &path) };
    let recorded = example::step(8).unwrap();
    unsafe { std::env::remove_var("NPUSIM_RECORD") };
    let trace = Trace::read(&path).unwrap();
    let files = export(&trace).unwrap();
    assert_eq!(files.len(), 8);
    for (r, f) in files.iter().enumerate() {
        // The GEMM, then the all-reduce after it.
        let kinds: Vec<i32> = f.nodes.iter().map(|n| n.r#type).collect();
        assert_eq!(kinds, [4, 7], "rank {r}");
        assert_eq!(f.nodes[1].data_deps, [0], "rank {r}");
        f.write(dir.join(format!("step.{r}.et"))).unwrap();
    }
    let w = Workload::read(dir.join("step.%d.et").to_str().unwrap(), None).unwrap();
    assert_eq!(w.ranks, files);
    assert_eq!(EtFile::read(dir.join("step.3.et")).unwrap(), files[3]);
    let o = ImportOptions {
        device: trace.header.device.clone(),
        topology: trace.header.topology.clone(),
        // The recorded host submitted device 7's GEMM 200 us after device 0's.
        start_times: true,
        ..ImportOptions::default()
    };
    let imported = replay(&w, &o).unwrap();
    let end = imported
        .runtime
        .timeline()
        .iter()
        .map(|t| t.end)
        .max()
        .unwrap();
    let (a, b) = (recorded.as_ns() as f64, end.as_ns() as f64);
    let err = (a - b).abs() / a;
    assert!(
        err < 0.01,
        "recorded {recorded}, imported {end} ({:.3}%)",
        100.0 * err
    );
    std::fs::remove_dir_all(&dir).ok();
}
