//! Memory stays flat however many tasks run: with the timeline off, finished tasks leave
//! nothing behind — no live task entities, no growth of the world between rounds.

use npusim::Launch;
use npusim::prelude::*;

#[test]
fn two_hundred_thousand_tiny_tasks_leave_no_live_tasks_behind() {
    let rt = Runtime::new(RuntimeConfig {
        timeline: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let streams: Vec<Stream> = (0..4).map(|_| rt.streams().create().unwrap()).collect();
    let noop = rt.kernel("noop").unwrap();
    let ev = rt.events().create().unwrap();
    let rounds = 20;
    let per_round = 10_000;
    let mut entities_after_first_round = None;
    for round in 0..rounds {
        for i in 0..per_round {
            let s = streams[i % streams.len()];
            match i % 100 {
                // A sprinkling of the other zero-unit task kinds.
                0 => rt.events().record(ev, s).unwrap(),
                1 => rt.events().stream_wait(s, ev).unwrap(),
                _ => {
                    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
                }
            }
        }
        for &s in &streams {
            rt.streams().synchronize(s).unwrap();
        }
        let stats = rt.stats();
        assert_eq!(stats.live_tasks, 0, "round {round}: {:?}", stats.frames);
        let entities = rt.lock_world().world().entities().count_spawned();
        match entities_after_first_round {
            None => entities_after_first_round = Some(entities),
            Some(first) => assert_eq!(entities, first, "round {round}: the world grew"),
        }
    }
    let stats = rt.stats();
    assert_eq!(stats.live_tasks, 0);
    assert_eq!(stats.frames.tasks_ingested, (rounds * per_round) as u64);
    assert_eq!(stats.frames.tasks_completed, (rounds * per_round) as u64);
    assert!(rt.timeline().is_empty(), "the timeline was off");
}
