use super::*;
use crate::task::{EventView, MemsetView, NewTask, TaskDescriptor, TaskExtra};

/// Streams as entities (nothing else of the world is needed).
fn entities(n: u32) -> Vec<Entity> {
    (1..=n).map(|i| Entity::from_raw_u32(i).unwrap()).collect()
}

/// A finished task at `seq` on `stream` with `desc` and, for a memset, its write.
fn task(stream: Entity, seq: u64, desc: TaskDescriptor) -> Task {
    let mut t = Task::from_new(
        NewTask {
            stream,
            seq,
            submit: SimTime::ZERO,
            desc,
            extra: TaskExtra::None,
        },
        Entity::PLACEHOLDER,
        Entity::PLACEHOLDER,
    );
    if let Some(m) = desc.as_memset() {
        t.access.push(Access::write(m.dst, m.bytes));
    }
    t
}

fn submit(san: &mut Sanitizer, stream: Entity, seq: u64, wait: Option<(Entity, u64)>) {
    san.submitted(
        Actor::Host,
        stream,
        0,
        seq,
        wait,
        None,
        "t".into(),
        EnqueueSite::Unknown,
    );
}

/// A memset of 64 bytes at 0x1000.
fn write() -> TaskDescriptor {
    TaskDescriptor::memset(MemsetView {
        dst: 0x1000,
        value: 0,
        bytes: 64,
    })
}

#[test]
fn a_wait_orders_its_stream_after_the_record_it_captured_and_nothing_else() {
    let s = entities(3);
    let (a, b, ev) = (s[0], s[1], s[2]);
    let record = TaskDescriptor::event(
        EventView {
            event: ev,
            record: 1,
        },
        false,
    );
    let wait = TaskDescriptor::event(
        EventView {
            event: ev,
            record: 1,
        },
        true,
    );
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    // a: write, record; b: wait, write; then a: a second write nobody waited for.
    submit(&mut san, a, 1, None);
    submit(&mut san, a, 2, None);
    submit(&mut san, b, 1, Some((ev, 1)));
    submit(&mut san, b, 2, None);
    submit(&mut san, a, 3, None);
    for (t, now) in [
        (task(a, 1, write()), 1),
        (task(a, 2, record), 2),
        (task(b, 1, wait), 3),
        (task(b, 2, write()), 4),
    ] {
        assert_eq!(san.completed(&t, true, SimTime(now)), None);
    }
    assert!(san.reports().is_empty(), "{:?}", san.reports());
    san.completed(&task(a, 3, write()), true, SimTime(5));
    assert_eq!(san.reports().len(), 1);
    assert_eq!(san.reports()[0].kind, ReportKind::Race);
    assert_eq!(
        (san.reports()[0].addr, san.reports()[0].bytes),
        (0x1000, 64)
    );
}

#[test]
fn a_free_in_host_order_reports_the_queued_write_that_completes_after_it() {
    let s = entities(1);
    let a = s[0];
    let ctx = Entity::PLACEHOLDER;
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    san.allocated(Actor::Host, ctx, 0, 0x1000, 64, None, EnqueueSite::Unknown);
    submit(&mut san, a, 1, None);
    san.freed(
        Actor::Host,
        ctx,
        0,
        0x1000,
        None,
        EnqueueSite::Unknown,
        SimTime(1),
    );
    assert!(san.reports().is_empty(), "nothing had touched it yet");
    san.completed(&task(a, 1, write()), true, SimTime(2));
    let r = &san.reports()[0];
    assert_eq!(r.kind, ReportKind::UseAfterFree);
    assert_eq!(
        (r.earlier.name.as_str(), r.block),
        ("free", Some((0x1000, 64)))
    );
}

