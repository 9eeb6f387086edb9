//! Handles are checked on every use: a destroyed, stale or foreign stream, event or context is
//! an error with the documented ACL code — never a panic, never some other object — and the
//! refused call changes nothing.

use npusim::prelude::*;
use npusim::{HostFunc, Launch};
use npusim::{Stats, codes};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

/// Asserts `result` failed with `code`.
#[track_caller]
fn assert_code<T: std::fmt::Debug>(result: NpuResult<T>, code: i32) {
    match result {
        Ok(v) => panic!("expected error {code}, got Ok({v:?})"),
        Err(e) => assert_eq!(e.code(), code, "{e}"),
    }
}

/// Every stream-taking call, on `s`, each expected to fail with `code` without changing
/// anything the runtime reports.
#[track_caller]
fn every_stream_call_fails(rt: &Runtime, s: Stream, ev: Event, ptr: DevicePtr, code: i32) {
    let before: Stats = rt.stats();
    let host = rt.memory().malloc_host(64).unwrap();
    let before_host = rt.host_now();
    let fill = rt.kernel("fill_f32").unwrap();
    assert_code(
        rt.submit(Launch::new(
            fill,
            1,
            &[ptr.into(), 16usize.into(), 1.0f32.into()],
            s,
        )),
        code,
    );
    assert_code(
        rt.submit(HostFunc::new(s, || panic!("must never run"))),
        code,
    );
    assert_code(rt.streams().query(s), code);
    assert_code(rt.streams().synchronize(s), code);
    assert_code(
        rt.streams().synchronize_timeout(s, SimTime::from_ms(1)),
        code,
    );
    assert_code(rt.events().stream_wait(s, ev), code);
    assert_code(rt.events().record(ev, s), code);
    assert_code(rt.memory().memcpy_htod_async(ptr, &host, 64, s), code);
    assert_code(rt.memory().memcpy_dtoh_async(&host, ptr, 64, s), code);
    assert_code(rt.memory().memcpy_dtod_async(ptr, ptr, 64, s), code);
    assert_code(rt.memory().memset_async(ptr, 0, 64, s), code);
    assert_code(
        rt.memory().memcpy_htod_async_pageable(ptr, &[0u8; 64], s),
        code,
    );
    assert_code(rt.streams().destroy(s), code);
    let after = rt.stats();
    assert_eq!(after.frames, before.frames, "no frame ran, nothing queued");
    assert_eq!(after.live_tasks, before.live_tasks);
    assert_eq!(after.live_blocks, before.live_blocks);
    assert_eq!(
        rt.host_now(),
        before_host,
        "refused calls cost no host time"
    );
}

/// Proves the runtime still works: a fill on the current context's default stream.
#[track_caller]
fn still_works(rt: &Runtime) {
    let p = rt.memory().malloc(64).unwrap();
    let s = rt.contexts().default_stream().unwrap();
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[p.into(), 16usize.into(), 6.0f32.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut back = [0.0f32; 16];
    rt.memory().memcpy_dtoh(&mut back, p).unwrap();
    assert_eq!(back, [6.0; 16]);
    rt.memory().free(p).unwrap();
}

#[test]
fn a_destroyed_stream_is_refused_by_every_call() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let ev = rt.events().create().unwrap();
    let p = rt.memory().malloc(64).unwrap();
    rt.streams().destroy(s).unwrap();
    every_stream_call_fails(&rt, s, ev, p, codes::RT_INVALID_HANDLE);
    still_works(&rt);
}

