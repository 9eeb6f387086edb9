//! A query parameter that brings its archetype cache up to date only when the world's
//! archetypes changed.
//!
//! A `Query` parameter asks its state to take in new archetypes every time its system runs;
//! in this bevy that call costs about 45 instructions even when there is nothing new (it
//! scans the query's required-component bit set before it compares generations), and a busy
//! frame of npusim's stages makes sixteen of them. A [`CachedQuery`] compares the world's
//! archetype generation with the one it last took in first, so a frame in which no archetype
//! appeared pays a compare per query. Everything else — the access it declares, what it
//! iterates and gets, change ticks — is `Query`'s: it dereferences to one.

use std::ops::{Deref, DerefMut};

use bevy_ecs::archetype::ArchetypeGeneration;
use bevy_ecs::change_detection::Tick;
use bevy_ecs::query::{QueryData, QueryFilter, QueryState};
use bevy_ecs::system::{Query, SystemAccess, SystemMeta, SystemParam, SystemParamValidationError};
use bevy_ecs::world::unsafe_world_cell::UnsafeWorldCell;
use bevy_ecs::world::{World, WorldId};

/// A `Query` whose archetype cache is refreshed only when the world's archetypes changed
/// (see the module docs). Use it as the `Query` it dereferences to.
pub struct CachedQuery<'w, 's, D: QueryData + 'static, F: QueryFilter + 'static = ()>(
    Query<'w, 's, D, F>,
);

/// A [`CachedQuery`]'s state: the query's, and the archetype generation it last took in.
pub struct CachedQueryState<D: QueryData + 'static, F: QueryFilter + 'static = ()> {
    state: QueryState<D, F>,
    seen: ArchetypeGeneration,
    world: WorldId,
}

// SAFETY: the access is the query's own, declared by `Query`'s `init_access`; `get_param`
// makes the query `Query::get_param` makes (same state, same ticks), after taking in the
// archetypes the world gained since the state last did, which is all `Query::get_param`'s
// refresh does; the world is checked to be the state's.
unsafe impl<D: QueryData + 'static, F: QueryFilter + 'static> SystemParam
    for CachedQuery<'_, '_, D, F>
{
    type State = CachedQueryState<D, F>;
    type Item<'w, 's> = CachedQuery<'w, 's, D, F>;

    fn init_state(world: &mut World) -> Self::State {
        let state = <Query<D, F> as SystemParam>::init_state(world);
        CachedQueryState {
            state,
            // Not yet taken in: the first run refreshes.
            seen: ArchetypeGeneration::initial(),
            world: world.id(),
        }
    }

    fn init_access(
        state: &Self::State,
        system_meta: &mut SystemMeta,
        system_access: &mut SystemAccess,
        world: &mut World,
    ) {
        <Query<D, F> as SystemParam>::init_access(&state.state, system_meta, system_access, world);
    }

    #[inline]
    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        system_meta: &SystemMeta,
        world: UnsafeWorldCell<'w>,
        change_tick: Tick,
    ) -> Result<Self::Item<'w, 's>, SystemParamValidationError> {
        let generation = world.archetypes().generation();
        if state.seen != generation || state.world != world.id() {
            // Validates the world (panics on another, as `Query` does) and takes in the new
            // archetypes.
            state.state.update_archetypes_unsafe_world_cell(world);
            state.seen = generation;
        }
        // SAFETY: the caller ensures the system declared the query's access (`init_access`)
        // and that `world` may be accessed so; the state is the world's and up to date with
        // its archetypes (checked above).
        Ok(CachedQuery(unsafe {
            state.state.query_unchecked_manual_with_ticks(
                world,
                system_meta.get_last_run(),
                change_tick,
            )
        }))
    }
}

impl<'w, 's, D: QueryData, F: QueryFilter> Deref for CachedQuery<'w, 's, D, F> {
    type Target = Query<'w, 's, D, F>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<D: QueryData, F: QueryFilter> DerefMut for CachedQuery<'_, '_, D, F> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<'a, 'w, 's, D: QueryData, F: QueryFilter> IntoIterator for &'a mut CachedQuery<'w, 's, D, F>
where
    &'a mut Query<'w, 's, D, F>: IntoIterator,
{
    type Item = <&'a mut Query<'w, 's, D, F> as IntoIterator>::Item;
    type IntoIter = <&'a mut Query<'w, 's, D, F> as IntoIterator>::IntoIter;

    #[inline]
    fn into_iter(self) -> Self::IntoIter {
        (&mut self.0).into_iter()
    }
}

impl<'a, 'w, 's, D: QueryData, F: QueryFilter> IntoIterator for &'a CachedQuery<'w, 's, D, F>
where
    &'a Query<'w, 's, D, F>: IntoIterator,
{
    type Item = <&'a Query<'w, 's, D, F> as IntoIterator>::Item;
    type IntoIter = <&'a Query<'w, 's, D, F> as IntoIterator>::IntoIter;

    #[inline]
    fn into_iter(self) -> Self::IntoIter {
        (&self.0).into_iter()
    }
}

/// The state of a query an exclusive system holds (as `&mut CachedQueryState<..>`, in place of
/// `&mut QueryState<..>`): its queries take in new archetypes only when the world's archetypes
/// changed since it last did.
impl<D: QueryData + 'static, F: QueryFilter + 'static> CachedQueryState<D, F> {
    /// Takes in the archetypes `world` gained since the last look (panics if `world` is not
    /// the one the state was made for, as `QueryState` does).
    #[inline]
    fn refresh(&mut self, world: UnsafeWorldCell) {
        let generation = world.archetypes().generation();
        if self.seen != generation || self.world != world.id() {
            self.state.update_archetypes_unsafe_world_cell(world);
            self.seen = generation;
        }
    }

