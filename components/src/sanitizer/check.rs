//! The checks of one range against the shadow, and the reports they make.

use super::*;

impl Sanitizer {
    pub(super) fn check_access(
        &mut self,
        task: &Task,
        access: Access,
        slot: (u32, u64),
        clock: &Arc<VectorClock>,
        info: &Arc<TaskInfo>,
        now: SimTime,
    ) {
        let (context, owner) = match access.space {
            Space::Local => (task.context, info.device),
            Space::Peer => match PeerCopy::decode(&task.desc) {
                Some(p) if p.src_ctx == task.context => (p.dst_ctx, p.dst_device),
                Some(p) => (p.src_ctx, p.src_device),
                None => return,
            },
        };
        let (start, end) = match access.bytes {
            // The whole block behind the address (an inexact set).
            0 => match self.block_at(context, access.addr) {
                Some((base, b)) => (base, base + b.size),
                None => return,
            },
            n => (access.addr, access.addr.saturating_add(n)),
        };
        // One piece per block the range crosses (a binary kernel writing past its buffer
        // reaches the next one), and one per gap between blocks.
        let mut pieces: SmallVec<[Piece; 2]> = SmallVec::new();
        let mut cursor = start;
        if let Some(blocks) = self.blocks.get(&context) {
            let first = blocks
                .range(..=start)
                .next_back()
                .filter(|(b, blk)| **b + blk.size > start)
                .map(|(b, _)| *b)
                .unwrap_or(start);
            for (&base, b) in blocks.range(first..end) {
                let (a, e) = (base.max(start), (base + b.size).min(end));
                if a >= e {
                    continue;
                }
                if a > cursor {
                    pieces.push((cursor, a, None));
                }
                pieces.push((a, e, Some((base, b.clone()))));
                cursor = e;
            }
        }
        if cursor < end {
            pieces.push((cursor, end, None));
        }
        for (a, e, found) in pieces {
            let found = found.as_ref().map(|(base, b)| (*base, b));
            self.check_piece(
                task,
                (context, owner),
                access,
                (a, e),
                found,
                slot,
                clock,
                info,
                now,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_piece(
        &mut self,
        task: &Task,
        (context, owner): (Entity, u32),
        access: Access,
        (start, end): (u64, u64),
        found: Option<(u64, &Block)>,
        (slot, epoch): (u32, u64),
        clock: &Arc<VectorClock>,
        info: &Arc<TaskInfo>,
        now: SimTime,
    ) {
        let access = Access {
            addr: start,
            bytes: end - start,
            ..access
        };
        let block = found.map(|(base, b)| (base, b.size));
        let generation = found.map_or(0, |(_, b)| b.generation);
        let operand = self.operand_of(task, &access, block);
        let rec = Arc::new(AccessRec {
            slot,
            clock: epoch,
            task: info.clone(),
            operand,
            mode: access.mode,
            generation,
        });
        let mut conflicts: Vec<Conflict> = Vec::new();
        let mut uninit: Vec<(u64, u64)> = Vec::new();
        // The block's own life: freed, or stream-ordered after a position this is not after.
        if let Some((_, b)) = found {
            match &b.life {
                BlockLife::Freed { clock: fc, side } if !fc.covers(slot, epoch) => {
                    let earlier = self.side_of(side, Operand::Block, None);
                    let later = self.side_of(info, operand, Some(access.mode));
                    let fix = format!(
                        "{} is not ordered before the free: synchronize {} (or an event \
                         recorded after position {}) before freeing, or free with free_async \
                         on that stream; work enqueued after the free needs a live buffer",
                        later.name,
                        stream_name(&later),
                        later.position
                    );
                    let report = SanitizerReport {
                        kind: ReportKind::UseAfterFree,
                        addr: start,
                        bytes: end - start,
                        block,
                        earlier,
                        later,
                        fix,
                        at: now,
                        count: 1,
                        host_buffer: None,
                        owner: Some(owner),
                    };
                    let side = side.clone();
                    self.push_report(report, &side, info);
                }
                _ => {}
            }
            if let Some(order) = b.after
                && !clock.covers(order.slot, order.epoch)
            {
                let alloc = b.alloc.clone();
                let earlier = self.side_of(&alloc, Operand::Block, None);
                let later = self.side_of(info, operand, Some(access.mode));
                let fix = self.fix_for(order.stream, order.position, &later);
                self.push_report(
                    SanitizerReport {
                        kind: ReportKind::UnorderedReuse,
                        addr: start,
                        bytes: end - start,
                        block,
                        earlier,
                        later,
                        fix,
                        at: now,
                        count: 1,
                        host_buffer: None,
                        owner: Some(owner),
                    },
                    &alloc,
                    info,
                );
            }
        }
        let check_uninit = self.config.uninitialized && access.mode.reads();
        let space = self.shadow.entry(context).or_default();
        split(space, start);
        split(space, end);
        // Fill the gaps, so every byte of the range has an interval.
        let mut cursor = start;
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        for (&s, seg) in space.range(start..end) {
            if s > cursor {
                gaps.push((cursor, s));
            }
            cursor = seg.end;
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (a, b) in gaps {
            space.insert(
                a,
                Segment {
                    end: b,
                    write: None,
                    reads: SmallVec::new(),
                    init: false,
                },
            );
        }
        for (&s, seg) in space.range_mut(start..end) {
            let kind_of = |r: &AccessRec| {
                if r.generation != generation {
                    ReportKind::UnorderedReuse
                } else {
                    ReportKind::Race
                }
            };
            if let Some(w) = &seg.write
                && !clock.covers(w.slot, w.clock)
            {
                push_conflict(&mut conflicts, kind_of(w), s, seg.end, w);
            }
            if access.mode.writes() {
                for r in &seg.reads {
                    if !clock.covers(r.slot, r.clock) {
                        push_conflict(&mut conflicts, kind_of(r), s, seg.end, r);
                    }
                }
            }
            if check_uninit && !seg.init {
                match uninit.last_mut() {
                    Some(last) if last.1 == s => last.1 = seg.end,
                    _ => uninit.push((s, seg.end)),
                }
            }
            if access.mode.writes() {
                seg.write = Some(rec.clone());
                seg.reads.clear();
                seg.init = true;
            } else {
                seg.reads.retain(|r| !clock.covers(r.slot, r.clock));
                seg.reads.push(rec.clone());
            }
        }
        coalesce(space, start, end);
        for c in conflicts {
            let earlier = self.side_of(&c.earlier.task, c.earlier.operand, Some(c.earlier.mode));
            let later = self.side_of(info, operand, Some(access.mode));
            let fix = match c.earlier.task.stream {
                Some(s) => self.fix_for(s, c.earlier.task.position, &later),
                None => self.fix_after_thread(&earlier, &later),
            };
            self.push_report(
                SanitizerReport {
                    kind: c.kind,
                    addr: c.start,
                    bytes: c.end - c.start,
                    block,
                    earlier,
                    later,
                    fix,
                    at: now,
                    count: 1,
                    host_buffer: None,
                    owner: Some(owner),
                },
                &c.earlier.task,
                info,
            );
        }
        if let Some((base, b)) = found {
            let alloc = b.alloc.clone();
            for (a, e) in uninit {
                let earlier = self.side_of(&alloc, Operand::Block, None);
                let later = self.side_of(info, operand, Some(access.mode));
                let fix = format!(
                    "write the bytes (a memset or a copy ordered before position {} of {}) \
                     before reading them",
                    later.position,
                    stream_name(&later)
                );
                self.push_report(
                    SanitizerReport {
                        kind: ReportKind::UninitializedRead,
                        addr: a,
                        bytes: e - a,
                        block: Some((base, b.size)),
                        earlier,
                        later,
                        fix,
                        at: now,
                        count: 1,
                        host_buffer: None,
                        owner: Some(owner),
                    },
                    &alloc,
                    info,
                );
            }
        }
    }

    /// What would order position `pos` of `earlier` before `later`.
    pub(super) fn fix_for(&self, earlier: Entity, pos: u64, later: &ReportSide) -> String {
        let a = Stream::new(self.runtime, earlier);
        let existing = self.streams.get(&earlier).and_then(|st| {
            // The first record after it (records are kept oldest first).
            st.records.iter().find(|(p, _)| *p >= pos).copied()
        });
        let Some(b) = later.stream else {
            return format!("synchronize {a} (or an event recorded on it after position {pos})");
        };
        match existing {
            Some((p, e)) => format!(
                "make {b} wait for event {e} (recorded on {a} at position {p}, after position \
                 {pos}) before position {}: stream_wait_event / aclrtStreamWaitEvent",
                later.position
            ),
            None => format!(
                "record an event on {a} after position {pos} (record_event / aclrtRecordEvent) \
                 and make {b} wait for it before position {} (stream_wait_event / \
                 aclrtStreamWaitEvent)",
                later.position
            ),
        }
    }

    pub(super) fn side_of(
        &self,
        t: &TaskInfo,
        operand: Operand,
        mode: Option<AccessMode>,
    ) -> ReportSide {
        ReportSide {
            device: t.device,
            stream: t.stream.map(|s| Stream::new(self.runtime, s)),
            position: t.position,
            name: t.name.to_string(),
            operand,
            mode,
            site: t.site,
            thread: t.thread.map(|i| HostThread {
                index: i,
                name: self.threads.get(i as usize).and_then(|th| th.name.clone()),
            }),
        }
    }

    /// What would order host thread `earlier`'s own access before `later`.
    pub(super) fn fix_after_thread(&self, earlier: &ReportSide, later: &ReportSide) -> String {
        let a = earlier
            .thread
            .as_ref()
            .map_or_else(|| "the host".to_string(), |t| t.to_string());
        let b = match (&later.thread, later.stream) {
            (Some(t), _) if Some(t) == earlier.thread.as_ref() => {
                return "synchronize before the later call".into();
            }
            (Some(t), _) => t.to_string(),
            (None, Some(s)) => format!(
                "the thread that enqueued position {} of {s}",
                later.position
            ),
            (None, None) => "the later caller".into(),
        };
        format!(
            "order {a}'s {} before {b}'s call: through the runtime ({b} synchronizes work {a} \
             enqueued after it, or waits for an event {a} recorded after it), or, for a \
             hand-off the runtime cannot see (a channel, a lock, a join), with \
             sanitizer_release after it in {a} and sanitizer_acquire before the call in {b} \
             (C: npusimSanitizerRelease / npusimSanitizerAcquire; after joining threads: \
             sanitizer_host_sync)",
            earlier.name
        )
    }

    pub(super) fn block_at(&self, context: Entity, addr: u64) -> Option<(u64, &Block)> {
        let (&base, b) = self.blocks.get(&context)?.range(..=addr).next_back()?;
        (addr < base + b.size.max(1)).then_some((base, b))
    }

    pub(super) fn push_report(
        &mut self,
        report: SanitizerReport,
        earlier: &TaskInfo,
        later: &TaskInfo,
    ) {
        self.found += 1;
        let key = (
            report.kind,
            earlier.site,
            later.site,
            earlier.name.clone(),
            later.name.clone(),
            report.earlier.operand,
            report.later.operand,
        );
        if let Some(&i) = self.distinct.get(&key) {
            self.reports[i].count += 1;
            self.last = Some(i);
            return;
        }
        self.distinct.insert(key, self.reports.len());
        self.last = Some(self.reports.len());
        self.reports.push(report);
        self.fresh += 1;
    }
}
