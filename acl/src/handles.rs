//! Opaque handles and the tables behind them. A handle given to C is a number, not an address:
//! its top byte says what it names (context, stream, ...) and the rest is a serial that is never
//! reused in the life of the process. A handle is looked up in its table on every use and never
//! dereferenced, so a NULL, garbage, destroyed or wrong-kind handle is an error code, never a
//! crash, and a handle of a finalized session names nothing in the next one.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use npusim_engine::{Binary, Context, Event, Kernel, Stream};

use crate::error::{AclError, AclResult};
use crate::types::*;

/// What a handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Context = 1,
    Stream = 2,
    Event = 3,
    Binary = 4,
    Function = 5,
    Pool = 6,
    Args = 7,
    Param = 8,
    Notify = 9,
}

impl Kind {
    fn c_type(self) -> &'static str {
        match self {
            Kind::Context => "aclrtContext",
            Kind::Stream => "aclrtStream",
            Kind::Event => "aclrtEvent",
            Kind::Binary => "aclrtBinHandle",
            Kind::Function => "aclrtFuncHandle",
            Kind::Pool => "aclrtMemPool",
            Kind::Args => "aclrtArgsHandle",
            Kind::Param => "aclrtParamHandle",
            Kind::Notify => "aclrtNotify",
        }
    }
}

const KIND_SHIFT: u32 = 56;
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// A new handle value of `kind`.
pub(crate) fn new_key(kind: Kind) -> u64 {
    let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed) & ((1 << KIND_SHIFT) - 1);
    ((kind as u64) << KIND_SHIFT) | serial
}

/// The serial part of a handle (a small number, for ids shown to users).
pub(crate) fn serial(key: u64) -> u64 {
    key & ((1 << KIND_SHIFT) - 1)
}

/// The pointer C sees for a handle.
pub(crate) fn to_ptr(key: u64) -> *mut c_void {
    std::ptr::without_provenance_mut(key as usize)
}

/// The handle value of a pointer C passed in.
pub(crate) fn key_of(p: *const c_void) -> u64 {
    p.addr() as u64
}

/// A context known to C.
#[derive(Debug)]
pub(crate) struct CtxEntry {
    pub ctx: Context,
    /// The stream synchronous copies and memsets run on: private, so `aclrtMemcpy` waits for
    /// nothing but itself (ACL: no implicit device or stream synchronization).
    pub copy_stream: Option<Stream>,
    /// Events destroyed or reset by C while a record of theirs was still pending: they live on
    /// in the runtime until that record fires, so waits already enqueued on them still wait.
    pub retired_events: Vec<Event>,
    /// Streams C destroyed while the context was faulted: the runtime refuses to touch them
    /// then; they are destroyed with the context, or when a reset clears its fault.
    pub retired_streams: Vec<Stream>,
    /// Binaries C unloaded while the context was faulted (as `retired_streams`).
    pub retired_binaries: Vec<Binary>,
}

/// A stream created by C.
#[derive(Debug)]
pub(crate) struct StreamEntry {
    pub stream: Stream,
    pub ctx: u64,
    /// A handle of its context's default stream (`aclrtCtxGetCurrentDefaultStream`).
    pub default: bool,
}

/// An event created by C.
#[derive(Debug)]
pub(crate) struct EventEntry {
    pub event: Event,
    pub ctx: u64,
}

/// Where a binary's bytes came from, to load it again into another context of its device.
#[derive(Clone, Debug)]
pub(crate) enum BinSource {
    File(String),
    Data(std::sync::Arc<[u8]>),
}

/// A loaded binary.
#[derive(Debug)]
pub(crate) struct BinEntry {
    pub binary: Binary,
    pub ctx: u64,
    /// Function handles already handed out, by name (a second lookup returns the same one).
    pub functions: BTreeMap<String, u64>,
    /// Its bytes' origin.
    pub source: BinSource,
}

