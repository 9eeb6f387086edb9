//! Allocations and frees, immediate and stream-ordered.

use super::*;

impl Sanitizer {
    /// A block of `size` bytes at `base` in `context` was allocated by `actor`; with
    /// `stream = Some((stream, position))` it is stream-ordered: work must be ordered after
    /// that position of that stream to use it.
    #[allow(clippy::too_many_arguments)]
    pub fn allocated(
        &mut self,
        actor: Actor,
        context: Entity,
        device: u32,
        base: u64,
        size: u64,
        stream: Option<(Entity, u64)>,
        site: EnqueueSite,
    ) {
        let generation = self.next_generation;
        self.next_generation += 1;
        let after = stream.map(|(s, position)| {
            let st = self.stream(s, device);
            StreamOrder {
                slot: st.slot,
                epoch: st.base + position,
                stream: s,
                position,
            }
        });
        let ordered = if stream.is_some() {
            "malloc_async"
        } else {
            "malloc"
        };
        let alloc = self.host_call(actor, device, stream, ordered, site);
        let end = base.saturating_add(size);
        let blocks = self.blocks.entry(context).or_default();
        let stale: Vec<u64> = blocks
            .range(..end)
            .rev()
            .take_while(|(b, blk)| **b + blk.size > base)
            .map(|(b, _)| *b)
            .collect();
        for b in stale {
            blocks.remove(&b);
        }
        blocks.insert(
            base,
            Block {
                size,
                generation,
                life: BlockLife::Live,
                after,
                alloc,
            },
        );
        // Fresh memory is uninitialised; what the bytes' earlier owner did stays in the
        // shadow, so a reuse that is not ordered after it is still found.
        let space = self.shadow.entry(context).or_default();
        split(space, base);
        split(space, end);
        for (_, seg) in space.range_mut(base..end) {
            seg.init = false;
        }
    }

    /// `actor` freed the block at `base` in `context`; with `stream = Some((stream,
    /// position))`, stream-ordered behind that position. Reports accesses not ordered before
    /// the free (once its position is reached, for a stream-ordered one).
    #[allow(clippy::too_many_arguments)]
    pub fn freed(
        &mut self,
        actor: Actor,
        context: Entity,
        device: u32,
        base: u64,
        stream: Option<(Entity, u64)>,
        site: EnqueueSite,
        now: SimTime,
    ) {
        let host = match self.thread_of(actor) {
            Some(t) => self.publish(t),
            None => Arc::new(self.actor_clock(actor)),
        };
        let ordered = if stream.is_some() {
            "free_async"
        } else {
            "free"
        };
        let side = self.host_call(actor, device, stream, ordered, site);
        let Some((s, position)) = stream else {
            self.finish_free(context, base, (host.clone(), host), side, now);
            return;
        };
        let st = self.stream(s, device);
        if st.processed >= position {
            let mut c = (*st.clock).clone();
            c.join(&host);
            self.finish_free(context, base, (Arc::new(c), host), side, now);
            return;
        }
        st.frees.push(PendingFree {
            position,
            context,
            base,
            host,
            side,
            rest: Vec::new(),
        });
        if let Some(b) = self.blocks.get_mut(&context).and_then(|m| m.get_mut(&base)) {
            b.life = BlockLife::Freeing;
        }
    }

    /// `actor` freed the block at `base` in `context` behind every stream position in
    /// `positions` (npusim's deferred free): accesses ordered before any of them, or before
    /// the call, are fine. The block is already pending, so the sanitizer checks it when the
    /// last position is reached.
    #[allow(clippy::too_many_arguments)]
    pub fn freed_behind(
        &mut self,
        actor: Actor,
        context: Entity,
        device: u32,
        base: u64,
        positions: &[(Entity, u64)],
        site: EnqueueSite,
        now: SimTime,
    ) {
        let mut clock = self.actor_clock(actor);
        if let Some(t) = self.thread_of(actor) {
            self.threads[t as usize].published = true;
        }
        let mut waiting = Vec::new();
        for &(s, p) in positions {
            match self.streams.get(&s) {
                Some(st) if st.processed >= p => clock.join(&st.clock),
                Some(_) => waiting.push((s, p)),
                None => {}
            }
        }
        let side = Arc::new(TaskInfo {
            device,
            stream: None,
            position: 0,
            name: self.name(NameKey::Call("free"), || "free".into()),
            site,
            thread: self.thread_of(actor),
        });
        if waiting.is_empty() {
            let c = Arc::new(clock);
            self.finish_free(context, base, (c.clone(), c), side, now);
            return;
        }
        if let Some(b) = self.blocks.get_mut(&context).and_then(|m| m.get_mut(&base)) {
            b.life = BlockLife::Freeing;
        }
        // Chained: each position's completion joins its clock and passes the free on to the
        // next one; the last finishes it.
        let host = Arc::new(clock);
        let (s, p) = waiting[0];
        let rest: Vec<(Entity, u64)> = waiting[1..].to_vec();
        self.streams
            .get_mut(&s)
            .expect("looked up")
            .frees
            .push(PendingFree {
                position: p,
                context,
                base,
                host,
                side,
                rest,
            });
    }

    pub(super) fn finish_free(
        &mut self,
        context: Entity,
        base: u64,
        (clock, host): (Arc<VectorClock>, Arc<VectorClock>),
        side: Arc<TaskInfo>,
        now: SimTime,
    ) {
        let Some(block) = self.blocks.get_mut(&context).and_then(|m| m.get_mut(&base)) else {
            return;
        };
        block.life = BlockLife::Freed {
            clock: clock.clone(),
            side: side.clone(),
        };
        let (size, generation) = (block.size, block.generation);
        let side_device = side.device;
        let end = base.saturating_add(size);
        let mut found: Vec<Conflict> = Vec::new();
        if let Some(space) = self.shadow.get(&context) {
            for (&start, seg) in space.range(..end).rev() {
                if seg.end <= base {
                    break;
                }
                let (a, b) = (start.max(base), seg.end.min(end));
                for r in seg.write.iter().chain(seg.reads.iter()) {
                    if r.generation == generation && !clock.covers(r.slot, r.clock) {
                        push_conflict(&mut found, ReportKind::UseAfterFree, a, b, r);
                    }
                }
            }
        }
        found.sort_by_key(|c| c.start);
        for c in found {
            let later = self.side_of(&side, Operand::Block, None);
            let earlier = self.side_of(&c.earlier.task, c.earlier.operand, Some(c.earlier.mode));
            let fix = format!(
                "the free does not wait for {}: synchronize {} (or an event recorded after \
                 position {}) before freeing, or free with free_async on that stream",
                earlier.name,
                stream_name(&earlier),
                earlier.position
            );
            self.push_report(
                SanitizerReport {
                    kind: ReportKind::UseAfterFree,
                    addr: c.start,
                    bytes: c.end - c.start,
                    block: Some((base, size)),
                    earlier,
                    later,
                    fix,
                    at: now,
                    count: 1,
                    host_buffer: None,
                    owner: Some(side_device),
                },
                &c.earlier.task,
                &side,
            );
        }
        // Every task a host thread enqueues from now on is ordered after what all their clocks
        // and the free's cover: those accesses can never conflict again, so they leave the
        // shadow (what is not covered stays, for a reuse that is not ordered after it).
        let floor = self.host_floor(Some(&host));
        prune(self.shadow.get_mut(&context), base, end, &floor);
    }
}
