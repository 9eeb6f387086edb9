//! An embedder can take npusim's own resources out of the runtime's world through a
//! [`RuntimeGuard`](npusim::RuntimeGuard). Nothing then panics: a call that needs the missing
//! resource fails with `ACL_ERROR_RT_INTERNAL_ERROR` naming it, a query answers with a default,
//! and frames run without the stages that have nothing to work with.

use npusim::{Collective, Launch, LaunchOp};
use std::panic::{AssertUnwindSafe, catch_unwind};

use npusim::prelude::*;
use npusim::record::Recording;
use npusim::systems::{NpuResource, RESOURCES};
use npusim::{DataType, ReduceOp, SanitizerConfig, codes};

/// Two devices, without worker threads (the tests build many runtimes).
fn config() -> RuntimeConfig {
    RuntimeConfig {
        devices: 2,
        threads: 1,
        callback_timeout: std::time::Duration::from_secs(5),
        ..RuntimeConfig::default()
    }
}

fn runtime() -> Runtime {
    Runtime::new(config()).unwrap()
}

/// Runs the calls of one probe, noting every one that panics.
struct Probe<'a> {
    resource: &'a str,
    panics: &'a mut Vec<String>,
}

impl Probe<'_> {
    /// `f()`, or `None` (and a note) when it panics.
    fn call<T>(&mut self, call: &str, f: impl FnOnce() -> T) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.panics.push(format!(
                    "without {}: {call} panicked: {message}",
                    self.resource
                ));
                None
            }
        }
    }
}

/// An error a call gave without the resource: the one that says a resource is missing has
/// the runtime's internal-error code.
fn check_error(e: &NpuError) {
    if matches!(e, NpuError::MissingResource(_)) {
        assert_eq!(e.code(), codes::RT_INTERNAL_ERROR, "{e}");
    }
}

