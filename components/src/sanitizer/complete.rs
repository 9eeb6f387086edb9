//! Completion: a task's clock, its accesses checked, the frees and waits it releases.

use super::*;

impl Sanitizer {
    /// Completes `task` (which ended well when `ok`) at `now`: computes its clock and checks
    /// its accesses. In error mode, returns the error it fails with.
    pub fn completed(&mut self, task: &Task, ok: bool, now: SimTime) -> Option<NpuError> {
        let kind = task.kind();
        // A collective's part joins what every member had done before it: the group's clock
        // is built while this stream's own clock and submission still stand for its earlier
        // work, so the first member to complete brings its own in too.
        let group = (kind == TaskKind::Collective)
            .then(|| CollectiveCall::decode(&task.desc))
            .flatten()
            .map(|call| {
                let key = group_key(&call);
                (key, self.group_clock(key))
            });
        let st = self.streams.get_mut(&task.stream)?;
        while st.submitted.front().is_some_and(|s| s.seq < task.seq) {
            st.submitted.pop_front();
        }
        let sub = if st.submitted.front().is_some_and(|s| s.seq == task.seq) {
            st.submitted.pop_front()
        } else {
            None
        };
        let slot = st.slot;
        let epoch = st.base + task.seq;
        // The stream's clock, updated in place unless an event record still shares it.
        let clock = Arc::make_mut(&mut st.clock);
        if let Some(s) = &sub
            && !st
                .joined_host
                .as_ref()
                .is_some_and(|h| Arc::ptr_eq(h, &s.host))
        {
            clock.join(&s.host);
            st.joined_host = Some(s.host.clone());
        }
        match kind {
            TaskKind::EventWait => {
                if let Some(ev) = task.desc.as_event()
                    && ev.record != 0
                    && let Some(e) = self.events.get_mut(&ev.event)
                    && let Some(r) = e.records.get_mut(&ev.record)
                {
                    if let Some(c) = &r.0 {
                        clock.join(c);
                    }
                    r.1 = r.1.saturating_sub(1);
                    let latest = e.latest;
                    if r.1 == 0 && ev.record < latest {
                        e.records.remove(&ev.record);
                    }
                }
            }
            TaskKind::HostCallback => {
                if let Some(c) = self.callbacks.remove(&(task.stream, task.seq)) {
                    clock.join(&c);
                }
            }
            TaskKind::Collective => {
                if let Some((key, joined)) = group {
                    if let Some(j) = joined {
                        clock.join(&j);
                    }
                    if let Some(g) = self.groups.get_mut(&key) {
                        g.done += 1;
                        if g.done >= g.members.len() {
                            self.groups.remove(&key);
                        }
                    }
                }
            }
            _ => {}
        }
        clock.set(slot, epoch);
        let clock = st.clock.clone();
        st.processed = task.seq;
        // On a stream several threads enqueue on, the owner's latest task: its own work on the
        // device now reaches here. (Not a synchronous call's: that is the thread's own access
        // already, and the stream it ran on carries other threads' calls, in an order the
        // program did not choose.) A stream one thread uses alone needs nothing here: its
        // clock is that thread's own work.
        let own_work = (st.owner_last.len() > 1)
            .then(|| sub.as_ref().filter(|s| !s.sync).and_then(|s| s.owner))
            .flatten()
            .filter(|&t| st.owner_last.contains(&(t, task.seq)))
            .map(|t| (t, st.device));
        if kind == TaskKind::EventRecord
            && let Some(ev) = task.desc.as_event()
        {
            st.records.push_back((task.seq, ev.event));
            if st.records.len() > 8 {
                st.records.pop_front();
            }
            let e = self.events.entry(ev.event).or_default();
            if ok {
                e.records.entry(ev.record).or_insert((None, 0)).0 = Some(clock.clone());
            }
            e.latest = e.latest.max(ev.record);
            let latest = e.latest;
            e.records.retain(|&r, v| r >= latest || v.1 > 0);
        }
        if let Some((t, device)) = own_work {
            self.add_own_work(t, device, &clock);
        }
        // Stream-ordered frees behind this position happen now.
        let st = self.streams.get_mut(&task.stream).expect("looked up above");
        if !st.frees.is_empty() {
            let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut st.frees)
                .into_iter()
                .partition(|f| f.position <= task.seq);
            st.frees = rest;
            for mut f in due {
                let mut c = (*clock).clone();
                c.join(&f.host);
                // Pass it on to the next position it waits for, if any is still ahead.
                let mut next = None;
                while let Some((s, p)) = f.rest.pop() {
                    match self.streams.get(&s) {
                        Some(st) if st.processed < p => {
                            next = Some((s, p));
                            break;
                        }
                        Some(st) => c.join(&st.clock),
                        None => {}
                    }
                }
                match next {
                    Some((s, p)) => {
                        let st = self.streams.get_mut(&s).expect("looked up");
                        st.frees.push(PendingFree {
                            position: p,
                            host: Arc::new(c),
                            ..f
                        });
                    }
                    None => {
                        let clocks = (Arc::new(c), f.host.clone());
                        self.finish_free(f.context, f.base, clocks, f.side, now)
                    }
                }
            }
        }
        if !ok || task.access.is_empty() {
            return None;
        }
        let device = self.streams.get(&task.stream).map_or(0, |s| s.device);
        // A synchronous call's accesses are its thread's own: checked against what the thread
        // was ordered after at the call, at the thread's epoch.
        let owner = sub.as_ref().and_then(|s| s.owner);
        let own = sub
            .as_ref()
            .filter(|s| s.sync)
            .and_then(|s| Some((s.owner?, s.host.clone())));
        let (name, site) = match sub {
            Some(s) => (s.name, s.site),
            None => (
                self.name(NameKey::Call(kind.name()), || kind.name().into()),
                EnqueueSite::Unknown,
            ),
        };
        let (info, at, clock) = match own {
            Some((t, host)) => (
                Arc::new(TaskInfo {
                    device,
                    stream: None,
                    position: 0,
                    name,
                    site,
                    thread: Some(t),
                }),
                self.own_epoch(t),
                host,
            ),
            None => (
                Arc::new(TaskInfo {
                    device,
                    stream: Some(task.stream),
                    position: task.seq,
                    name,
                    site,
                    thread: owner,
                }),
                (slot, epoch),
                clock,
            ),
        };
        let before = self.found;
        for &access in task.access.ranges() {
            self.check_access(task, access, at, &clock, &info, now);
        }
        if self.config.mode == SanitizerMode::Error
            && self.found > before
            && let Some(r) = self.last.and_then(|i| self.reports.get(i))
        {
            return Some(NpuError::SanitizerViolation(r.to_string()));
        }
        None
    }

    /// The join of a collective's ranks' clocks as they reached the rendezvous (computed when
    /// the first rank completes: every other rank is then still at its collective).
    pub(super) fn group_clock(&mut self, key: GroupKey) -> Option<Arc<VectorClock>> {
        let g = self.groups.get(&key)?;
        if let Some(j) = &g.joined {
            return Some(j.clone());
        }
        let mut c = VectorClock::default();
        for &(s, seq) in &g.members {
            if let Some(st) = self.streams.get(&s)
                && st.processed + 1 == seq
            {
                c.join(&st.clock);
                if let Some(sub) = st.submitted.iter().find(|x| x.seq == seq) {
                    c.join(&sub.host);
                }
            }
        }
        let c = Arc::new(c);
        self.groups.get_mut(&key).expect("looked up").joined = Some(c.clone());
        Some(c)
    }

    pub(super) fn operand_of(
        &self,
        task: &Task,
        access: &Access,
        block: Option<(u64, u64)>,
    ) -> Operand {
        match task.kind() {
            TaskKind::Kernel => {
                let Some((base, size)) = block else {
                    return Operand::Unknown;
                };
                task.desc
                    .arg_words()
                    .iter()
                    .enumerate()
                    .filter(|&(i, &w)| !task.desc.arg_is_float(i) && w >= base && w < base + size)
                    .min_by_key(|&(_, &w)| access.addr.abs_diff(w))
                    .map_or(Operand::Unknown, |(i, _)| Operand::Arg(i as u8))
            }
            TaskKind::Memcpy | TaskKind::Memset => {
                if access.mode.writes() {
                    Operand::Destination
                } else {
                    Operand::Source
                }
            }
            TaskKind::Collective => {
                if access.mode.writes() {
                    Operand::Receive
                } else {
                    Operand::Send
                }
            }
            _ => Operand::Unknown,
        }
    }
}
