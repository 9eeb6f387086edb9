//! The host's submissions: tasks enqueued, host-to-device copies, and the hand-offs the
//! runtime cannot see (release, acquire, host synchronizes).

use super::*;

impl Sanitizer {
    /// A task was enqueued at `seq` on `stream` (of device `device`) by `actor`: it happens
    /// after everything the actor has synchronized with. `name` and `site` are for reports.
    #[allow(clippy::too_many_arguments)]
    pub fn submitted(
        &mut self,
        actor: Actor,
        stream: Entity,
        device: u32,
        seq: u64,
        wait: Option<(Entity, u64)>,
        collective: Option<&CollectiveCall>,
        name: Arc<str>,
        site: EnqueueSite,
    ) {
        let (host, owner) = match actor {
            Actor::Host | Actor::Thread(_) => {
                let t = self.thread_of(actor).expect("a host thread");
                (self.publish(t), Some(t))
            }
            Actor::Callback {
                stream: cs,
                seq: cseq,
            } => {
                // Work a callback enqueues is the work of the thread that enqueued it.
                let owner = self
                    .streams
                    .get(&cs)
                    .and_then(|st| st.submitted.iter().find(|s| s.seq == cseq))
                    .and_then(|s| s.owner);
                (Arc::new(self.actor_clock(actor)), owner)
            }
        };
        if let Some((event, record)) = wait
            && record != 0
        {
            let ev = self.events.entry(event).or_default();
            ev.records.entry(record).or_insert((None, 0)).1 += 1;
        }
        if let Some(c) = collective {
            self.groups
                .entry(group_key(c))
                .or_default()
                .members
                .push((stream, seq));
        }
        let st = self.stream(stream, device);
        let mut shared_now = None;
        if let Some(t) = owner {
            match st.owner_last.iter_mut().find(|(o, _)| *o == t) {
                Some(last) => last.1 = seq,
                None => {
                    // A second thread enqueues here: the stream's clock stops standing for its
                    // first thread's own work, which keeps what it has so far.
                    if let [(first, _)] = st.owner_last[..] {
                        shared_now = Some((first, st.clock.clone()));
                    }
                    st.owner_last.push((t, seq));
                }
            }
        }
        st.submitted.push_back(Submitted {
            seq,
            host,
            name,
            site,
            owner,
            sync: false,
        });
        if let Some((first, clock)) = shared_now {
            self.add_own_work(first, device, &clock);
        }
    }

    /// Thread `t`'s own work on device `device` now reaches as far as `clock`.
    pub(super) fn add_own_work(&mut self, t: u32, device: u32, clock: &VectorClock) {
        let Some(th) = self.threads.get_mut(t as usize) else {
            return;
        };
        match th.own.iter_mut().find(|(d, _)| *d == device) {
            Some((_, own)) => own.join(clock),
            None => th.own.push((device, clock.clone())),
        }
    }

    /// The task just submitted at `seq` on `stream` (see [`Sanitizer::submitted`]) is the
    /// work of a synchronous call (a copy or memset that returns when done): its accesses are
    /// its host thread's own, checked against what that thread is ordered after when it made
    /// the call and recorded at the thread's epoch. The stream it runs on orders it with
    /// nothing else: which thread's synchronous call reaches the runtime first is not an
    /// order the program chose.
    pub fn sync_call_submitted(&mut self, stream: Entity, seq: u64) {
        if let Some(sub) = self
            .streams
            .get_mut(&stream)
            .and_then(|st| st.submitted.iter_mut().rev().find(|s| s.seq == seq))
            && sub.owner.is_some()
        {
            sub.sync = true;
        }
    }

    /// `actor` publishes what it is ordered after under `key`
    /// ([`Sanitizer::acquire`] of the same key orders the acquirer after it): synchronization
    /// the runtime cannot see, such as a channel or a lock between host threads.
    pub fn release(&mut self, actor: Actor, key: u64) {
        let c = match self.thread_of(actor) {
            Some(t) => self.publish(t),
            None => Arc::new(self.actor_clock(actor)),
        };
        self.released.entry(key).or_default().join(&c);
    }

    /// `actor` is ordered after everything published under `key` so far.
    pub fn acquire(&mut self, actor: Actor, key: u64) {
        if let Some(c) = self.released.get(&key).cloned() {
            self.actor_join(actor, &c);
        }
    }

    /// `actor` is ordered after everything every host thread did so far (after the threads
    /// were joined, or met at a barrier).
    pub fn host_sync(&mut self, actor: Actor) {
        let mut c = VectorClock::default();
        for t in 0..self.threads.len() as u32 {
            c.join(&self.publish(t));
        }
        self.actor_join(actor, &c);
    }

    /// The copy just submitted at `seq` on `stream` (see [`Sanitizer::submitted`]) reads
    /// (host to device) or writes (device to host, `writes`) bytes `range` of pinned host
    /// buffer `buffer`, `len` bytes long: the host must not touch them until it is ordered
    /// after the copy. A host thread's own access to those bytes that the copy's enqueuer is
    /// not ordered after (one side writing) is a race, reported now.
    pub fn host_copy_submitted(
        &mut self,
        stream: Entity,
        seq: u64,
        (buffer, len): (u64, u64),
        range: (u64, u64),
        writes: bool,
        now: SimTime,
    ) {
        let Some(st) = self.streams.get(&stream) else {
            return;
        };
        let Some(sub) = st.submitted.iter().rev().find(|s| s.seq == seq) else {
            return;
        };
        let task = Arc::new(TaskInfo {
            device: st.device,
            stream: Some(stream),
            position: seq,
            name: sub.name.clone(),
            site: sub.site,
            thread: sub.owner,
        });
        let enqueuer = sub.host.clone();
        let (slot, epoch) = (st.slot, st.base + seq);
        let floor = self.host_floor(None);
        let shadow = self.host_buffers.entry(buffer).or_default();
        shadow.len = len;
        // Copies and host accesses every host thread is already ordered after need no
        // checking any more.
        shadow.uses.retain(|u| !floor.covers(u.slot, u.epoch));
        shadow.host.retain(|u| !floor.covers(u.slot, u.epoch));
        let conflicts: Vec<(u64, u64, Arc<TaskInfo>, bool)> = shadow
            .host
            .iter()
            .filter(|h| {
                (h.writes || writes)
                    && h.start < range.1
                    && range.0 < h.end
                    && !enqueuer.covers(h.slot, h.epoch)
            })
            .map(|h| {
                (
                    h.start.max(range.0),
                    h.end.min(range.1),
                    h.task.clone(),
                    h.writes,
                )
            })
            .collect();
        shadow.uses.push(HostUse {
            start: range.0,
            end: range.1,
            writes,
            slot,
            epoch,
            task: task.clone(),
        });
        let (copy_operand, copy_mode) = copy_side(writes);
        for (start, end, host, host_writes) in conflicts {
            let earlier = self.side_of(&host, Operand::HostBuffer, Some(host_mode(host_writes)));
            let later = self.side_of(&task, copy_operand, Some(copy_mode));
            let fix = self.fix_after_thread(&earlier, &later);
            let report = host_buffer_race((start, end), (buffer, len), earlier, later, fix, now);
            self.push_report(report, &host, &task);
        }
    }
}
