//! Resources a system fetches only on the path that uses them.
//!
//! A `Res` or `ResMut` parameter is fetched every time its system runs, whether or not that run
//! touches it, and in this bevy a fetch looks the resource's entity up (about 70 instructions).
//! A stage that needs a resource only for rare work — peer copies, collectives, binary kernels,
//! host callbacks, faults — declares it as a [`LazyRes`] or [`LazyResMut`] instead: the access
//! is declared exactly as `Res` / `ResMut` declare it (the schedule orders and checks it the
//! same way), and the resource is looked up when the system asks for it.

use std::marker::PhantomData;

use bevy_ecs::change_detection::{Mut, Tick};
use bevy_ecs::component::{ComponentId, Mutable};
use bevy_ecs::query::FilteredAccess;
use bevy_ecs::resource::{IS_RESOURCE, Resource};
use bevy_ecs::system::{SystemAccess, SystemMeta, SystemParam, SystemParamValidationError};
use bevy_ecs::world::World;
use bevy_ecs::world::unsafe_world_cell::UnsafeWorldCell;

/// Declares read (or, with `write`, write) access to the resource `id` for the parameter
/// `what`, as bevy's `Res` / `ResMut` declare theirs, or panics as they do on a conflict.
fn declare(
    id: ComponentId,
    write: bool,
    what: &str,
    system_meta: &SystemMeta,
    system_access: &mut SystemAccess,
) {
    let mut filter = FilteredAccess::default();
    if write {
        filter.add_write(id);
    } else {
        filter.add_read(id);
    }
    filter.and_with(IS_RESOURCE);
    if system_access.try_add(filter).is_err() {
        panic!(
            "{what} in system {} conflicts with a previous system parameter",
            system_meta.name()
        );
    }
}

/// The component id of resource `T` (registered if it is not yet).
fn resource_id<T: Resource>(world: &mut World) -> ComponentId {
    world.components_registrator().register_component::<T>()
}

/// Read access to resource `T`, looked up when [`LazyRes::get`] is called.
pub struct LazyRes<'w, T: Resource> {
    world: UnsafeWorldCell<'w>,
    id: ComponentId,
    _marker: PhantomData<&'w T>,
}

impl<'w, T: Resource> LazyRes<'w, T> {
    /// The resource, if the world has it.
    #[inline]
    pub fn get(&self) -> Option<&'w T> {
        // SAFETY: the system declared read access to the resource `id` names (`init_access`),
        // and `world` is the cell the schedule handed the system for this run.
        unsafe {
            self.world
                .get_resource_by_id(self.id)
                .map(|p| p.deref::<T>())
        }
    }
}

// SAFETY: `LazyRes` only reads.
unsafe impl<T: Resource> bevy_ecs::system::ReadOnlySystemParam for LazyRes<'_, T> {}

/// Write access to resource `T`, looked up when [`LazyResMut::get_mut`] is called. A write
/// through it marks the resource changed, as one through `ResMut` does; the `Mut` it gives
/// tells changes from the world's last change tick, not from the system's last run (npusim's
/// stages never ask).
pub struct LazyResMut<'w, T: Resource<Mutability = Mutable>> {
    world: UnsafeWorldCell<'w>,
    id: ComponentId,
    _marker: PhantomData<&'w mut T>,
}

impl<T: Resource<Mutability = Mutable>> LazyResMut<'_, T> {
    /// The resource, if the world has it.
    #[inline]
    pub fn get_mut(&mut self) -> Option<Mut<'_, T>> {
        // SAFETY: the system declared write access to the resource `id` names (`init_access`),
        // `world` is the cell the schedule handed the system for this run, and the borrow of
        // `self` keeps this the only reference made through it; `id` is `T`'s.
        unsafe {
            self.world
                .get_resource_mut_by_id(self.id)
                .map(|m| m.with_type::<T>())
        }
    }
}