    /// The query over `world`, as `QueryState::query_mut`.
    pub fn query_mut<'w>(&mut self, world: &'w mut World) -> Query<'w, '_, D, F> {
        let cell = world.as_unsafe_world_cell();
        self.refresh(cell);
        // SAFETY: `world` is borrowed exclusively for the query's life, and the state is
        // `world`'s and up to date with its archetypes (`refresh`).
        unsafe { self.state.query_unchecked_manual(cell) }
    }

    /// The query over `world`, as `QueryState::query_unchecked`.
    ///
    /// # Safety
    /// As `QueryState::query_unchecked`: no other access may alias the components the query
    /// reads or writes while the query lives.
    pub unsafe fn query_unchecked<'w>(
        &mut self,
        world: UnsafeWorldCell<'w>,
    ) -> Query<'w, '_, D, F> {
        self.refresh(world);
        // SAFETY: the caller upholds the aliasing rules; the state is `world`'s and up to date
        // with its archetypes (`refresh`).
        unsafe { self.state.query_unchecked_manual(world) }
    }
}

// SAFETY: no world access, as `&mut QueryState`: the system reaches the world through its
// `&mut World` and the state's methods, which take it as an argument.
unsafe impl<D: QueryData + 'static, F: QueryFilter + 'static> SystemParam
    for &'_ mut CachedQueryState<D, F>
{
    type State = CachedQueryState<D, F>;
    type Item<'w, 's> = &'s mut CachedQueryState<D, F>;

    fn init_state(world: &mut World) -> Self::State {
        CachedQueryState {
            state: QueryState::new(world),
            seen: world.archetypes().generation(),
            world: world.id(),
        }
    }

    fn init_access(
        _state: &Self::State,
        _system_meta: &mut SystemMeta,
        _system_access: &mut SystemAccess,
        _world: &mut World,
    ) {
    }

    #[inline]
    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        _system_meta: &SystemMeta,
        _world: UnsafeWorldCell<'w>,
        _change_tick: Tick,
    ) -> Result<Self::Item<'w, 's>, SystemParamValidationError> {
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy_ecs::prelude::*;
    use bevy_ecs::schedule::{Schedule, ScheduleConfigs, SingleThreadedExecutor};
    use bevy_ecs::system::ScheduleSystem;

    #[derive(Component)]
    struct Count(u32);

    #[derive(Component)]
    struct Other;

    #[derive(Resource, Default)]
    struct Seen(Vec<u32>);

    fn bump(mut q: CachedQuery<&mut Count>, mut seen: ResMut<Seen>) {
        seen.0.clear();
        for mut c in &mut q {
            c.0 += 1;
            seen.0.push(c.0);
        }
        seen.0.sort_unstable();
    }

    fn bump_exclusive(world: &mut World, q: &mut CachedQueryState<&'static mut Count>) {
        let mut seen: Vec<u32> = q
            .query_mut(world)
            .iter_mut()
            .map(|mut c| {
                c.0 += 1;
                c.0
            })
            .collect();
        seen.sort_unstable();
        world.resource_mut::<Seen>().0 = seen;
    }

    fn schedule(system: ScheduleConfigs<ScheduleSystem>) -> Schedule {
        let mut s = Schedule::default();
        s.set_executor(SingleThreadedExecutor::new());
        s.add_systems(system);
        s
    }

    /// Runs `s` with entities of a new archetype spawned between runs; what it saw each run.
    fn runs_across_a_new_archetype(mut s: Schedule) -> Vec<Vec<u32>> {
        let mut world = World::new();
        world.init_resource::<Seen>();
        world.spawn(Count(0));
        let mut seen = Vec::new();
        s.run(&mut world);
        seen.push(world.resource::<Seen>().0.clone());
        // Nothing new: the cache is used as it is.
        world.spawn(Count(10));
        s.run(&mut world);
        seen.push(world.resource::<Seen>().0.clone());
        // A new archetype holding the component: it must be taken in.
        world.spawn((Count(100), Other));
        s.run(&mut world);
        seen.push(world.resource::<Seen>().0.clone());
        seen
    }

    #[test]
    fn a_cached_query_sees_entities_of_archetypes_that_appear_after_its_first_run() {
        let expected = vec![vec![1], vec![2, 11], vec![3, 12, 101]];
        assert_eq!(
            runs_across_a_new_archetype(schedule(bump.into_configs())),
            expected
        );
        assert_eq!(
            runs_across_a_new_archetype(schedule(bump_exclusive.into_configs())),
            expected
        );
    }

    #[test]
    fn a_write_through_a_cached_query_marks_the_component_changed() {
        let mut world = World::new();
        world.init_resource::<Seen>();
        let e = world.spawn(Count(0)).id();
        let mut s = schedule(bump.into_configs());
        s.run(&mut world);
        let before = world.change_tick();
        // The next run's tick is after `before`.
        world.increment_change_tick();
        s.run(&mut world);
        let changed = world.entity(e).get_ref::<Count>().unwrap().last_changed();
        assert!(changed.is_newer_than(before, world.change_tick()));
    }

    #[test]
    #[should_panic(expected = "conflicts")]
    fn a_cached_query_conflicting_with_another_query_is_refused_as_a_query_would_be() {
        fn both(_a: CachedQuery<&mut Count>, _b: Query<&Count>) {}
        let mut world = World::new();
        schedule(both.into_configs()).run(&mut world);
    }
}