#[test]
fn a_host_read_of_a_pinned_buffer_races_with_its_copy_until_the_host_synchronizes_the_stream() {
    let s = entities(1);
    let a = s[0];
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    submit(&mut san, a, 1, None);
    san.host_copy_submitted(a, 1, (7, 256), (0, 128), true, SimTime(1));
    let read = |san: &mut Sanitizer, range| {
        san.host_accessed(
            Actor::Host,
            (7, 256),
            range,
            false,
            EnqueueSite::Unknown,
            SimTime(1),
        )
    };
    assert_eq!(read(&mut san, (128, 256)), None);
    assert!(
        san.reports().is_empty(),
        "the copy writes only the first half"
    );
    read(&mut san, (64, 256));
    let r = &san.reports()[0];
    assert_eq!((r.kind, r.addr, r.bytes), (ReportKind::Race, 64, 64));
    assert_eq!((r.host_buffer, r.block), (Some(7), Some((0, 256))));
    san.completed(&task(a, 1, write()), true, SimTime(2));
    san.synchronized_stream(Actor::Host, a);
    let kept = san.shadow_stats().intervals;
    read(&mut san, (0, 256));
    assert_eq!(san.reports().len(), 1, "ordered after the copy now");
    assert_eq!(
        san.shadow_stats().intervals,
        kept - 1,
        "and the copy is forgotten"
    );
}

/// `actor` enqueues a 64-byte write at 0x1000 at `seq` on `stream` (a synchronous
/// call's when `sync`), and it completes at `now`.
fn write_by(san: &mut Sanitizer, actor: Actor, stream: Entity, seq: u64, sync: bool, now: u64) {
    san.submitted(
        actor,
        stream,
        0,
        seq,
        None,
        None,
        format!("{actor:?}").into(),
        EnqueueSite::Unknown,
    );
    if sync {
        san.sync_call_submitted(stream, seq);
    }
    san.completed(&task(stream, seq, write()), true, SimTime(now));
}

#[test]
fn synchronous_writes_from_two_threads_race_and_the_report_names_both_threads() {
    let d = entities(1)[0];
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    let a = Actor::Thread(san.host_thread(10, Some("a")));
    let b = Actor::Thread(san.host_thread(11, Some("b")));
    // Both on one stream (the one synchronous calls run on): its order is the runtime's
    // lock order, not the program's.
    write_by(&mut san, a, d, 1, true, 1);
    write_by(&mut san, b, d, 2, true, 2);
    let r = &san.reports()[0];
    assert_eq!((r.kind, r.addr, r.bytes), (ReportKind::Race, 0x1000, 64));
    let names = [&r.earlier.thread, &r.later.thread].map(|t| t.as_ref().map(|t| t.index));
    assert_eq!(names, [Some(0), Some(1)]);
    assert_eq!(
        r.earlier.thread.as_ref().unwrap().name.as_deref(),
        Some("a")
    );
    assert!(r.to_string().contains("host thread 1 (\"b\")"), "{r}");
    assert!(r.fix.contains("sanitizer_release"), "{}", r.fix);
}

#[test]
fn a_release_and_an_acquire_order_one_thread_s_calls_after_another_s() {
    let d = entities(1)[0];
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    let a = Actor::Thread(san.host_thread(10, None));
    let b = Actor::Thread(san.host_thread(11, None));
    write_by(&mut san, a, d, 1, true, 1);
    san.release(a, 5);
    san.acquire(b, 4); // another key: nothing
    san.acquire(b, 5);
    write_by(&mut san, b, d, 2, true, 2);
    // And back, through a host sync.
    san.host_sync(a);
    write_by(&mut san, a, d, 3, true, 3);
    assert!(san.reports().is_empty(), "{:?}", san.reports());
    // A write a made after its release is not covered by what b acquired.
    write_by(&mut san, a, d, 4, true, 4);
    san.acquire(b, 5);
    write_by(&mut san, b, d, 5, true, 5);
    assert_eq!(san.reports().len(), 1, "{:?}", san.reports());
}

#[test]
fn a_thread_starts_ordered_after_what_every_thread_did_before_its_first_call() {
    let d = entities(1)[0];
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    let a = Actor::Thread(san.host_thread(10, None));
    write_by(&mut san, a, d, 1, true, 1);
    let b = Actor::Thread(san.host_thread(11, None));
    assert_eq!(san.host_thread(11, None), 1, "numbered once");
    write_by(&mut san, b, d, 2, true, 2);
    assert!(san.reports().is_empty(), "{:?}", san.reports());
    assert_eq!(san.host_threads(), 2);
}

