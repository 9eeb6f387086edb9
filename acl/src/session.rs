//! The process-wide session between `aclInit` and `aclFinalize`: one npusim
//! [`Runtime`](npusim_engine::Runtime), the handle tables, the callback-report hub (its state
//! is the `state` module's). Each C call takes a reference to the session and lets it go when
//! it returns, so `aclFinalize` never pulls the runtime from under a call.
//!
//! Configuration comes from the environment, read at `aclInit`:
//! - `NPUSIM_DEVICES`: number of simulated devices (default 1);
//! - `NPUSIM_PRESET`: `910b` (the default, an Ascend 910B-like device) or `small`;
//! - `NPUSIM_TRACE`: a path; the simulated timeline is recorded and written there as Chrome
//!   trace JSON (open in Perfetto) at `aclFinalize`;
//! - `NPUSIM_KERNEL_WALL_LIMIT`: seconds of wall-clock time the simulator may spend executing
//!   one binary kernel launch before it stops it as a runaway (default 120; 0 turns it off).
//!   Kernel timeouts proper are simulated time (`aclrtSetOpExecuteTimeOut`).
//! - `NPUSIM_SANITIZE`: `report` or `error` turns the stream sanitizer on
//!   ([`npusim_engine::sanitizer`]): each report is printed to stderr when it is found, and
//!   `aclFinalize` prints how many there were; in `error` mode the later task of each pair
//!   fails with `ACL_ERROR_RT_DEVICE_MEM_ERROR` (507053). `NPUSIM_SANITIZE_UNINIT=1` also
//!   reports uninitialised reads.
//! - `NPUSIM_PROFILE=summary`: `aclFinalize` prints a table of the binary kernel launches
//!   kept (the latest 1024) to stdout: simulated time, per-pipe busy time, HBM bytes, and the
//!   fractions of the HBM and cube rooflines ([`npusim_engine::binary::profile_summary`]).

use std::ffi::{CStr, c_char};
use std::sync::Arc;

use crate::error::{AclError, call};
use crate::state::{SESSION, Session, config_from_env};
use crate::types::*;

/// `aclError aclInit(const char *configPath)`: starts the session. `configPath` may be NULL or
/// name a readable file (its JSON is not interpreted: npusim is configured by `NPUSIM_*`
/// environment variables, see the crate docs). A second call while initialized returns
/// ACL_ERROR_REPEAT_INITIALIZE and changes nothing.
///
/// # Safety
/// `configPath` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
    call("aclInit", || {
        if !configPath.is_null() {
            // SAFETY: the caller passes a NUL-terminated string.
            let path = unsafe { CStr::from_ptr(configPath) }
                .to_string_lossy()
                .into_owned();
            if !path.is_empty() && !std::path::Path::new(&path).is_file() {
                return Err(AclError::new(
                    ACL_ERROR_INVALID_FILE,
                    format!("configuration file {path:?} cannot be read"),
                ));
            }
        }
        let mut g = SESSION.write().unwrap_or_else(|p| p.into_inner());
        if g.is_some() {
            return Err(AclError::new(
                ACL_ERROR_REPEAT_INITIALIZE,
                "aclInit was already called (the session goes on)",
            ));
        }
        let s = Arc::new(Session::new(config_from_env()?)?);
        crate::exception::install(&s);
        *g = Some(s);
        Ok(())
    })
}

/// `aclError aclFinalize(void)`: ends the session: every context, stream, event, binary and
/// device allocation goes. Memory from `aclrtMallocHost` stays valid until `aclrtFreeHost`.
/// With `NPUSIM_TRACE` set, the timeline is written first.
#[unsafe(no_mangle)]
pub extern "C" fn aclFinalize() -> aclError {
    call("aclFinalize", || {
        let s = SESSION
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                AclError::new(ACL_ERROR_REPEAT_FINALIZE, "aclInit has not been called")
            })?;
        s.rt.contexts().set_exception_callback(None);
        s.reports.close();
        s.host_funcs.close();
        // Writes the prints not yet written.
        s.flush_prints();
        if s.rt.sanitizer().config().on() {
            let n = s.rt.sanitizer().reports().len();
            eprintln!("npusim sanitizer: {n} report(s)");
        }
        // `NPUSIM_PROFILE=summary`: a table of the binary kernel launches in simulated time.
        match std::env::var("NPUSIM_PROFILE").as_deref() {
            Ok("summary") => {
                let launches = s.rt.binaries().launch_stats();
                // After what the program printed through C's stdio, not before it.
                // SAFETY: fflush(NULL) flushes every open output stream.
                unsafe { libc::fflush(std::ptr::null_mut()) };
                println!(
                    "npusim profile: {} binary kernel launch(es), simulated time",
                    launches.len()
                );
                print!("{}", npusim_engine::binary::profile_summary(&launches));
            }
            Ok("") | Err(_) => {}
            Ok(other) => eprintln!("npusim: NPUSIM_PROFILE={other} is not known (summary)"),
        }
        // With `NPUSIM_RECORD` set, the API trace (see `npusim_engine::record`).
        let recorded =
            s.rt.finish_recording()
                .map(|_| ())
                .map_err(|e| AclError::new(ACL_ERROR_WRITE_FILE, format!("NPUSIM_RECORD: {e}")));
        let written = match &s.trace {
            Some(path) => {
                s.rt.export_timeline(path)
                    .map_err(|e| AclError::new(ACL_ERROR_WRITE_FILE, format!("NPUSIM_TRACE: {e}")))
            }
            None => Ok(()),
        };
        drop(s);
        recorded.and(written)
    })
}
