//! The session's state, the ground every C function stands on: the one [`Session`] of the
//! process (its npusim [`Runtime`], the handle tables, the callback-report hubs), looked up by
//! [`session`], and the configuration `aclInit` reads from the environment (the `session`
//! module, with `aclInit` and `aclFinalize`, lists the variables).
//!
//! Lock order: the tables are never held across a runtime call. A runtime call may drive
//! frames, and frames run host callbacks (exception callbacks, `aclrtLaunchCallback`) that
//! themselves look things up in the tables or call back into the C API.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use npusim_engine::{
    Context, DeviceConfig, FailureMode, Runtime, RuntimeConfig, Stream, StreamConfig, StreamKind,
};

use crate::error::{AclError, AclResult};
use crate::handles::{Kind, Tables, lookup};
use crate::reports::Reports;
use crate::types::*;

/// The live session.
pub(crate) struct Session {
    pub rt: Runtime,
    tables: Mutex<Tables>,
    pub reports: Arc<Reports>,
    /// Per device: the handle of its primary context.
    pub primaries: Vec<u64>,
    /// Per device: `aclrtSetDevice` calls not yet matched by `aclrtResetDevice`.
    pub device_refs: Mutex<Vec<u32>>,
    /// Where `aclFinalize` writes the timeline (`NPUSIM_TRACE`).
    pub trace: Option<PathBuf>,
    /// The host-function hub (`aclrtSubscribeHostFunc`), run as the callback-report hub is.
    pub host_funcs: Arc<Reports>,
    /// The C exception callback (`aclrtSetExceptionInfoCallback`).
    pub user_exception: Mutex<aclrtExceptionInfoCallback>,
    /// Per device: the error code of its latest task failure (`aclrtGetErrorVerbose`).
    pub last_fault: Mutex<Vec<Option<i32>>>,
    /// Recent kernel launches made through C, for the exception info's function and arguments.
    pub launches: Mutex<LaunchLog>,
}

/// A launch through C: its function handle and its argument slots.
pub(crate) type Launch = (u64, Arc<[u8]>);

/// What a kernel launch through C was: its function handle and argument slots, by (stream,
/// task sequence), for the most recent [`LaunchLog::CAPACITY`] launches.
#[derive(Default)]
pub(crate) struct LaunchLog {
    map: BTreeMap<(Stream, u64), Launch>,
    order: VecDeque<(Stream, u64)>,
}

impl LaunchLog {
    const CAPACITY: usize = 4096;

    /// Remembers a launch.
    pub fn insert(&mut self, stream: Stream, seq: u64, func: u64, args: Arc<[u8]>) {
        if self.order.len() == Self::CAPACITY
            && let Some(old) = self.order.pop_front()
        {
            self.map.remove(&old);
        }
        self.order.push_back((stream, seq));
        self.map.insert((stream, seq), (func, args));
    }

    /// The launch that was task `seq` of `stream`, if remembered.
    pub fn get(&self, stream: Stream, seq: u64) -> Option<Launch> {
        self.map.get(&(stream, seq)).cloned()
    }
}

/// The session between `aclInit` and `aclFinalize`, if one is on.
pub(crate) static SESSION: RwLock<Option<Arc<Session>>> = RwLock::new(None);

thread_local! {
    /// The sequence number of the calling thread's latest task (`aclrtGetThreadLastTaskId`).
    pub(crate) static LAST_TASK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The live session, or ACL_ERROR_UNINITIALIZE.
pub(crate) fn session() -> AclResult<Arc<Session>> {
    SESSION
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or_else(|| AclError::new(ACL_ERROR_UNINITIALIZE, "aclInit has not been called"))
}

/// What `aclInit` builds, from the environment.
pub(crate) struct InitConfig {
    pub runtime: RuntimeConfig,
    pub trace: Option<PathBuf>,
    pub wall_limit: Duration,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Reads `NPUSIM_DEVICES`, `NPUSIM_PRESET` and `NPUSIM_TRACE`.
pub(crate) fn config_from_env() -> AclResult<InitConfig> {
    let devices = match env("NPUSIM_DEVICES") {
        None => 1,
        Some(v) => v
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| AclError::param(format!("NPUSIM_DEVICES={v:?}: expected 1..=1024")))?,
    };
    let device = match env("NPUSIM_PRESET").as_deref().map(str::trim) {
        None | Some("910b") | Some("ascend-910b") => DeviceConfig::ascend_910b(),
        Some("small") => DeviceConfig::small(),
        Some(other) => {
            return Err(AclError::param(format!(
                "NPUSIM_PRESET={other:?}: expected 910b or small"
            )));
        }
    };
    let trace = env("NPUSIM_TRACE").map(PathBuf::from);
    let wall_limit = match env("NPUSIM_KERNEL_WALL_LIMIT") {
        None => npusim_engine::limits::DeviceLimits::DEFAULT_WALL_LIMIT,
        Some(v) => v
            .trim()
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| {
                AclError::param(format!(
                    "NPUSIM_KERNEL_WALL_LIMIT={v:?}: expected whole seconds (0: no limit)"
                ))
            })?,
    };
    let sanitizer = match env("NPUSIM_SANITIZE") {
        None => npusim_engine::SanitizerConfig::default(),
        Some(v) => npusim_engine::sanitizer::config_from(&v, env("NPUSIM_SANITIZE_UNINIT"))
            .ok_or_else(|| {
                AclError::param(format!(
                    "NPUSIM_SANITIZE={v:?}: expected off, report or error"
                ))
            })?,
    };
    Ok(InitConfig {
        wall_limit,
        runtime: RuntimeConfig {
            devices,
            device,
            timeline: trace.is_some(),
            sanitizer,
            ..RuntimeConfig::default()
        },
        trace,
    })
}

