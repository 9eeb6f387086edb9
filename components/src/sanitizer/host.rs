//! The host side after submission: pinned-buffer accesses, synchronizes, and streams,
//! contexts and events going away.

use super::*;

impl Sanitizer {
    /// `actor` reads (or writes, `writes`) bytes `range` of pinned host buffer `buffer` (`len`
    /// bytes long) itself, at a call made at `site`: a queued copy of overlapping bytes (one
    /// side writing) that it is not ordered after is a race, and so is another host thread's
    /// access it is not ordered after. In error mode the error the access fails with.
    #[allow(clippy::too_many_arguments)]
    pub fn host_accessed(
        &mut self,
        actor: Actor,
        (buffer, len): (u64, u64),
        range: (u64, u64),
        writes: bool,
        site: EnqueueSite,
        now: SimTime,
    ) -> Option<NpuError> {
        let thread = self.thread_of(actor);
        // A callback's access is checked, not kept: its clock is its task's, which every
        // later enqueue of its stream's order covers.
        if thread.is_none() && !self.host_buffers.contains_key(&buffer) {
            return None;
        }
        let clock = self.actor_clock(actor);
        let floor = self.host_floor(None);
        let at = thread.map(|t| self.own_epoch(t));
        let name = if writes {
            "host write of a pinned buffer"
        } else {
            "host read of a pinned buffer"
        };
        let (stream, position) = match actor {
            Actor::Host | Actor::Thread(_) => (None, 0),
            Actor::Callback { stream, seq } => (Some(stream), seq),
        };
        let device = self
            .host_buffers
            .get(&buffer)
            .and_then(|h| h.uses.first().or(h.host.first()))
            .map_or(0, |u| u.task.device);
        let info = Arc::new(TaskInfo {
            device,
            stream,
            position,
            name: self.name(NameKey::Call(name), || name.into()),
            site,
            thread,
        });
        let shadow = self.host_buffers.entry(buffer).or_default();
        shadow.len = shadow.len.max(len);
        shadow.uses.retain(|u| !floor.covers(u.slot, u.epoch));
        shadow.host.retain(|u| !floor.covers(u.slot, u.epoch));
        let len = shadow.len;
        let overlaps = |u: &&HostUse| {
            (u.writes || writes)
                && u.start < range.1
                && range.0 < u.end
                && !clock.covers(u.slot, u.epoch)
        };
        // (start, end, the other side, whether it writes, whether it is a copy)
        let conflicts: Vec<(u64, u64, Arc<TaskInfo>, bool, bool)> = shadow
            .uses
            .iter()
            .filter(overlaps)
            .map(|u| (u, true))
            .chain(shadow.host.iter().filter(overlaps).map(|u| (u, false)))
            .map(|(u, copy)| {
                (
                    u.start.max(range.0),
                    u.end.min(range.1),
                    u.task.clone(),
                    u.writes,
                    copy,
                )
            })
            .collect();
        if let Some((slot, epoch)) = at {
            // The thread's older accesses this one supersedes go.
            shadow.host.retain(|u| {
                !(u.slot == slot && range.0 <= u.start && u.end <= range.1 && (writes || !u.writes))
            });
            shadow.host.push(HostUse {
                start: range.0,
                end: range.1,
                writes,
                slot,
                epoch,
                task: info.clone(),
            });
        }
        if shadow.uses.is_empty() && shadow.host.is_empty() {
            self.host_buffers.remove(&buffer);
        }
        let before = self.found;
        for (start, end, task, other_writes, copy) in conflicts {
            let (operand, mode) = if copy {
                copy_side(other_writes)
            } else {
                (Operand::HostBuffer, host_mode(other_writes))
            };
            let earlier = self.side_of(&task, operand, Some(mode));
            let later = self.side_of(&info, Operand::HostBuffer, Some(host_mode(writes)));
            let fix = match (copy, task.stream) {
                (true, Some(a)) => format!(
                    "synchronize {} (or an event recorded on it after position {}) before \
                     the host touches the buffer",
                    Stream::new(self.runtime, a),
                    task.position
                ),
                (true, None) => "synchronize before the host touches the buffer".into(),
                (false, _) => self.fix_after_thread(&earlier, &later),
            };
            let report = host_buffer_race((start, end), (buffer, len), earlier, later, fix, now);
            self.push_report(report, &task, &info);
        }
        if self.config.mode == SanitizerMode::Error
            && self.found > before
            && let Some(r) = self.last.and_then(|i| self.reports.get(i))
        {
            return Some(NpuError::SanitizerViolation(r.to_string()));
        }
        None
    }

