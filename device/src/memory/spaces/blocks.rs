//! Allocations and their stream-ordered frees: the block table of each context beside its pool.

use super::*;

impl<K: ContextKey> DeviceMemory<K> {
    /// Allocates `size` bytes for `context` with the default policy (huge pages first).
    pub fn alloc(&mut self, size: u64, context: K) -> MemResult<u64> {
        self.alloc_with(size, AllocPolicy::HugeFirst, context)
    }

    /// Allocates `size` bytes for `context` with `policy`. When the pool is exhausted, memory
    /// cached by other contexts' pools is released to the driver and the request retried;
    /// only then is it out of memory, with nothing changed.
    pub fn alloc_with(&mut self, size: u64, policy: AllocPolicy, context: K) -> MemResult<u64> {
        if size == 0 {
            return Err(MemoryError::InvalidParam(
                "allocation size must be nonzero".into(),
            ));
        }
        self.space(context)?;
        let available = self
            .capacity()
            .saturating_sub(self.driver.stats().reserved_bytes);
        let first = {
            let space = self.spaces.get_mut(&context).expect("checked");
            space.pool.alloc(&mut self.driver, size, policy)
        };
        let allocation = match first {
            Ok(a) => a,
            Err(PoolError::OutOfMemory { .. }) => {
                for (c, s) in self.spaces.iter_mut() {
                    if *c != context {
                        s.pool.trim(&mut self.driver);
                    }
                }
                let space = self.spaces.get_mut(&context).expect("checked");
                space
                    .pool
                    .alloc(&mut self.driver, size, policy)
                    .map_err(|e| {
                        let available = self
                            .driver
                            .phys()
                            .capacity()
                            .saturating_sub(self.driver.stats().reserved_bytes);
                        pool_error(e, size, available)
                    })?
            }
            Err(e) => return Err(pool_error(e, size, available)),
        };
        let space = self.spaces.get_mut(&context).expect("checked");
        space.blocks.insert(
            allocation.va,
            Block {
                size,
                freeing: false,
                uses: SmallVec::new(),
            },
        );
        let live = self.live_bytes();
        self.peak_live_bytes = self.peak_live_bytes.max(live);
        Ok(allocation.va)
    }

    /// Checks that `ptr` is the start of a live, not yet freed block of `context`.
    pub fn check_free(&self, ptr: u64, context: K) -> MemResult<BlockInfo<K>> {
        let space = self.space(context)?;
        match space.blocks.get(&ptr) {
            Some(b) if !b.freeing => Ok(BlockInfo {
                base: ptr,
                size: b.size,
                context,
            }),
            Some(_) => Err(MemoryError::BadFree {
                ptr,
                why: "already freed (its release is pending)",
            }),
            None => {
                let why = if self
                    .spaces
                    .iter()
                    .any(|(c, s)| *c != context && s.blocks.contains_key(&ptr))
                {
                    "the allocation belongs to another context"
                } else if space.pool.block_containing(ptr).is_some() {
                    "not the start of an allocation"
                } else {
                    "not a live allocation (double free or unknown pointer)"
                };
                Err(MemoryError::BadFree { ptr, why })
            }
        }
    }

    /// Frees the block at `ptr` of `context` at once (no queued work may use it).
    pub fn free(&mut self, ptr: u64, context: K) -> MemResult<BlockInfo<K>> {
        let info = self.check_free(ptr, context)?;
        self.release(context, ptr);
        Ok(info)
    }

    pub(super) fn release(&mut self, context: K, ptr: u64) {
        if let Some(space) = self.spaces.get_mut(&context) {
            space.blocks.remove(&ptr);
            let _ = space.pool.free(ptr);
        }
    }

    /// Starts a stream-ordered free: the block can no longer be used, and is released once
    /// every position that used it (and `after`) has completed. Returns the positions it waits
    /// for.
    pub fn begin_free(
        &mut self,
        ptr: u64,
        context: K,
        after: &[StreamPosition<K>],
    ) -> MemResult<BlockInfo<K>> {
        self.begin_free_inner(ptr, context, after, None)
    }

