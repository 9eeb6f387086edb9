//! `npusim`: record a program's API calls, replay a trace, compare what-if variants of the
//! machine, convert a trace to a Chrome trace, and show the device presets. A crate of its own,
//! so library users do not build the command line's dependencies.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use npusim_engine::DeviceConfig;
use npusim_engine::record::{
    ReplayOptions, Replayed, SETTABLE, Summary, Trace, Variant, replay, whatif,
};

/// `println!` that never panics: output to a closed pipe (`npusim dump t | head`) is dropped.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

const EXAMPLES: &str = "\
Examples:
  npusim record -o ex10.npt -- target/release/examples/10_data_parallel
  npusim replay ex10.npt
  npusim replay trace.%d.et --chakra --devices 8
  npusim export --chakra ex10.npt -o ex10.%d.et
  npusim whatif ex10.npt --set hbm_bandwidth=2x --set ai_cores=48 --devices 64
  npusim timeline ex10.npt -o ex10.json      (open in https://ui.perfetto.dev)
  npusim info";

/// A simulated NPU: record, replay and what-if for programs on npusim.
#[derive(Parser)]
#[command(name = "npusim", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a program (a Rust program on npusim, or a C program on libnpusim_acl) with
    /// recording on (`NPUSIM_RECORD`); each runtime it makes writes a trace.
    #[command(after_help = "Example:\n  npusim record -o run.npt -- ./my_program --steps 10")]
    Record {
        /// The trace file (a second runtime of the program writes FILE.2, and so on).
        #[arg(short, long)]
        output: PathBuf,
        /// Also record the host data sent to the devices (so a replay computes the results).
        #[arg(long)]
        data: bool,
        /// The program and its arguments.
        #[arg(required = true, last = true)]
        program: Vec<String>,
    },
    /// Replays a trace on a fresh runtime and prints its figures.
    #[command(
        after_help = "Examples:\n  npusim replay run.npt --timing-only --devices 64\n  \
                            npusim replay trace.%d.et --chakra --devices 8 --preset 910b"
    )]
    Replay {
        /// The trace (with --chakra: the ranks' files, %d standing for the rank).
        trace: PathBuf,
        /// The trace is a Chakra execution trace, one file per rank (replayed timing-only;
        /// --devices: the ranks, default every consecutive file from rank 0).
        #[arg(long)]
        chakra: bool,
        /// With --chakra: price compute nodes by their recorded duration_micros instead of
        /// the preset's roofline.
        #[arg(long, requires = "chakra")]
        durations: bool,
        /// With --chakra: submit no node before its start_time_micros (keeps the host's
        /// submission times of a trace `npusim export --chakra` wrote).
        #[arg(long, requires = "chakra")]
        start_times: bool,
        #[command(flatten)]
        machine: Machine,
        /// Move no data (kernels, copies and collectives take their modelled time only).
        #[arg(long)]
        timing_only: bool,
        /// Also write the replay's timeline as Chrome trace JSON.
        #[arg(long)]
        timeline: Option<PathBuf>,
    },
    /// Replays a trace timing-only under variants of the machine and prints one table.
    #[command(
        after_help = "Example:\n  npusim whatif run.npt --set hbm_bandwidth=2x \
                            --set ai_cores=48,core_clock_hz=1.2x --devices 1024\n\n\
                            Each --set is one variant (comma-separated settings combine); the \
                            recorded machine is always the first row. --devices applies to \
                            every row."
    )]
    Whatif {
        /// The trace.
        trace: PathBuf,
        /// A variant: FIELD=VALUE[,FIELD=VALUE…]; VALUE is a number or a factor (2x).
        #[arg(long = "set", value_name = "FIELD=VALUE")]
        sets: Vec<String>,
        /// Devices for every variant (a data-parallel trace's ranks replicate; rings grow).
        #[arg(long)]
        devices: Option<u32>,
        /// Write each variant's Chrome trace into this directory.
        #[arg(long)]
        timeline: Option<PathBuf>,
    },
    /// Converts a trace to Chrome trace-event JSON (replaying it, timing-only by default).
    #[command(after_help = "Example:\n  npusim timeline run.npt -o run.json")]
    Timeline {
        /// The trace.
        trace: PathBuf,
        /// The JSON file.
        #[arg(short, long)]
        output: PathBuf,
        /// Replay functionally (needs the trace's host data for meaningful values).
        #[arg(long)]
        functional: bool,
    },
    /// Writes a recorded trace as Chakra execution traces, one file per device (for ASTRA-sim,
    /// or `npusim replay --chakra`).
    #[command(
        after_help = "Example:\n  npusim export --chakra run.npt -o run.%d.et\n  \
                            npusim replay run.%d.et --chakra --start-times"
    )]
    Export {
        /// Write Chakra ET (the only format export writes).
        #[arg(long, required = true)]
        chakra: bool,
        /// The trace.
        trace: PathBuf,
        /// The files, %d standing for the device (gzip when the name ends in .gz).
        #[arg(short, long)]
        output: String,
    },
    /// Prints a trace as JSON (header and calls; blobs by size).
    #[command(after_help = "Example:\n  npusim dump run.npt | less")]
    Dump {
        /// The trace.
        trace: PathBuf,
    },
    /// Shows the device presets and their figures, and the fields `whatif --set` takes.
    Info,
}