#[test]
fn a_stale_stream_handle_never_names_the_stream_that_reuses_its_slot() {
    let rt = runtime();
    // The world recycles freed slots in batches, so free plenty of them.
    let old: Vec<Stream> = (0..300).map(|_| rt.streams().create().unwrap()).collect();
    for &s in &old {
        rt.streams().destroy(s).unwrap();
    }
    let (stale, new) = (0..300)
        .find_map(|_| {
            let new = rt.streams().create().unwrap();
            let stale = old
                .iter()
                .find(|s| s.entity().index() == new.entity().index())?;
            Some((*stale, new))
        })
        .expect("the world reused a slot (else this test proves nothing)");
    assert_ne!(stale, new, "same slot, different generation");
    assert_code(rt.streams().query(stale), codes::RT_INVALID_HANDLE);
    assert_code(rt.streams().synchronize(stale), codes::RT_INVALID_HANDLE);
    assert!(rt.streams().query(new).unwrap());
    rt.submit(Launch::new(rt.kernel("noop").unwrap(), 1, &[], new))
        .unwrap();
    rt.streams().synchronize(new).unwrap();
}

#[test]
fn a_stream_of_another_runtime_is_refused() {
    let rt = runtime();
    let other = runtime();
    let foreign = other.streams().create().unwrap();
    let ev = rt.events().create().unwrap();
    let p = rt.memory().malloc(64).unwrap();
    every_stream_call_fails(&rt, foreign, ev, p, codes::RT_INVALID_HANDLE);
    // The other runtime's default stream too, though its entity exists in this world as well.
    let theirs = other.contexts().default_stream().unwrap();
    assert_eq!(
        theirs.entity(),
        rt.contexts().default_stream().unwrap().entity(),
        "same entity, different runtime"
    );
    assert!(matches!(
        rt.streams().query(theirs),
        Err(NpuError::ForeignHandle(_))
    ));
    still_works(&rt);
    still_works(&other);
}

#[test]
fn a_stream_of_another_context_is_refused() {
    let rt = runtime();
    let primary = rt.contexts().current().unwrap();
    let s = rt.streams().create().unwrap();
    let p = rt.memory().malloc(64).unwrap();
    let second = rt.contexts().create(0).unwrap();
    assert_eq!(
        rt.contexts().current().unwrap(),
        second,
        "a new context is current"
    );
    let ev = rt.events().create().unwrap();
    every_stream_call_fails(&rt, s, ev, p, codes::RT_STREAM_CONTEXT);
    still_works(&rt);
    rt.contexts().set_current(primary).unwrap();
    assert!(rt.streams().query(s).unwrap(), "fine in its own context");
    rt.streams().synchronize(s).unwrap();
}

/// Every event-taking call, each expected to fail with `code` and change nothing.
#[track_caller]
fn every_event_call_fails(rt: &Runtime, ev: Event, good: Event, s: Stream, code: i32) {
    let before = rt.stats();
    assert_code(rt.events().record(ev, s), code);
    assert_code(rt.events().stream_wait(s, ev), code);
    assert_code(rt.events().query(ev), code);
    assert_code(rt.events().synchronize(ev), code);
    assert_code(rt.events().elapsed_ms(ev, good), code);
    assert_code(rt.events().elapsed_ms(good, ev), code);
    assert_code(rt.events().timestamp(ev), code);
    assert_code(rt.events().destroy(ev), code);
    assert_eq!(rt.stats(), before, "refused calls change nothing");
}

#[test]
fn a_destroyed_event_is_refused_by_every_call() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let (ev, good) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(good, s).unwrap();
    rt.streams().synchronize(s).unwrap();
    rt.events().destroy(ev).unwrap();
    every_event_call_fails(&rt, ev, good, s, codes::RT_INVALID_HANDLE);
    rt.events().record(good, s).unwrap();
    rt.events().synchronize(good).unwrap();
}

#[test]
fn an_event_of_another_runtime_is_refused() {
    let rt = runtime();
    let other = runtime();
    let foreign = other.events().create().unwrap();
    let s = rt.streams().create().unwrap();
    let good = rt.events().create().unwrap();
    rt.events().record(good, s).unwrap();
    rt.streams().synchronize(s).unwrap();
    every_event_call_fails(&rt, foreign, good, s, codes::RT_INVALID_HANDLE);
    assert!(other.events().query(foreign).unwrap());
}