/// The `SystemParam` impl of a lazy parameter `$name`: its state is the resource's id, its access
/// is declared as `Res` (`$write` false) or `ResMut` (true) declare theirs, and getting the
/// parameter looks nothing up.
macro_rules! lazy_system_param {
    ($name:ident, $write:literal, $($bound:tt)+) => {
        // SAFETY: the access `get` / `get_mut` make is declared in `init_access` (read for
        // `LazyRes`, write for `LazyResMut`), as `Res` / `ResMut` declare theirs; `get_param`
        // only keeps the cell the schedule hands the system and the resource's id.
        unsafe impl<T: $($bound)+> SystemParam for $name<'_, T> {
            type State = ComponentId;
            type Item<'w, 's> = $name<'w, T>;

            fn init_state(world: &mut World) -> Self::State {
                resource_id::<T>(world)
            }

            fn init_access(
                &id: &Self::State,
                system_meta: &mut SystemMeta,
                system_access: &mut SystemAccess,
                _world: &mut World,
            ) {
                declare(id, $write, stringify!($name), system_meta, system_access);
            }

            #[inline]
            unsafe fn get_param<'w, 's>(
                &mut id: &'s mut Self::State,
                _system_meta: &SystemMeta,
                world: UnsafeWorldCell<'w>,
                _change_tick: Tick,
            ) -> Result<Self::Item<'w, 's>, SystemParamValidationError> {
                Ok($name {
                    world,
                    id,
                    _marker: PhantomData,
                })
            }
        }
    };
}

lazy_system_param!(LazyRes, false, Resource);
lazy_system_param!(LazyResMut, true, Resource<Mutability = Mutable>);

#[cfg(test)]
mod tests {
    use super::*;
    use bevy_ecs::prelude::*;
    use bevy_ecs::schedule::Schedule;

    #[derive(Resource, Default)]
    struct Counter(u32);

    #[derive(Resource, Default)]
    struct Seen(Option<u32>);

    fn bump(mut c: LazyResMut<Counter>, mut seen: ResMut<Seen>, mut runs: Local<u32>) {
        *runs += 1;
        // Only every other run touches the counter.
        if runs.is_multiple_of(2)
            && let Some(mut c) = c.get_mut()
        {
            c.0 += 1;
            seen.0 = Some(c.0);
        }
    }

    fn read(c: LazyRes<Counter>, mut seen: ResMut<Seen>) {
        seen.0 = c.get().map(|c| c.0 * 10);
    }

    fn schedule() -> Schedule {
        let mut s = Schedule::default();
        s.set_executor(bevy_ecs::schedule::SingleThreadedExecutor::new());
        s
    }

    #[test]
    fn a_lazy_resource_is_read_and_written_when_asked_for_and_marked_changed() {
        let mut world = World::new();
        world.init_resource::<Counter>();
        world.init_resource::<Seen>();
        let mut s = schedule();
        s.add_systems(bump);
        s.run(&mut world);
        assert_eq!(world.resource::<Counter>().0, 0, "not asked for: untouched");
        let before = world.change_tick();
        s.run(&mut world);
        assert_eq!(world.resource::<Counter>().0, 1);
        assert_eq!(world.resource::<Seen>().0, Some(1));
        let changed = world.resource_ref::<Counter>().last_changed();
        assert!(
            changed.is_newer_than(before, world.change_tick()),
            "marked changed"
        );

        let mut r = schedule();
        r.add_systems(read);
        r.run(&mut world);
        assert_eq!(world.resource::<Seen>().0, Some(10));
    }

    #[test]
    fn a_missing_resource_is_none_and_the_system_still_runs() {
        let mut world = World::new();
        world.init_resource::<Seen>();
        world.insert_resource(Seen(Some(5)));
        let mut r = schedule();
        r.add_systems(read);
        r.run(&mut world);
        assert_eq!(world.resource::<Seen>().0, None);
    }

    #[test]
    #[should_panic(expected = "conflicts")]
    fn a_lazy_write_conflicting_with_a_read_of_the_same_resource_is_refused() {
        fn both(_a: LazyResMut<Counter>, _b: Res<Counter>) {}
        let mut world = World::new();
        world.init_resource::<Counter>();
        let mut s = schedule();
        s.add_systems(both);
        s.run(&mut world);
    }
}