/// A kernel function of a loaded binary (the runtime checks its binary and context at launch).
#[derive(Debug)]
pub(crate) struct FuncEntry {
    pub kernel: Kernel,
    /// Its name in the binary.
    pub name: String,
    /// The binary's handle.
    pub bin: u64,
    /// Per other context of the device it was launched in: the binary loaded there (its
    /// handle, owned by that context) and the function.
    pub elsewhere: BTreeMap<u64, (u64, Kernel)>,
}

/// One argument of an args handle (`aclrtKernelArgsAppend` and friends).
#[derive(Debug)]
pub(crate) enum Param {
    /// Integer or pointer slots.
    Slots(Vec<u64>),
    /// A float, passed in a float register.
    Float(f32),
    /// Bytes copied to device memory at launch; the kernel gets their address.
    PlaceHolder(Vec<u8>),
}

/// An args handle.
#[derive(Debug)]
pub(crate) struct ArgsEntry {
    pub func: u64,
    pub ctx: u64,
    /// (param handle, param), in argument order.
    pub params: Vec<(u64, Param)>,
    pub finalized: bool,
}

/// A notify: the runtime event whose k-th record is the notify's k-th record, and how many
/// waits were enqueued (the next wait waits for record `waits + 1`).
#[derive(Debug)]
pub(crate) struct NotifyEntry {
    pub ctx: u64,
    pub event: Event,
    pub waits: u64,
}

/// A memory pool.
#[derive(Debug)]
pub(crate) struct PoolEntry {
    pub ctx: u64,
    pub max_size: u64,
    /// Live allocations: address → size.
    pub live: BTreeMap<u64, u64>,
}

impl PoolEntry {
    pub fn used(&self) -> u64 {
        self.live.values().sum()
    }
}

/// A live device allocation made through C.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Alloc {
    pub size: u64,
    /// The pool it came from (`aclrtMemPoolMallocAsync`), if any.
    pub pool: Option<u64>,
}

/// Everything C can name, by handle value. Ordered maps: teardown goes in a fixed order, so a
/// run's timeline does not depend on hashing.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    pub contexts: BTreeMap<u64, CtxEntry>,
    pub context_keys: BTreeMap<Context, u64>,
    pub streams: BTreeMap<u64, StreamEntry>,
    pub stream_keys: BTreeMap<Stream, u64>,
    pub events: BTreeMap<u64, EventEntry>,
    pub binaries: BTreeMap<u64, BinEntry>,
    pub functions: BTreeMap<u64, FuncEntry>,
    pub pools: BTreeMap<u64, PoolEntry>,
    pub args: BTreeMap<u64, ArgsEntry>,
    /// Args handles in memory the caller gave (`aclrtKernelArgsInitByUserMem`): address → key.
    pub user_args: BTreeMap<u64, u64>,
    pub notifies: BTreeMap<u64, NotifyEntry>,
    /// Device allocations by (context handle, base address): each context has its own address
    /// space, so the same address may be live in two contexts.
    pub allocs: BTreeMap<(u64, u64), Alloc>,
}

/// What a destroyed or reset context owned, taken out of the tables for release.
#[derive(Debug, Default)]
pub(crate) struct Owned {
    pub streams: Vec<Stream>,
    pub events: Vec<Event>,
    pub binaries: Vec<Binary>,
    pub allocs: Vec<u64>,
    pub copy_stream: Option<Stream>,
}

/// Looks `p` up in `map` as a handle of `kind`: NULL is ACL_ERROR_INVALID_PARAM, anything not
/// in the table (garbage, destroyed, another kind) ACL_ERROR_RT_PARAM_INVALID.
pub(crate) fn lookup<'a, T>(
    map: &'a BTreeMap<u64, T>,
    kind: Kind,
    p: *const c_void,
    what: &str,
) -> AclResult<(u64, &'a T)> {
    if p.is_null() {
        return Err(AclError::null(what));
    }
    let key = key_of(p);
    match map.get(&key) {
        Some(v) if key >> KIND_SHIFT == kind as u64 => Ok((key, v)),
        _ => Err(AclError::new(
            ACL_ERROR_RT_PARAM_INVALID,
            format!(
                "{what} {p:p} is not a live {} of this runtime (destroyed, or never handed out)",
                kind.c_type()
            ),
        )),
    }
}