#[test]
fn a_synchronous_call_is_ordered_after_its_own_thread_s_device_work_only() {
    let s = entities(2);
    let (stream, d) = (s[0], s[1]);
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    let a = Actor::Thread(san.host_thread(10, None));
    let b = Actor::Thread(san.host_thread(11, None));
    // a: an asynchronous write on its stream, done; b's synchronous write after the
    // implicit device synchronize is not ordered after it.
    write_by(&mut san, a, stream, 1, false, 1);
    san.synchronized_own_work(b, 0);
    write_by(&mut san, b, d, 1, true, 2);
    let r = san.reports()[0].clone();
    assert_eq!(r.kind, ReportKind::Race);
    assert!(r.earlier.stream.is_some(), "{r}");
    assert_eq!(r.later.thread.as_ref().map(|t| t.index), Some(1), "{r}");
    // a's own synchronous call is.
    san.synchronized_own_work(a, 0);
    write_by(&mut san, a, d, 2, true, 3);
    assert_eq!(
        san.reports().len(),
        2,
        "only b's write races with a's: {:?}",
        san.reports()
    );
    assert_eq!(
        san.reports()[1].earlier.thread.as_ref().map(|t| t.index),
        Some(1)
    );
}

#[test]
fn on_a_stream_two_threads_share_a_thread_s_own_work_stops_at_its_own_last_task() {
    let s = entities(2);
    let (shared, d) = (s[0], s[1]);
    let mut san = Sanitizer::new(SanitizerConfig::report(), 1);
    let a = Actor::Thread(san.host_thread(10, None));
    let b = Actor::Thread(san.host_thread(11, None));
    write_by(&mut san, a, shared, 1, false, 1);
    write_by(&mut san, b, shared, 2, false, 2); // stream order: after a's, no race
    assert!(san.reports().is_empty(), "{:?}", san.reports());
    // a's synchronous call waits for the device, but is ordered after its own write only.
    san.synchronized_own_work(a, 0);
    write_by(&mut san, a, d, 1, true, 3);
    let r = &san.reports()[0];
    assert_eq!(r.kind, ReportKind::Race);
    assert_eq!(
        (r.earlier.stream.is_some(), r.earlier.position),
        (true, 2),
        "{r}"
    );
    assert_eq!(r.earlier.thread.as_ref().map(|t| t.index), Some(1), "{r}");
    // b's is ordered after both, once it is told of a's call.
    san.synchronized_own_work(b, 0);
    let found = san.findings();
    san.release(a, 3);
    san.acquire(b, 3);
    write_by(&mut san, b, d, 2, true, 4);
    assert_eq!(san.findings(), found, "{:?}", san.reports());
}

#[test]
fn a_clock_covers_what_it_joined() {
    let mut a = VectorClock::default();
    a.set(0, 3);
    let mut b = VectorClock::default();
    b.set(2, 5);
    a.join(&b);
    assert!(a.covers(0, 3) && a.covers(2, 5) && !a.covers(2, 6) && !a.covers(1, 1));
}

#[test]
fn writes_over_a_range_leave_one_interval() {
    let mut space = BTreeMap::new();
    space.insert(
        0,
        Segment {
            end: 100,
            write: None,
            reads: SmallVec::new(),
            init: true,
        },
    );
    split(&mut space, 40);
    split(&mut space, 60);
    assert_eq!(space.len(), 3);
    coalesce(&mut space, 40, 60);
    assert_eq!(space.len(), 1);
    assert_eq!(space[&0].end, 100);
}

#[test]
fn modes_parse_from_the_environment_spelling() {
    assert_eq!(SanitizerMode::parse("report"), Some(SanitizerMode::Report));
    assert_eq!(SanitizerMode::parse("ERROR"), Some(SanitizerMode::Error));
    assert_eq!(SanitizerMode::parse("off"), Some(SanitizerMode::Off));
    assert_eq!(SanitizerMode::parse("loud"), None);
}
