//! What the runtime keeps of its world to find things in it fast: cached queries for the
//! per-call handle checks and resource ids for what a frame reads, made again whenever the
//! world may have been swapped, and the lookups of `Inner` that go through them.

use bevy_ecs::component::Mutable;
use bevy_ecs::prelude::*;
use bevy_ecs::query::QueryState;
use npusim_components::resources::{FrameStats, PendingCallbacks};
use npusim_components::{
    ContextState, EventState, KernelRegistry, NpuResult, StreamState, WorldResources,
};

use super::Inner;

/// `e`'s `T` through the cached query `q` of `world` (the world it was made for, see
/// [`Bound`]), else through `World::get` (a stale cache misses; it never answers wrongly).
#[inline(always)]
fn cached<'w, T: Component<Mutability = Mutable>>(
    q: &QueryState<&'static mut T>,
    world: &'w World,
    e: Entity,
) -> Option<&'w T> {
    q.get_manual(world, e).ok().or_else(|| world.get::<T>(e))
}

/// As [`cached`], mutably.
#[inline(always)]
fn cached_mut<'w, T: Component<Mutability = Mutable>>(
    q: &mut QueryState<&'static mut T>,
    world: &'w mut World,
    e: Entity,
) -> Option<Mut<'w, T>> {
    // SAFETY: `&mut World` is exclusive access to the world, the world the cached query was
    // made for (`Bound` is rebound whenever the world may have been swapped); its archetype
    // list is refreshed after every frame and spawn (a stale one misses, and the fallback
    // finds the component), so skipping the refresh is sound.
    let cell = world.as_unsafe_world_cell();
    unsafe {
        match q.query_unchecked_manual(cell).get_inner(e) {
            Ok(found) => Some(found),
            Err(_) => cell.world_mut().get_mut::<T>(e),
        }
    }
}

/// Resource `T`'s id in one world: fetched by it, a resource is found without hashing its type
/// (a frame fetches a few every time).
/// An id is only ever used with the world it was taken from: the runtime's ids live in
/// [`Bound`], taken again whenever its world may have been swapped.
pub(crate) struct ResId<T> {
    id: bevy_ecs::component::ComponentId,
    of: std::marker::PhantomData<fn() -> T>,
}

impl<T: Resource> ResId<T> {
    /// `T`'s id in `world`, registering the type if it is not yet.
    fn of(world: &mut World) -> Self {
        Self {
            id: world.register_component::<T>(),
            of: std::marker::PhantomData,
        }
    }

    /// `T` in `world` (the world the id was taken from), unless it was removed.
    #[inline]
    pub(crate) fn get<'w>(&self, world: &'w World) -> Option<&'w T> {
        // SAFETY: `id` is `T`'s resource id in this world (`of`; ids are taken again for a
        // swapped world, see `Bound`), so the pointer is to a `T`.
        world
            .get_resource_by_id(self.id)
            .map(|p| unsafe { p.deref::<T>() })
    }
}

impl<T: Resource + Component<Mutability = Mutable>> ResId<T> {
    /// `T` in `world`, mutably, unless it was removed.
    #[inline]
    pub(crate) fn get_mut<'w>(&self, world: &'w mut World) -> Option<Mut<'w, T>> {
        // SAFETY: as in `get`.
        world
            .get_resource_mut_by_id(self.id)
            .map(|p| unsafe { p.with_type::<T>() })
    }
}

/// The resources a frame reads outside the schedule.
pub(crate) struct FrameIds {
    /// The frame counters.
    pub(crate) stats: ResId<FrameStats>,
    /// Faults waiting for the exception callback.
    pub(crate) faults: ResId<npusim_components::resources::Faults>,
    /// Host callbacks the tick released.
    pub(crate) callbacks: ResId<PendingCallbacks>,
}

/// What the runtime keeps of one world to find things in it fast: cached queries for the
/// per-call handle checks (a plain `World::get` looks the component type up by `TypeId` on
/// every call) and resource ids. Valid for the world it was made of only: an embedder can swap
/// the runtime's world through a [`RuntimeGuard`] (and a user system could, in a frame), so it is
/// made again for the new world ([`Inner::rebind`]) when the guard drops, before and after a
/// frame, and when a frame ends in a panic (`run_systems`) — the only times the world can have
/// changed — and no lookup checks the world itself. Kept current with new archetypes after
/// every frame and spawn ([`Inner::refresh_queries`]); a miss falls back to `World::get`, so a
/// stale cache costs time, never correctness.
///
/// [`RuntimeGuard`]: super::RuntimeGuard
pub(crate) struct Bound {
    /// The world it was made of.
    world: bevy_ecs::world::WorldId,
    /// Streams.
    q_streams: QueryState<&'static mut StreamState>,
    /// Contexts.
    q_contexts: QueryState<&'static ContextState>,
    /// Events.
    q_events: QueryState<&'static mut EventState>,
    /// The kernel registry, so a launch finds it without a type lookup.
    registry: ResId<KernelRegistry>,
    /// The task pool (an op launch takes its box from the pool).
    task_pool: ResId<npusim_components::TaskPool>,
    /// The resources every frame reads outside the schedule.
    pub(crate) frame: FrameIds,
    /// The world's archetype generation when the queries were last refreshed.
    archetypes_seen: Option<bevy_ecs::archetype::ArchetypeGeneration>,
}