impl Tables {
    /// Registers a context; returns its handle value.
    pub fn add_context(&mut self, ctx: Context) -> u64 {
        let key = new_key(Kind::Context);
        self.contexts.insert(
            key,
            CtxEntry {
                ctx,
                copy_stream: None,
                retired_events: Vec::new(),
                retired_streams: Vec::new(),
                retired_binaries: Vec::new(),
            },
        );
        self.context_keys.insert(ctx, key);
        key
    }

    /// The handle value of a context, if C knows it.
    pub fn context_key(&self, ctx: Context) -> AclResult<u64> {
        self.context_keys.get(&ctx).copied().ok_or_else(|| {
            AclError::new(
                ACL_ERROR_RT_INTERNAL_ERROR,
                format!("{ctx} is current but was not made through this library"),
            )
        })
    }

    /// Registers a stream of context `ctx`.
    pub fn add_stream(&mut self, stream: Stream, ctx: u64) -> u64 {
        let key = new_key(Kind::Stream);
        self.streams.insert(
            key,
            StreamEntry {
                stream,
                ctx,
                default: false,
            },
        );
        self.stream_keys.insert(stream, key);
        key
    }

    /// The handle of context `ctx`'s default stream `stream`, registered on first use.
    pub fn default_stream(&mut self, stream: Stream, ctx: u64) -> u64 {
        if let Some(&k) = self.stream_keys.get(&stream) {
            return k;
        }
        let key = new_key(Kind::Stream);
        self.streams.insert(
            key,
            StreamEntry {
                stream,
                ctx,
                default: true,
            },
        );
        self.stream_keys.insert(stream, key);
        key
    }

    /// Forgets a stream.
    pub fn remove_stream(&mut self, key: u64) {
        if let Some(e) = self.streams.remove(&key) {
            self.stream_keys.remove(&e.stream);
        }
    }

    /// Forgets a binary, its functions and their args handles; returns the binaries loaded for
    /// its functions in other contexts, as (context handle, binary), for the caller to unload.
    pub fn remove_binary(&mut self, key: u64) -> Vec<(u64, Binary)> {
        let mut clones = Vec::new();
        if let Some(b) = self.binaries.remove(&key) {
            for f in b.functions.values() {
                if let Some(f) = self.functions.remove(f) {
                    for (ctx, (bin, _)) in f.elsewhere {
                        if let Some(c) = self.binaries.remove(&bin) {
                            clones.push((ctx, c.binary));
                        }
                    }
                }
                self.args.retain(|_, a| a.func != *f);
            }
            let args = &self.args;
            self.user_args.retain(|_, k| args.contains_key(k));
        }
        clones
    }

    /// The live device allocation of context `ctx` that holds `[ptr, ptr + len)`, as
    /// (base, allocation).
    pub fn device_alloc(&self, ctx: u64, ptr: u64, len: u64) -> Option<(u64, Alloc)> {
        let (&(_, base), &a) = self.allocs.range((ctx, 0)..=(ctx, ptr)).next_back()?;
        let end = ptr.checked_add(len)?;
        (end <= base + a.size).then_some((base, a))
    }