/// Builds a runtime, queues some work, removes `resource` through a guard,
/// then makes a representative set of calls: each must return (an error or an answer), not
/// panic.
fn probe(resource: &NpuResource, config: RuntimeConfig, panics: &mut Vec<String>) {
    let rt = Runtime::new(config).unwrap();
    let s = rt.streams().create().unwrap();
    let safe_stream = rt.device_context(0).unwrap().stream().unwrap();
    let ev = rt.events().create().unwrap();
    let buf = rt.memory().malloc(4096).unwrap();
    let other = rt.memory().malloc(4096).unwrap();
    let noop = rt.kernel("noop").unwrap();
    let add = rt.kernel("vector_add_f32").unwrap();
    let sigmoid = rt.ops().get("sigmoid_f32").unwrap();
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    rt.contexts().set_device(1).unwrap();
    let (s1, buf1) = (
        rt.streams().create().unwrap(),
        rt.memory().malloc(4096).unwrap(),
    );
    rt.contexts().set_device(0).unwrap();
    // In flight when the resource goes.
    rt.memory().memset_async(buf, 1, 4096, s).unwrap();
    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
    rt.events().record(ev, s).unwrap();
    assert!((resource.remove)(rt.lock_world().world_mut()));
    let resource = resource.name;
    let mut p = Probe { resource, panics };
    macro_rules! call {
        ($name:literal, $e:expr) => {
            if let Some(Err(e)) = p.call($name, || $e) {
                check_error(&e);
            }
        };
    }
    call!("step", Ok::<_, NpuError>(rt.step()));
    call!(
        "malloc",
        rt.memory().malloc(256).and_then(|p| rt.memory().free(p))
    );
    call!("memcpy_htod", rt.memory().memcpy_htod(other, &[2u8; 64]));
    call!("memcpy_dtoh", rt.memory().memcpy_dtoh(&mut [0u8; 64], buf));
    call!("memcpy_dtod", rt.memory().memcpy_dtod(other, buf, 64));
    call!("memset_async", rt.memory().memset_async(other, 3, 64, s));
    call!("kernel", rt.kernel("noop"));
    call!("kernel_names", Ok::<_, NpuError>(rt.kernels().names()));
    call!("launch", rt.submit(Launch::new(noop, 1, &[], s)));
    call!(
        "launch_builder",
        safe_stream.launch_builder(&noop).grid(1).launch()
    );
    call!(
        "launch of vector_add_f32",
        rt.submit(Launch::new(
            add,
            1,
            &[buf.into(), buf.into(), other.into(), 16u64.into()],
            s
        ))
    );
    let mine = || NativeKernel::new("mine", |_| Ok(()), |_, _| KernelCost::vector(1.0, 0.0));
    call!(
        "register_kernel",
        Ok::<_, NpuError>(rt.kernels().register(mine()))
    );
    call!("try_register_kernel", rt.kernels().try_register(mine()));
    call!("op", rt.ops().get("sigmoid_f32"));
    call!("op_names", Ok::<_, NpuError>(rt.ops().names()));
    call!(
        "launch_op",
        rt.submit(LaunchOp::new(
            sigmoid,
            &[TensorArg::new(buf, &[16])],
            &[TensorArg::output(other)],
            &[],
            s
        ))
    );
    call!(
        "create_shape",
        rt.ops().create_shape().and_then(|h| rt.ops().free_shape(h))
    );
    call!("shape_stats", Ok::<_, NpuError>(rt.ops().shape_stats()));
    call!("set_tiling_log_enabled", {
        rt.ops().set_tiling_log_enabled(true);
        Ok::<_, NpuError>(())
    });
    call!(
        "take_tiling_log",
        Ok::<_, NpuError>(rt.ops().take_tiling_log())
    );
    call!("create_stream", rt.streams().create());
    call!("create_event", rt.events().create());
    call!("record_event", rt.events().record(ev, s));
    call!("stream_wait_event", rt.events().stream_wait(s, ev));
    call!("query_event", rt.events().query(ev));
    call!(
        "all_reduce",
        rt.submit(
            Collective::all_reduce(buf, other, 16, DataType::F32, ReduceOp::Sum).on(&comms[0], s)
        )
        .and_then(|_| rt.contexts().set_device(1))
        .and_then(|()| {
            rt.submit(
                Collective::all_reduce(buf1, buf1, 16, DataType::F32, ReduceOp::Sum)
                    .on(&comms[1], s1),
            )
        })
    );
    call!("set_device", rt.contexts().set_device(0));
    call!("synchronize_event", rt.events().synchronize(ev));
    call!("query_stream", rt.streams().query(s));
    call!(
        "synchronize_stream_timeout",
        rt.streams().synchronize_timeout(s, SimTime::from_ms(1))
    );
    call!("synchronize_stream", rt.streams().synchronize(s));
    call!("synchronize_device", rt.synchronize_device());
    call!("run_until_idle", rt.run_until_idle());
    call!("free", rt.memory().free(buf));
    call!("trim_memory", rt.memory().trim());
    call!("memory_stats", rt.memory().stats());
    call!("stats", Ok::<_, NpuError>(rt.stats()));
    call!("is_idle", Ok::<_, NpuError>(rt.is_idle()));
    call!("device_count", Ok::<_, NpuError>(rt.device_count()));
    call!("device_config", rt.device_config(0));
    call!("device_now", Ok::<_, NpuError>(rt.device_now()));
    call!("host_work", {
        rt.host_work(SimTime(10));
        Ok::<_, NpuError>(())
    });
    call!("timeline", Ok::<_, NpuError>(rt.timeline()));
    call!("timeline_json", Ok::<_, NpuError>(rt.timeline_json()));
    call!("take_timeline", Ok::<_, NpuError>(rt.take_timeline()));
    call!("set_timeline_enabled", {
        rt.set_timeline_enabled(true);
        Ok::<_, NpuError>(())
    });
    call!(
        "link_stats",
        Ok::<_, NpuError>(rt.collectives().link_stats())
    );
    call!(
        "comm_engine_busy",
        Ok::<_, NpuError>(rt.collectives().engine_busy())
    );
    call!("topology", Ok::<_, NpuError>(rt.collectives().topology()));
    call!(
        "take_kernel_log",
        Ok::<_, NpuError>(rt.binaries().take_kernel_log())
    );
    call!(
        "take_binary_launch_stats",
        Ok::<_, NpuError>(rt.binaries().take_launch_stats())
    );
    call!(
        "sanitizer_shadow",
        Ok::<_, NpuError>(rt.sanitizer().shadow())
    );
    call!(
        "sanitizer_reports",
        Ok::<_, NpuError>(rt.sanitizer().reports())
    );
    call!("drop of a safe stream", {
        drop(safe_stream);
        Ok::<_, NpuError>(())
    });
    call!("take_drop_errors", Ok::<_, NpuError>(rt.take_drop_errors()));
    call!("destroy_event", rt.events().destroy(ev));
    call!("destroy_stream", rt.streams().destroy(s));
    call!("comm_destroy", rt.collectives().destroy(comms[1]));
    call!("reset_context", rt.contexts().reset());
    call!(
        "create_context",
        rt.contexts()
            .create(1)
            .and_then(|c| rt.contexts().destroy(c))
    );
    call!("take_trace", Ok::<_, NpuError>(rt.take_trace()));
}