#[test]
fn an_event_of_another_context_is_refused() {
    let rt = runtime();
    let primary = rt.contexts().current().unwrap();
    let ev = rt.events().create().unwrap();
    rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    let good = rt.events().create().unwrap();
    rt.events().record(good, s).unwrap();
    rt.streams().synchronize(s).unwrap();
    every_event_call_fails(&rt, ev, good, s, codes::RT_STREAM_CONTEXT);
    rt.contexts().set_current(primary).unwrap();
    assert!(rt.events().query(ev).unwrap());
}

#[test]
fn a_destroyed_context_is_refused() {
    let rt = runtime();
    let primary = rt.contexts().current().unwrap();
    let ctx = rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    let ev = rt.events().create().unwrap();
    rt.contexts().destroy(ctx).unwrap();
    // As in ACL, the thread has no current context until it sets one.
    assert_code(rt.contexts().current(), codes::RT_CONTEXT_NULL);
    rt.contexts().set_current(primary).unwrap();
    let before = rt.stats();
    assert_code(rt.contexts().set_current(ctx), codes::RT_INVALID_HANDLE);
    assert_code(rt.contexts().push(ctx), codes::RT_INVALID_HANDLE);
    assert_code(rt.contexts().destroy(ctx), codes::RT_INVALID_HANDLE);
    // Its streams and events went with it.
    assert_code(rt.streams().query(s), codes::RT_INVALID_HANDLE);
    assert_code(rt.events().query(ev), codes::RT_INVALID_HANDLE);
    assert_eq!(rt.stats(), before);
    still_works(&rt);
}

#[test]
fn a_context_of_another_runtime_is_refused() {
    let rt = runtime();
    let other = runtime();
    let foreign = other.contexts().current().unwrap();
    assert_code(rt.contexts().set_current(foreign), codes::RT_INVALID_HANDLE);
    assert_code(rt.contexts().push(foreign), codes::RT_INVALID_HANDLE);
    assert_code(rt.contexts().destroy(foreign), codes::RT_INVALID_HANDLE);
    still_works(&rt);
}

#[test]
fn calls_after_the_current_context_was_destroyed_fail_with_context_null() {
    let rt = runtime();
    let ctx = rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    rt.contexts().destroy(ctx).unwrap();
    let before = rt.stats();
    assert_code(rt.streams().create(), codes::RT_CONTEXT_NULL);
    assert_code(rt.events().create(), codes::RT_CONTEXT_NULL);
    assert_code(rt.memory().malloc(64), codes::RT_CONTEXT_NULL);
    assert_code(rt.contexts().default_stream(), codes::RT_CONTEXT_NULL);
    assert_code(rt.synchronize_device(), codes::RT_CONTEXT_NULL);
    assert_code(rt.contexts().current(), codes::RT_CONTEXT_NULL);
    // A handle of the destroyed context is itself stale, whatever is current.
    assert_code(rt.streams().query(s), codes::RT_INVALID_HANDLE);
    assert_eq!(codes::RT_CONTEXT_NULL, 107002);
    assert_eq!(rt.stats(), before);
    // Choosing a live context again repairs the thread.
    rt.contexts().set_device(0).unwrap();
    still_works(&rt);
}

#[test]
fn a_context_is_per_thread_and_a_new_thread_starts_on_the_primary_one() {
    let rt = runtime();
    let primary = rt.contexts().current().unwrap();
    let mine = rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                assert_eq!(rt.contexts().current().unwrap(), primary);
                // This thread's current context is not `mine`: its stream is foreign here.
                assert_code(rt.streams().query(s), codes::RT_STREAM_CONTEXT);
                still_works(&rt);
            })
            .join()
            .unwrap();
    });
    assert_eq!(rt.contexts().current().unwrap(), mine);
    assert!(rt.streams().query(s).unwrap());
}

#[test]
fn the_primary_context_and_the_default_stream_cannot_be_destroyed() {
    let rt = runtime();
    let primary = rt.contexts().current().unwrap();
    assert_code(
        rt.contexts().destroy(primary),
        codes::RT_CONTEXT_RELEASE_ERROR,
    );
    assert_code(
        rt.streams()
            .destroy(rt.contexts().default_stream().unwrap()),
        codes::RT_PARAM_INVALID,
    );
    still_works(&rt);
}