    /// Takes out of the tables every object of context `ctx` (and the context itself when
    /// `remove_context`), for the caller to release in the runtime.
    pub fn take_owned(&mut self, ctx: u64, remove_context: bool) -> Owned {
        let mut owned = Owned::default();
        let streams: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| s.ctx == ctx)
            .map(|(k, _)| *k)
            .collect();
        for k in streams {
            // A default stream's handle goes; the stream is its context's.
            if !self.streams[&k].default {
                owned.streams.push(self.streams[&k].stream);
            }
            self.remove_stream(k);
        }
        let events: Vec<u64> = self
            .events
            .iter()
            .filter(|(_, e)| e.ctx == ctx)
            .map(|(k, _)| *k)
            .collect();
        for k in events {
            if let Some(e) = self.events.remove(&k) {
                owned.events.push(e.event);
            }
        }
        let binaries: Vec<u64> = self
            .binaries
            .iter()
            .filter(|(_, b)| b.ctx == ctx)
            .map(|(k, _)| *k)
            .collect();
        for k in binaries {
            owned.binaries.push(self.binaries[&k].binary);
            self.remove_binary(k);
        }
        self.pools.retain(|_, p| p.ctx != ctx);
        self.args.retain(|_, a| a.ctx != ctx);
        let args = &self.args;
        self.user_args.retain(|_, k| args.contains_key(k));
        let notifies: Vec<u64> = self
            .notifies
            .iter()
            .filter(|(_, n)| n.ctx == ctx)
            .map(|(k, _)| *k)
            .collect();
        for k in notifies {
            if let Some(n) = self.notifies.remove(&k) {
                owned.events.push(n.event);
            }
        }
        let allocs: Vec<(u64, u64)> = self
            .allocs
            .range((ctx, 0)..=(ctx, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in allocs {
            self.allocs.remove(&k);
            owned.allocs.push(k.1);
        }
        if let Some(c) = self.contexts.get_mut(&ctx) {
            owned.copy_stream = c.copy_stream.take();
            owned.events.append(&mut c.retired_events);
            owned.streams.append(&mut c.retired_streams);
            owned.binaries.append(&mut c.retired_binaries);
        }
        if remove_context && let Some(c) = self.contexts.remove(&ctx) {
            self.context_keys.remove(&c.ctx);
        }
        owned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(map: &mut BTreeMap<u64, u32>, kind: Kind, v: u32) -> u64 {
        let k = new_key(kind);
        map.insert(k, v);
        k
    }

    #[test]
    fn a_handle_is_found_only_as_its_own_kind() {
        let mut streams = BTreeMap::new();
        let s = entry(&mut streams, Kind::Stream, 7);
        assert_eq!(
            lookup(&streams, Kind::Stream, to_ptr(s), "stream").unwrap(),
            (s, &7)
        );
        // The same number presented as an event handle names nothing.
        let e = lookup(&streams, Kind::Event, to_ptr(s), "event").unwrap_err();
        assert_eq!(e.code, ACL_ERROR_RT_PARAM_INVALID);
    }

    #[test]
    fn null_and_garbage_handles_are_errors_not_crashes() {
        let streams: BTreeMap<u64, u32> = BTreeMap::new();
        let null = lookup(&streams, Kind::Stream, std::ptr::null(), "stream").unwrap_err();
        assert_eq!(null.code, ACL_ERROR_INVALID_PARAM);
        for garbage in [0xdead_beef_usize, usize::MAX, 8] {
            let p = std::ptr::without_provenance::<c_void>(garbage);
            let e = lookup(&streams, Kind::Stream, p, "stream").unwrap_err();
            assert_eq!(e.code, ACL_ERROR_RT_PARAM_INVALID, "{garbage:#x}");
        }
    }

    #[test]
    fn handles_are_never_reused() {
        let a = new_key(Kind::Context);
        let b = new_key(Kind::Context);
        assert_ne!(a, b);
        assert!(serial(b) > serial(a));
    }

    #[test]
    fn device_alloc_finds_ranges_inside_one_allocation_of_its_context() {
        let mut t = Tables::default();
        t.allocs.insert(
            (1, 0x1000),
            Alloc {
                size: 0x100,
                pool: None,
            },
        );
        t.allocs.insert(
            (2, 0x1000),
            Alloc {
                size: 0x10,
                pool: None,
            },
        );
        assert_eq!(
            t.device_alloc(1, 0x1080, 0x80).map(|(b, _)| b),
            Some(0x1000)
        );
        assert!(t.device_alloc(1, 0x1080, 0x81).is_none(), "past the end");
        assert!(t.device_alloc(1, 0xfff, 1).is_none(), "before the start");
        assert!(
            t.device_alloc(2, 0x1080, 1).is_none(),
            "another context's address space"
        );
        assert!(t.device_alloc(3, 0x1000, 1).is_none());
    }
}