/// Runs [`probe`] for every resource `init_resources` inserts and fails naming each call
/// that panicked.
fn probe_all(config: impl Fn() -> RuntimeConfig) {
    let mut panics = Vec::new();
    for resource in RESOURCES {
        probe(resource, config(), &mut panics);
    }
    assert!(
        panics.is_empty(),
        "{} calls panicked:\n{}",
        panics.len(),
        panics.join("\n")
    );
}

#[test]
fn no_call_panics_once_an_embedder_removed_one_of_npusims_resources() {
    probe_all(config);
}

#[test]
fn no_call_panics_without_a_resource_when_the_sanitizer_is_on() {
    probe_all(|| RuntimeConfig {
        sanitizer: SanitizerConfig::report(),
        ..config()
    });
}

#[test]
fn no_call_panics_without_a_resource_while_calls_are_recorded() {
    probe_all(|| RuntimeConfig {
        recording: Some(Recording {
            path: None,
            data: true,
        }),
        ..config()
    });
}

/// The error says which resource is missing, with the runtime's internal-error code.
#[test]
fn a_call_that_needs_a_removed_resource_names_it() {
    let rt = runtime();
    rt.lock_world()
        .world_mut()
        .remove_resource::<npusim::components::KernelRegistry>();
    let err = rt.kernel("noop").unwrap_err();
    assert_eq!(err, NpuError::MissingResource("KernelRegistry"));
    assert_eq!(err.code(), codes::RT_INTERNAL_ERROR);
    assert!(err.to_string().contains("KernelRegistry"), "{err}");
}

/// Queued work that a stage without its resource cannot run: the wait for it fails naming
/// the resource, rather than panic mid-frame or hang; put back, the work runs.
#[test]
fn a_wait_for_work_a_removed_resource_holds_up_names_it() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let buf = rt.memory().malloc(256).unwrap();
    rt.memory().memset_async(buf, 5, 256, s).unwrap();
    let clock = rt
        .lock_world()
        .world_mut()
        .remove_resource::<npusim::components::SimClock>()
        .unwrap();
    assert_eq!(
        rt.streams().synchronize(s),
        Err(NpuError::MissingResource("SimClock"))
    );
    assert_eq!(rt.device_now(), SimTime::ZERO);
    rt.lock_world().world_mut().insert_resource(clock);
    rt.streams().synchronize(s).unwrap();
    let mut out = [0u8; 256];
    rt.memory().memcpy_dtoh(&mut out, buf).unwrap();
    assert_eq!(out, [5u8; 256]);
}

/// A registration without the kernel registry is refused by the fallible call; the plain one
/// hands back a handle that names nothing.
#[test]
fn a_kernel_registered_without_the_registry_is_refused() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let registry = rt
        .lock_world()
        .world_mut()
        .remove_resource::<npusim::components::KernelRegistry>()
        .unwrap();
    let mine = || NativeKernel::new("mine", |_| Ok(()), |_, _| KernelCost::vector(1.0, 0.0));
    assert_eq!(
        rt.kernels().try_register(mine()),
        Err(NpuError::MissingResource("KernelRegistry"))
    );
    let dangling = rt.kernels().register(mine());
    rt.lock_world().world_mut().insert_resource(registry);
    assert!(rt.submit(Launch::new(dangling, 1, &[], s)).is_err());
    let k = rt.kernels().try_register(mine()).unwrap();
    rt.submit(Launch::new(k, 1, &[], s)).unwrap();
    rt.streams().synchronize(s).unwrap();
}
