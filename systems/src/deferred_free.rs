//! Deferred free: a block freed while queued work may still touch it waits, pending behind the
//! stream positions whose tasks name it; once every one of those positions has completed, it
//! goes back to its context's pool. Runs after the hardware tick, so a position completed this
//! frame releases its blocks this frame.

use bevy_ecs::prelude::{Query, ResMut};
use npusim_components::resources::FrameStats;
use npusim_components::{DeviceState, StreamState};

/// Returns to the pool every pending free whose stream positions have all completed.
pub fn deferred_free(
    mut devices: Query<&mut DeviceState>,
    streams: Query<&StreamState>,
    // Written only when a block is released.
    mut stats: Option<ResMut<FrameStats>>,
) {
    crate::zone!("npusim::deferred_free");
    for mut device in &mut devices {
        if !device.memory.has_pending_frees() {
            continue;
        }
        // A destroyed stream has nothing left to run.
        let released = device
            .memory
            .release_completed(|(s, seq)| streams.get(s).map_or(true, |st| st.completed >= seq));
        if released > 0
            && let Some(stats) = stats.as_deref_mut()
        {
            stats.last_frame_progressed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use bevy_ecs::prelude::*;

    fn set_completed(world: &mut World, stream: Entity, completed: u64) {
        world.get_mut::<StreamState>(stream).unwrap().completed = completed;
    }

    #[test]
    fn a_pending_free_is_released_only_when_every_position_it_waits_for_completed() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let a = alloc(&mut s.world, s.device, s.ctx, 4096);
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .begin_free(a, s.ctx, &[(s.stream, 2), (other, 1)])
            .unwrap();

        set_completed(&mut s.world, s.stream, 1);
        set_completed(&mut s.world, other, 1);
        run(&mut s.world, deferred_free);
        let mem = &device(&s.world, s.device).memory;
        assert!(mem.has_pending_frees(), "stream 1 has not reached seq 2");
        assert!(mem.check(a, 4096, s.ctx).is_ok(), "still reserved");
        assert!(!s.world.resource::<FrameStats>().last_frame_progressed);

        set_completed(&mut s.world, s.stream, 2);
        run(&mut s.world, deferred_free);
        let mem = &device(&s.world, s.device).memory;
        assert!(!mem.has_pending_frees());
        assert!(mem.check(a, 1, s.ctx).is_err(), "released");
        assert_eq!(mem.stats().deferred_releases, 1);
        assert!(s.world.resource::<FrameStats>().last_frame_progressed);
    }

    #[test]
    fn released_blocks_return_to_the_pool() {
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 1 << 20);
        let live = device(&s.world, s.device).memory.live_bytes();
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .begin_free(a, s.ctx, &[(s.stream, 1)])
            .unwrap();
        set_completed(&mut s.world, s.stream, 1);
        run(&mut s.world, deferred_free);

        let mem = &device(&s.world, s.device).memory;
        assert_eq!(mem.live_bytes(), live - (1 << 20));
        let again = alloc(&mut s.world, s.device, s.ctx, 1 << 20);
        assert_eq!(again, a, "the same block serves the next allocation");
    }

    #[test]
    fn a_free_waiting_on_a_destroyed_stream_is_released() {
        let mut s = setup();
        let gone = spawn_stream(&mut s.world, s.ctx, 0);
        let a = alloc(&mut s.world, s.device, s.ctx, 64);
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .begin_free(a, s.ctx, &[(gone, 5)])
            .unwrap();
        s.world.despawn(gone);
        run(&mut s.world, deferred_free);
        assert!(!device(&s.world, s.device).memory.has_pending_frees());
    }

    #[test]
    fn frees_on_each_device_wait_for_their_own_positions() {
        let mut s = setup();
        let d2 = spawn_device(&mut s.world);
        let c2 = spawn_context(&mut s.world, d2);
        let s2 = spawn_stream(&mut s.world, c2, 0);
        let a = alloc(&mut s.world, s.device, s.ctx, 64);
        let b = alloc(&mut s.world, d2, c2, 64);
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .begin_free(a, s.ctx, &[(s.stream, 1)])
            .unwrap();
        s.world
            .get_mut::<DeviceState>(d2)
            .unwrap()
            .memory
            .begin_free(b, c2, &[(s2, 1)])
            .unwrap();
        set_completed(&mut s.world, s2, 1);
        run(&mut s.world, deferred_free);
        assert!(device(&s.world, s.device).memory.has_pending_frees());
        assert!(!device(&s.world, d2).memory.has_pending_frees());
    }
}