    /// As [`DeviceMemory::begin_free`], knowing how far each stream of the context had been
    /// submitted at the call (`enqueued`). Only work enqueued before the free keeps the block
    /// reserved: a task noted later (it names the block after `free`) joins no wait, so the
    /// block is released when the earlier work is done whatever is queued after it, and such
    /// a task faults when it touches the released block. Without `enqueued`, every use noted
    /// before the release joins the wait, so whether a late task runs or faults would depend on
    /// what else was queued.
    pub fn begin_free_enqueued(
        &mut self,
        ptr: u64,
        context: K,
        after: &[StreamPosition<K>],
        enqueued: &[StreamPosition<K>],
    ) -> MemResult<BlockInfo<K>> {
        self.begin_free_inner(
            ptr,
            context,
            after,
            Some(enqueued.iter().copied().collect()),
        )
    }

    pub(super) fn begin_free_inner(
        &mut self,
        ptr: u64,
        context: K,
        after: &[StreamPosition<K>],
        enqueued: Option<SmallVec<[StreamPosition<K>; 4]>>,
    ) -> MemResult<BlockInfo<K>> {
        let info = self.check_free(ptr, context)?;
        let space = self.spaces.get_mut(&context).expect("validated");
        let block = space.blocks.get_mut(&ptr).expect("validated");
        block.freeing = true;
        let mut wait: SmallVec<[StreamPosition<K>; 4]> = block.uses.iter().copied().collect();
        for &(s, seq) in after {
            match wait.iter_mut().find(|(w, _)| *w == s) {
                Some(w) => w.1 = w.1.max(seq),
                None => wait.push((s, seq)),
            }
        }
        self.pending.push(PendingFree {
            context,
            base: ptr,
            after: wait,
            enqueued,
        });
        Ok(info)
    }

    /// Notes that the task at `pos` names `addr`: if it lies in a live block of `context`, that
    /// block's free waits for `pos`. Addresses outside the heap are ignored quickly.
    pub fn note_use(&mut self, context: K, addr: u64, pos: StreamPosition<K>) {
        self.note_use_range(context, addr, 0, pos);
    }

    /// As [`DeviceMemory::note_use`] for every block that `bytes` bytes at `addr` overlap: an
    /// access range may run across adjacent blocks (an access set joins a range that continues
    /// the previous one, whichever block it is in), and each of them must wait for `pos`. Each
    /// block is found once.
    pub fn note_use_range(&mut self, context: K, addr: u64, bytes: u64, pos: StreamPosition<K>) {
        if addr < HEAP_BASE {
            return;
        }
        let Some(space) = self.spaces.get_mut(&context) else {
            return;
        };
        let end = addr.saturating_add(bytes);
        let mut at = addr;
        while let Some((base, size)) = space.pool.block_containing(at) {
            if let Some(block) = space.blocks.get_mut(&base) {
                note_block_use(block, &mut self.pending, context, base, pos);
            }
            let next = base.saturating_add(size);
            if next <= at || next >= end {
                break;
            }
            at = next;
        }
    }

    /// The positions the pending free of `base` waits for (empty if none is pending).
    pub fn pending_positions(&self, base: u64, context: K) -> SmallVec<[StreamPosition<K>; 4]> {
        self.pending
            .iter()
            .find(|p| p.context == context && p.base == base)
            .map(|p| p.after.clone())
            .unwrap_or_default()
    }

    /// Releases the pending free of `base` now (its positions are known to have completed).
    pub fn release_now(&mut self, base: u64, context: K) {
        let before = self.pending.len();
        self.pending
            .retain(|p| !(p.context == context && p.base == base));
        if self.pending.len() < before {
            self.release(context, base);
            self.deferred_releases += 1;
        }
    }