impl Session {
    /// Builds the session `aclInit` starts.
    pub(crate) fn new(config: InitConfig) -> AclResult<Self> {
        let rt = Runtime::new(config.runtime)?;
        rt.limits().set_kernel_wall_limit(config.wall_limit);
        let mut tables = Tables::default();
        let mut primaries = Vec::new();
        let count = rt.device_count();
        for device in 0..count {
            rt.contexts().set_device(device)?;
            // ACL's default failure mode: a failing task fails alone.
            rt.contexts().set_failure_mode(FailureMode::Continue)?;
            let ctx = rt.contexts().current()?;
            primaries.push(tables.add_context(ctx));
        }
        // Leave the initializing thread without a context of its own, as any other thread.
        rt.contexts().pop();
        Ok(Self {
            rt,
            tables: Mutex::new(tables),
            reports: Arc::new(Reports::default()),
            primaries,
            device_refs: Mutex::new(vec![0; count as usize]),
            trace: config.trace,
            host_funcs: Arc::new(Reports::default()),
            user_exception: Mutex::new(None),
            last_fault: Mutex::new(vec![None; count as usize]),
            launches: Mutex::new(LaunchLog::default()),
        })
    }

    /// The handle tables (see the module docs for the lock order).
    pub fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The handle value of the calling thread's current context.
    pub fn current_ctx(&self) -> AclResult<(u64, Context)> {
        let ctx = self.rt.contexts().current()?;
        Ok((self.tables().context_key(ctx)?, ctx))
    }

    /// The stream `p` names; NULL is the current context's default stream.
    pub fn stream_or_default(&self, p: aclrtStream) -> AclResult<Stream> {
        if p.is_null() {
            return Ok(self.rt.contexts().default_stream()?);
        }
        self.stream(p, "stream")
    }

    /// The stream `p` names (NULL is an error).
    pub fn stream(&self, p: aclrtStream, what: &str) -> AclResult<Stream> {
        let t = self.tables();
        Ok(lookup(&t.streams, Kind::Stream, p, what)?.1.stream)
    }

    /// The stream synchronous copies of the current context run on (made on first use).
    pub fn copy_stream(&self) -> AclResult<Stream> {
        let (key, _) = self.current_ctx()?;
        if let Some(s) = self.tables().contexts.get(&key).and_then(|c| c.copy_stream) {
            return Ok(s);
        }
        let s = self.rt.streams().create_with(StreamConfig {
            priority: 0,
            kind: StreamKind::Copy,
        })?;
        let chosen = match self.tables().contexts.get_mut(&key) {
            Some(c) => *c.copy_stream.get_or_insert(s),
            None => {
                return Err(AclError::new(
                    ACL_ERROR_RT_CONTEXT_NULL,
                    "the current context was destroyed",
                ));
            }
        };
        if chosen != s {
            // Another thread of this context made one first: this one was never used.
            let _ = self.rt.streams().destroy(s);
        }
        Ok(chosen)
    }

    /// Remembers the task `sub` as this thread's last task (`aclrtGetThreadLastTaskId`);
    /// returns its sequence number.
    pub fn note_task(&self, sub: npusim_engine::Submission) -> u64 {
        LAST_TASK.set(sub.seq());
        sub.seq()
    }

    /// As [`Self::note_task`] for a call that returns no submission (an event record): the
    /// task last submitted to `stream` (by any thread: call it right after submitting).
    pub fn note_latest(&self, stream: Stream) -> u64 {
        let seq = self.rt.streams().submitted(stream).unwrap_or(0);
        LAST_TASK.set(seq);
        seq
    }

    /// Writes what kernels printed since the last call to C's stdout, as a device's printf
    /// reaches the host at a synchronize.
    pub fn flush_prints(&self) {
        let lines = self.rt.binaries().take_kernel_log();
        for line in lines {
            if let Ok(c) = std::ffi::CString::new(line.replace('\0', " ")) {
                // SAFETY: a NUL-terminated string; puts writes it and a newline to C's stdout,
                // in order with the program's own printf output.
                unsafe { libc::puts(c.as_ptr()) };
            }
        }
    }

    /// Whether `[ptr, ptr + len)` is device memory allocated through C in the current context.
    pub fn is_device(&self, ctx: u64, ptr: u64, len: u64) -> bool {
        self.tables().device_alloc(ctx, ptr, len.max(1)).is_some()
    }
}

/// A context handle's entry key, checked.
pub(crate) fn context_key(s: &Session, p: aclrtContext, what: &str) -> AclResult<(u64, Context)> {
    let t = s.tables();
    let (key, c) = lookup(&t.contexts, Kind::Context, p, what)?;
    Ok((key, c.ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_log_keeps_the_most_recent_launches() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let st = rt.streams().create().unwrap();
        let mut log = LaunchLog::default();
        for seq in 1..=(LaunchLog::CAPACITY as u64 + 10) {
            log.insert(st, seq, seq * 10, Arc::from(&[1u8][..]));
        }
        assert!(log.get(st, 1).is_none(), "the oldest went");
        assert!(log.get(st, 10).is_none());
        assert_eq!(log.get(st, 11).map(|l| l.0), Some(110));
        let last = LaunchLog::CAPACITY as u64 + 10;
        assert_eq!(log.get(st, last).map(|l| l.0), Some(last * 10));
    }
}