impl Bound {
    /// Made of `world`.
    pub(super) fn new(world: &mut World) -> Self {
        Self {
            world: world.id(),
            q_streams: QueryState::new(world),
            q_contexts: QueryState::new(world),
            q_events: QueryState::new(world),
            registry: ResId::of(world),
            task_pool: ResId::of(world),
            frame: FrameIds {
                stats: ResId::of(world),
                faults: ResId::of(world),
                callbacks: ResId::of(world),
            },
            archetypes_seen: None,
        }
    }
}

impl Inner {
    /// The stream `e`, if it exists.
    #[inline(always)]
    pub fn stream(&self, e: Entity) -> Option<&StreamState> {
        cached(&self.bound.q_streams, &self.world, e)
    }

    /// The stream `e`, mutably, if it exists (the submission path's one mutable lookup).
    #[inline]
    pub fn stream_mut(&mut self, e: Entity) -> Option<Mut<'_, StreamState>> {
        cached_mut(&mut self.bound.q_streams, &mut self.world, e)
    }

    /// The event `e`, if it exists.
    #[inline]
    pub fn event(&self, e: Entity) -> Option<&EventState> {
        cached(&self.bound.q_events, &self.world, e)
    }

    /// The event `e`, mutably, if it exists.
    #[inline]
    pub fn event_mut(&mut self, e: Entity) -> Option<Mut<'_, EventState>> {
        cached_mut(&mut self.bound.q_events, &mut self.world, e)
    }

    /// The kernel registry, unless an embedder removed it.
    #[inline]
    pub fn registry(&self) -> NpuResult<&KernelRegistry> {
        match self.bound.registry.get(&self.world) {
            Some(r) => Ok(r),
            None => self.world.res::<KernelRegistry>(),
        }
    }

    /// The task pool, unless an embedder removed it.
    #[inline]
    pub fn task_pool_mut(&mut self) -> Option<Mut<'_, npusim_components::TaskPool>> {
        self.bound.task_pool.get_mut(&mut self.world)
    }

    /// The context `e`, if it exists.
    #[inline]
    pub fn context(&self, e: Entity) -> Option<&ContextState> {
        self.bound
            .q_contexts
            .get_manual(&self.world, e)
            .ok()
            .or_else(|| self.world.get::<ContextState>(e))
    }

    /// Brings the cached queries up to date with new archetypes (nothing to do, and nearly
    /// free, when no archetype was added since the last refresh).
    pub fn refresh_queries(&mut self) {
        let generation = self.world.archetypes().generation();
        let b = &mut self.bound;
        if b.archetypes_seen == Some(generation) {
            return;
        }
        b.q_streams.update_archetypes(&self.world);
        b.q_contexts.update_archetypes(&self.world);
        b.q_events.update_archetypes(&self.world);
        b.archetypes_seen = Some(generation);
    }

    /// Makes [`Bound`] again if the world is not the one it was made of (an embedder swapped
    /// it through a [`RuntimeGuard`]); nothing otherwise.
    ///
    /// [`RuntimeGuard`]: super::RuntimeGuard
    #[inline]
    pub(crate) fn rebind(&mut self) {
        if self.world.id() != self.bound.world {
            self.bound = Bound::new(&mut self.world);
            self.refresh_queries();
        }
    }

    /// Whether some stream has submissions not yet ingested.
    pub fn doorbell_rung(&self) -> bool {
        self.bound
            .q_streams
            .iter_manual(&self.world)
            .any(|s| !s.doorbell.is_empty())
    }

    /// Whether device `index` has finished everything submitted to it: every stream on it has
    /// completed as many tasks as it was given (the streams count; nothing else does).
    #[inline]
    pub fn device_idle(&self, index: u32) -> bool {
        self.streams_idle(Some(index))
    }

    /// Whether every stream (of device `index`, or of every device) has completed as many
    /// tasks as it was given.
    #[inline]
    pub fn streams_idle(&self, device: Option<u32>) -> bool {
        self.bound
            .q_streams
            .iter_manual(&self.world)
            .filter(|s| device.is_none_or(|d| s.device_index == d))
            .all(StreamState::is_idle)
    }
}