    /// Whether frees are waiting.
    pub fn has_pending_frees(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Releases every pending free whose positions have all completed (`reached` says whether a
    /// position has); returns how many were released.
    pub fn release_completed(&mut self, reached: impl Fn(StreamPosition<K>) -> bool) -> usize {
        let mut done = Vec::new();
        self.pending.retain(|p| {
            if p.after.iter().all(|&pos| reached(pos)) {
                done.push((p.context, p.base));
                false
            } else {
                true
            }
        });
        for &(c, b) in &done {
            self.release(c, b);
        }
        self.deferred_releases += done.len() as u64;
        done.len()
    }

    /// Frees every block of `context` at once (its work was aborted or it is being destroyed).
    pub fn free_all_of(&mut self, context: K) -> usize {
        self.pending.retain(|p| p.context != context);
        let Some(space) = self.spaces.get_mut(&context) else {
            return 0;
        };
        let n = space.blocks.len();
        space.blocks.clear();
        space.epoch += 1;
        space.pool.release_all(&mut self.driver);
        space.tlb.flush();
        n
    }

    /// How many times `context`'s blocks were all released at once (by a fault under
    /// stop-on-failure); `None` when the context has no address space. An allocation made
    /// at one value is gone once the value moves on, even if its address is live again.
    pub fn epoch(&self, context: K) -> Option<u64> {
        self.spaces.get(&context).map(|s| s.epoch)
    }

    /// Releases memory cached by `context`'s pool back to the driver; returns bytes released.
    pub fn trim(&mut self, context: K) -> u64 {
        match self.spaces.get_mut(&context) {
            Some(s) => s.pool.trim(&mut self.driver),
            None => 0,
        }
    }

    /// The live, not freed block of `context` that starts at `base`, if any: one hash lookup,
    /// for an owner that knows its block's base (no search of the pool's ranges).
    pub fn block_at(&self, base: u64, context: K) -> Option<BlockInfo<K>> {
        let b = self.spaces.get(&context)?.blocks.get(&base)?;
        (!b.freeing).then_some(BlockInfo {
            base,
            size: b.size,
            context,
        })
    }

    /// The live, not freed block of `context` containing `addr`, if any: what new work may
    /// name.
    pub fn block_containing(&self, addr: u64, context: K) -> Option<BlockInfo<K>> {
        self.find_block(addr, context, false)
    }

    pub(super) fn find_block(
        &self,
        addr: u64,
        context: K,
        include_freeing: bool,
    ) -> Option<BlockInfo<K>> {
        let space = self.spaces.get(&context)?;
        let (base, _) = space.pool.block_containing(addr)?;
        let b = space
            .blocks
            .get(&base)
            .filter(|b| include_freeing || !b.freeing)?;
        Some(BlockInfo {
            base,
            size: b.size,
            context,
        })
    }
}

/// Records that the task at `pos` uses `block` (at `base` in `context`): its free waits for
/// `pos`. A use noted after `free` (the frees are processed after ingest) joins the wait if its
/// task was enqueued before the free; one enqueued after it does not.
fn note_block_use<K: ContextKey>(
    block: &mut Block<K>,
    pending: &mut [PendingFree<K>],
    context: K,
    base: u64,
    pos: StreamPosition<K>,
) {
    match block.uses.iter_mut().find(|(s, _)| *s == pos.0) {
        Some(u) => u.1 = u.1.max(pos.1),
        None => block.uses.push(pos),
    }
    if block.freeing
        && let Some(p) = pending
            .iter_mut()
            .find(|p| p.context == context && p.base == base)
        && p.enqueued.as_ref().is_none_or(|e| {
            e.iter()
                .any(|&(s, submitted)| s == pos.0 && pos.1 <= submitted)
        })
    {
        match p.after.iter_mut().find(|(s, _)| *s == pos.0) {
            Some(u) => u.1 = u.1.max(pos.1),
            None => p.after.push(pos),
        }
    }
}
