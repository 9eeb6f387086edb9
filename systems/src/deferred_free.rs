//! Deferred free: a block freed while queued work may still touch it waits, pending behind the
//! stream positions whose tasks name it; once every one of those positions has completed, it
//! goes back to its context's pool. Runs after the hardware tick, so a position completed this
//! frame releases its blocks this frame.

use bevy_ecs::prelude::*;
use npusim_components::resources::FrameStats;
use npusim_components::{DeviceState, StreamState};

/// Returns to the pool every pending free whose stream positions have all completed.
pub fn deferred_free(
    mut devices: Query<&mut DeviceState>,
    streams: Query<&StreamState>,
    mut stats: ResMut<FrameStats>,
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
        if released > 0 {
            stats.last_frame_progressed = true;
        }
    }
}