/// Which machine to replay on.
#[derive(clap::Args)]
struct Machine {
    /// Devices (default: as recorded).
    #[arg(long)]
    devices: Option<u32>,
    /// A preset instead of the recorded one: 910b or small.
    #[arg(long)]
    preset: Option<String>,
}

fn preset(name: &str) -> Result<DeviceConfig, String> {
    match name {
        "910b" | "ascend-910b" => Ok(DeviceConfig::ascend_910b()),
        "small" => Ok(DeviceConfig::small()),
        other => Err(format!("unknown preset {other:?}: expected 910b or small")),
    }
}

fn read(path: &PathBuf) -> Result<Trace, String> {
    Trace::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn bar(len: usize, label: String) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} calls ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(label);
    // Only long replays show a bar.
    if len < 20_000 {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb
}

fn run_replay(trace: &Trace, mut options: ReplayOptions, label: &str) -> Result<Replayed, String> {
    let pb = bar(trace.entries.len(), label.to_string());
    let p = pb.clone();
    options.progress = Some(Box::new(move |done, _| p.set_position(done as u64)));
    let r = replay(trace, options).map_err(|e| format!("replay: {e}"))?;
    pb.finish_and_clear();
    Ok(r)
}

fn gib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// Writes the runtime's timeline to `path` and says where.
fn write_timeline(runtime: &npusim_engine::Runtime, path: &std::path::Path) -> Result<(), String> {
    runtime
        .export_timeline(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    out!("timeline: {}", path.display());
    Ok(())
}

fn print_table(rows: &[Summary]) {
    let w = rows.iter().map(|s| s.name.len()).max().unwrap_or(0).max(12);
    out!(
        "{:<w$} {:>7} {:>14} {:>7} {:>7} {:>7} {:>9} {:>11}",
        "variant",
        "devices",
        "time",
        "cores",
        "DMA",
        "links",
        "comm hid",
        "peak mem"
    );
    for s in rows {
        out!(
            "{:<w$} {:>7} {:>14} {:>6.1}% {:>6.1}% {:>6.1}% {:>8.1}% {:>11}",
            s.name,
            s.devices,
            s.time.to_string(),
            100.0 * s.core_busy,
            100.0 * s.dma_busy,
            100.0 * s.link_busy,
            100.0 * s.comm_hidden,
            gib(s.peak_memory)
        );
    }
    out!("");
    for s in rows {
        let top: Vec<String> = s
            .critical
            .iter()
            .map(|t| format!("{} {} ×{}", t.name, t.time, t.count))
            .collect();
        out!("critical path, {}: {}", s.name, top.join(", "));
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("npusim: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Record {
            output,
            data,
            program,
        } => {
            let mut cmd = std::process::Command::new(&program[0]);
            cmd.args(&program[1..]).env("NPUSIM_RECORD", &output);
            if data {
                cmd.env("NPUSIM_RECORD_DATA", "1");
            }
            let status = cmd
                .status()
                .map_err(|e| format!("cannot run {:?}: {e}", program[0]))?;
            if !output.exists() {
                return Err(format!(
                    "{} made no trace: does it use npusim (a Runtime, or aclInit)?",
                    program[0]
                ));
            }
            let trace = read(&output)?;
            eprintln!(
                "recorded {} calls on {} device(s) to {}",
                trace.entries.len(),
                trace.header.devices,
                output.display()
            );
            Ok(if status.success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8)
            })
        }
        Command::Replay {
            trace,
            chakra: true,
            durations,
            start_times,
            machine,
            timeline,
            ..
        } => {
            let started = std::time::Instant::now();
            let w = npusim_chakra::Workload::read(&trace.to_string_lossy(), machine.devices)
                .map_err(|e| e.to_string())?;
            let mut o = npusim_chakra::ImportOptions {
                durations,
                start_times,
                ..Default::default()
            };
            if let Some(p) = machine.preset.as_deref() {
                o.device = preset(p)?;
            }
            let r = npusim_chakra::replay(&w, &o).map_err(|e| e.to_string())?;
            let summary = Summary::of("chakra", &r.runtime);
            out!(
                "replayed a Chakra workload of {} ranks, {} nodes in {:.2?} (wall): {} tasks, \
                 simulated time {}",
                w.ranks.len(),
                w.ranks.iter().map(|f| f.nodes.len()).sum::<usize>(),
                started.elapsed(),
                summary.tasks,
                summary.time
            );
            print_table(&[summary]);
            if let Some(path) = timeline {
                write_timeline(&r.runtime, &path)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay {
            trace,
            machine,
            timing_only,
            timeline,
            ..
        } => {
            let t = read(&trace)?;
            let device = machine.preset.as_deref().map(preset).transpose()?;
            let started = std::time::Instant::now();
            let r = run_replay(
                &t,
                ReplayOptions {
                    devices: machine.devices,
                    device,
                    timing_only,
                    ..ReplayOptions::default()
                },
                "replay",
            )?;
            let summary = Summary::of("replay", &r.runtime);
            out!(
                "replayed {} calls in {:.2?} (wall): {} tasks, simulated time {}, host clock {}",
                r.calls,
                started.elapsed(),
                summary.tasks,
                summary.time,
                r.runtime.host_now()
            );
            for (i, e) in r.errors.iter().take(10) {
                out!("  call {i}: {e}");
            }
            print_table(&[summary]);
            if let Some(path) = timeline {
                write_timeline(&r.runtime, &path)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Whatif {
            trace,
            sets,
            devices,
            timeline,
        } => {
            let t = read(&trace)?;
            let mut variants = vec![Variant {
                name: "recorded".into(),
                devices,
                ..Variant::default()
            }];
            for spec in &sets {
                let mut v = Variant {
                    name: spec.clone(),
                    devices,
                    ..Variant::default()
                };
                for part in spec.split(',') {
                    v = v.set(part).map_err(|e| e.to_string())?;
                }
                variants.push(v);
            }
            let pb = bar(t.entries.len() * variants.len(), "what-if".into());
            let n = t.entries.len();
            let runs = whatif(&t, &variants, |i, done, _| {
                pb.set_position((i * n + done) as u64)
            })
            .map_err(|e| format!("what-if: {e}"))?;
            pb.finish_and_clear();
            let rows: Vec<Summary> = runs.iter().map(|(s, _)| s.clone()).collect();
            print_table(&rows);
            if let Some(dir) = timeline {
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                for (i, (s, r)) in runs.iter().enumerate() {
                    let safe: String = s
                        .name
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                        .collect();
                    let path = dir.join(format!("{i}_{safe}.json"));
                    write_timeline(&r.runtime, &path)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Timeline {
            trace,
            output,
            functional,
        } => {
            let t = read(&trace)?;
            let r = run_replay(
                &t,
                ReplayOptions {
                    timing_only: !functional,
                    ..ReplayOptions::default()
                },
                "timeline",
            )?;
            r.runtime
                .export_timeline(&output)
                .map_err(|e| format!("{}: {e}", output.display()))?;
            out!("{}: {} tasks", output.display(), r.runtime.timeline().len());
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { trace, output, .. } => {
            let t = read(&trace)?;
            if !output.contains("%d") && t.header.devices > 1 {
                return Err(format!(
                    "{output}: the trace has {} devices; name the files with %d (run.%d.et)",
                    t.header.devices
                ));
            }
            let files = npusim_chakra::export(&t).map_err(|e| e.to_string())?;
            for (r, f) in files.iter().enumerate() {
                f.write(output.replace("%d", &r.to_string()))
                    .map_err(|e| e.to_string())?;
            }
            out!(
                "{}: {} ranks, {} nodes",
                output,
                files.len(),
                files.iter().map(|f| f.nodes.len()).sum::<usize>()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Dump { trace } => {
            out!("{}", read(&trace)?.to_json());
            Ok(ExitCode::SUCCESS)
        }
        Command::Info => {
            for d in [DeviceConfig::ascend_910b(), DeviceConfig::small()] {
                out!("{}:", d.name);
                out!("  AI cores            {}", d.ai_cores);
                out!("  vector cores / AIC  {}", d.vector_cores_per_ai_core);
                out!("  DMA engines         {}", d.dma_engines);
                out!(
                    "  core clock          {:.2} GHz",
                    d.core_clock_hz as f64 / 1e9
                );
                out!("  HBM                 {}", gib(d.hbm_bytes));
                out!("  HBM bandwidth       {:.0} GB/s", d.hbm_bandwidth / 1e9);
                out!(
                    "  host link           {:.0} GB/s",
                    d.host_link_bandwidth / 1e9
                );
                out!(
                    "  vector / cube f16   {} / {} flops per cycle per core",
                    d.vector_flops_per_cycle,
                    d.cube_f16_flops_per_cycle
                );
                out!("  unified buffer      {} KiB", d.ub_bytes / 1024);
            }
            out!("whatif --set fields: {}", SETTABLE.join(", "));
            out!(
                "trace format version {}",
                npusim_engine::record::FORMAT_VERSION
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