#[test]
fn launching_an_unknown_kernel_or_a_bad_block_dim_is_refused() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let before = rt.stats();
    assert_code(
        rt.submit(Launch::new(Kernel::new(rt.id(), 1 << 30, 0), 1, &[], s)),
        codes::RT_PARAM_INVALID,
    );
    assert_code(rt.kernel("no_such_kernel"), codes::RT_PARAM_INVALID);
    let noop = rt.kernel("noop").unwrap();
    assert_code(
        rt.submit(Launch::new(noop, 0, &[], s)),
        codes::RT_PARAM_INVALID,
    );
    assert_code(
        rt.submit(Launch::new(noop, 1, &[Arg::U64(0); 17], s)),
        codes::RT_PARAM_INVALID,
    );
    assert_eq!(rt.stats(), before);
    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
    rt.streams().synchronize(s).unwrap();
}

#[test]
fn a_launch_with_a_bad_stream_and_a_bad_kernel_reports_the_stream_and_costs_no_host_time() {
    let rt = runtime();
    let other = runtime();
    let foreign_kernel = other.kernel("noop").unwrap();
    let s = rt.streams().create().unwrap();
    rt.streams().destroy(s).unwrap();
    let before = rt.host_now();
    // The stream is checked before the kernel, whichever is wrong.
    assert_code(
        rt.submit(Launch::new(foreign_kernel, 1, &[], s)),
        codes::RT_INVALID_HANDLE,
    );
    let live = rt.streams().create().unwrap();
    rt.contexts().create(0).unwrap();
    assert_code(
        rt.submit(Launch::new(foreign_kernel, 1, &[], live)),
        codes::RT_STREAM_CONTEXT,
    );
    // A refused launch does not move the host clock (creating the context may).
    let after_create = rt.host_now();
    assert_code(
        rt.submit(Launch::new(foreign_kernel, 1, &[], live)),
        codes::RT_STREAM_CONTEXT,
    );
    assert_eq!(rt.host_now(), after_create);
    assert!(after_create >= before);
    still_works(&rt);
}

/// An embedder may take the runtime's world out through a guard and put another in: calls then
/// see the world the runtime has (the old handles name nothing in it: errors, not a panic or
/// another world's objects), and work again once the world is put back.
#[test]
fn a_world_swapped_out_and_back_through_a_guard_is_the_one_calls_see() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let ev = rt.events().create().unwrap();
    still_works(&rt);
    let mut taken = bevy_ecs::world::World::new();
    std::mem::swap(rt.lock_world().world_mut(), &mut taken);
    assert!(rt.streams().query(s).is_err());
    assert!(rt.events().record(ev, s).is_err());
    assert!(rt.events().stream_wait(s, ev).is_err());
    assert!(rt.events().query(ev).is_err());
    std::mem::swap(rt.lock_world().world_mut(), &mut taken);
    rt.events().record(ev, s).unwrap();
    rt.streams().synchronize(s).unwrap();
    assert!(rt.events().query(ev).unwrap());
    still_works(&rt);
}

/// A user system that panics mid-frame poisons nothing: the panic reaches the caller of the
/// call that ran the frame, and the runtime goes on working.
#[test]
fn a_user_system_that_panics_leaves_the_runtime_working() {
    use bevy_ecs::prelude::*;
    #[derive(Resource)]
    struct Armed(bool);
    fn explode(mut armed: ResMut<Armed>) {
        if std::mem::replace(&mut armed.0, false) {
            panic!("a user system fails");
        }
    }
    let rt = runtime();
    {
        let mut g = rt.lock_world();
        g.world_mut().insert_resource(Armed(true));
        g.schedule_mut()
            .add_systems(explode.in_set(NpuSet::Dispatch));
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.step()));
    std::panic::set_hook(hook);
    assert!(stepped.is_err(), "the system's panic reaches the caller");
    still_works(&rt);
    still_works(&rt);
}