    /// Pinned host buffer `buffer` was freed: its queued copies are forgotten.
    pub fn host_freed(&mut self, buffer: u64) {
        self.host_buffers.remove(&buffer);
    }

    /// The host (or a callback) synchronized with everything `stream` completed (a stream
    /// synchronize, a query that found it idle).
    pub fn synchronized_stream(&mut self, actor: Actor, stream: Entity) {
        if let Some(c) = self.streams.get(&stream).map(|s| s.clock.clone()) {
            self.actor_join(actor, &c);
        }
    }

    /// The host synchronized with every stream of device `device` (`None`: of every device).
    pub fn synchronized_device(&mut self, actor: Actor, device: Option<u32>) {
        let mut c = VectorClock::default();
        for st in self.streams.values() {
            if device.is_none_or(|d| d == st.device) {
                c.join(&st.clock);
            }
        }
        self.actor_join(actor, &c);
    }

    /// The host thread `actor` made a synchronous call, which waits for device `device`'s
    /// queued work before it runs: the thread is ordered after the work it enqueued there
    /// itself (with what the host callbacks it enqueued enqueued), not after other threads'
    /// work — which of that was queued first depends on which thread reached the runtime
    /// first. A callback is ordered after all of the device's work, as by a device
    /// synchronize.
    pub fn synchronized_own_work(&mut self, actor: Actor, device: u32) {
        let Some(t) = self.thread_of(actor) else {
            self.synchronized_device(actor, Some(device));
            return;
        };
        // Streams only this thread enqueued on stand for its own work there by their clocks;
        // on streams shared with other threads, its own work was kept as it completed.
        let mut c = self.threads[t as usize]
            .own
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, own)| own.clone())
            .unwrap_or_default();
        for st in self.streams.values() {
            if st.device == device && matches!(st.owner_last[..], [(o, _)] if o == t) {
                c.join(&st.clock);
            }
        }
        Arc::make_mut(&mut self.threads[t as usize].clock).join(&c);
    }

    /// The host synchronized with record `record` of `event` (an event synchronize, a query
    /// that found it complete).
    pub fn synchronized_event(&mut self, actor: Actor, event: Entity, record: u64) {
        let c = self
            .events
            .get(&event)
            .and_then(|e| e.records.get(&record))
            .and_then(|r| r.0.clone());
        if let Some(c) = c {
            self.actor_join(actor, &c);
        }
    }

    /// Forgets a destroyed stream (drained, and synchronized with by the host): its slot
    /// goes to the next new stream, which counts on from where this one ended.
    pub fn stream_destroyed(&mut self, stream: Entity) {
        if let Some(st) = self.streams.remove(&stream) {
            self.free_slots.push((st.slot, st.base + st.processed));
        }
    }

    /// Forgets the freed blocks of `context` that `released` says went back to the pool
    /// (no queued task can reach them any more), and their shadow.
    pub fn forget_released(&mut self, context: Entity, released: impl Fn(u64) -> bool) {
        let Some(blocks) = self.blocks.get_mut(&context) else {
            return;
        };
        let gone: Vec<(u64, u64)> = blocks
            .iter()
            .filter(|(b, blk)| matches!(blk.life, BlockLife::Freed { .. }) && released(**b))
            .map(|(b, blk)| (*b, blk.size))
            .collect();
        for &(b, _) in &gone {
            blocks.remove(&b);
        }
        if let Some(space) = self.shadow.get_mut(&context) {
            for (b, size) in gone {
                split(space, b);
                split(space, b + size);
                let keys: Vec<u64> = space.range(b..b + size).map(|(k, _)| *k).collect();
                for k in keys {
                    space.remove(&k);
                }
            }
        }
    }

    /// Forgets a destroyed context: its blocks, its shadow and its streams (whose slots are
    /// not reused: their work may have been aborted rather than waited for).
    pub fn context_destroyed(&mut self, context: Entity, streams: &[Entity]) {
        self.blocks.remove(&context);
        self.shadow.remove(&context);
        for s in streams {
            self.streams.remove(s);
        }
    }

    /// Forgets a destroyed event's records that no queued wait captured.
    pub fn event_destroyed(&mut self, event: Entity) {
        if let Some(e) = self.events.get_mut(&event) {
            e.records.retain(|_, r| r.1 > 0);
            if e.records.is_empty() {
                self.events.remove(&event);
            }
        }
    }
}
