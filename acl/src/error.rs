//! The boundary every C call crosses: it runs inside `catch_unwind` (a panic becomes
//! `ACL_ERROR_RT_INTERNAL_ERROR` and the host process goes on), turns an error into its ACL code,
//! and keeps the error's message for `aclGetRecentErrMsg` on the calling thread.

use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use npusim_engine::NpuError;

use crate::types::*;

/// An error of a C call: its ACL code and what went wrong.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AclError {
    pub code: aclError,
    pub msg: String,
}

pub(crate) type AclResult<T> = Result<T, AclError>;

impl AclError {
    pub fn new(code: aclError, msg: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
        }
    }

    /// ACL_ERROR_INVALID_PARAM: a NULL or out-of-range argument.
    pub fn param(msg: impl Into<String>) -> Self {
        Self::new(ACL_ERROR_INVALID_PARAM, msg)
    }

    /// ACL_ERROR_INVALID_PARAM for a NULL pointer argument named `what`.
    pub fn null(what: &str) -> Self {
        Self::param(format!("{what} is NULL"))
    }
}

impl From<NpuError> for AclError {
    fn from(e: NpuError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// Fails with ACL_ERROR_INVALID_PARAM when `p` is NULL.
pub(crate) fn non_null<T>(p: *const T, what: &str) -> AclResult<()> {
    if p.is_null() {
        Err(AclError::null(what))
    } else {
        Ok(())
    }
}

/// Most messages a thread keeps before the oldest are dropped (a program that never reads them
/// must not grow without bound).
const MAX_MESSAGES: usize = 64;

thread_local! {
    /// Messages of this thread's failed calls since the last `aclGetRecentErrMsg`, oldest first.
    static MESSAGES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The string the last `aclGetRecentErrMsg` returned (valid until the next call).
    static RETURNED: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// The code of this thread's latest failed call, for `aclrtGetLastError`.
    static LAST_ERROR: Cell<aclError> = const { Cell::new(ACL_SUCCESS) };
}

/// Keeps `msg` for `aclGetRecentErrMsg`. On a thread whose locals are torn down (an exit
/// handler) there is nowhere to keep it: the call's code still says what happened.
fn record(name: &str, msg: &str) {
    let _ = MESSAGES.try_with(|m| {
        let mut m = m.borrow_mut();
        if m.len() == MAX_MESSAGES {
            m.remove(0);
        }
        m.push(format!("{name}: {msg}"));
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs the body of the C function `name`: returns ACL_SUCCESS, the error's code, or
/// ACL_ERROR_RT_INTERNAL_ERROR if it panicked. Failures are recorded for `aclGetRecentErrMsg`.
pub(crate) fn call(name: &'static str, f: impl FnOnce() -> AclResult<()>) -> aclError {
    // The stream sanitizer names the ACL function and the call's number as where work came
    // from.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let _site = npusim_engine::sanitizer::SiteGuard::enter(npusim_engine::EnqueueSite::Acl {
        function: name,
        call: n,
    });
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => ACL_SUCCESS,
        Ok(Err(e)) => {
            record(name, &e.msg);
            LAST_ERROR.set(e.code);
            e.code
        }
        Err(payload) => {
            let msg = format!(
                "internal error (a bug in npusim): {}",
                panic_message(&*payload)
            );
            record(name, &msg);
            LAST_ERROR.set(ACL_ERROR_RT_INTERNAL_ERROR);
            ACL_ERROR_RT_INTERNAL_ERROR
        }
    }
}

/// The last error of the calling thread at `level`, cleared when `clear`.
fn last_error(name: &'static str, level: u32, clear: bool) -> aclError {
    call_value(name, ACL_ERROR_RT_INTERNAL_ERROR, || {
        if level != ACL_RT_THREAD_LEVEL {
            record(
                name,
                &format!("level {level}: expected ACL_RT_THREAD_LEVEL (0)"),
            );
            return ACL_ERROR_INVALID_PARAM;
        }
        if clear {
            LAST_ERROR.replace(ACL_SUCCESS)
        } else {
            LAST_ERROR.get()
        }
    })
}

/// `aclError aclrtGetLastError(aclrtLastErrLevel level)`: the code of the calling thread's
/// latest failed call (ACL_SUCCESS if none since the last `aclrtGetLastError`), and clears it.
/// `level` is ACL_RT_THREAD_LEVEL; anything else returns ACL_ERROR_INVALID_PARAM.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetLastError(level: u32) -> aclError {
    last_error("aclrtGetLastError", level, true)
}

/// `aclError aclrtPeekAtLastError(aclrtLastErrLevel level)`: as `aclrtGetLastError`, without
/// clearing it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtPeekAtLastError(level: u32) -> aclError {
    last_error("aclrtPeekAtLastError", level, false)
}

/// As [`call`], for a C function that returns a value instead of an `aclError`: `fallback` when
/// it panics.
pub(crate) fn call_value<T>(name: &'static str, fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = format!(
                "internal error (a bug in npusim): {}",
                panic_message(&*payload)
            );
            record(name, &msg);
            fallback
        }
    }
}

/// `const char *aclGetRecentErrMsg(void)`: the messages of the calling thread's failed calls
/// since the previous `aclGetRecentErrMsg`, newest first, one per line; and clears them. NULL
/// when there are none. The string stays valid until this thread's next `aclGetRecentErrMsg`.
#[unsafe(no_mangle)]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    call_value("aclGetRecentErrMsg", std::ptr::null(), || {
        let messages = MESSAGES
            .try_with(|m| std::mem::take(&mut *m.borrow_mut()))
            .unwrap_or_default();
        // (No string outlives a thread whose locals are torn down: NULL there.)
        RETURNED
            .try_with(|r| {
                let mut r = r.borrow_mut();
                if messages.is_empty() {
                    *r = None;
                    return std::ptr::null();
                }
                let text: Vec<String> = messages.into_iter().rev().collect();
                let text = text.join("\n").replace('\0', " ");
                let s = r.insert(CString::new(text).unwrap_or_default());
                s.as_ptr()
            })
            .unwrap_or(std::ptr::null())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_and_a_message() {
        let code = call("aclTest", || panic!("boom"));
        assert_eq!(code, ACL_ERROR_RT_INTERNAL_ERROR);
        let msg = aclGetRecentErrMsg();
        assert!(!msg.is_null());
        let text = unsafe { std::ffi::CStr::from_ptr(msg) }.to_str().unwrap();
        assert!(text.contains("aclTest") && text.contains("boom"), "{text}");
        assert!(
            aclGetRecentErrMsg().is_null(),
            "reading the messages clears them"
        );
    }

    #[test]
    fn the_last_error_is_peeked_then_taken() {
        call("failing", || Err(AclError::param("x")));
        assert_eq!(aclrtPeekAtLastError(0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtGetLastError(0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtGetLastError(0), ACL_SUCCESS, "taken");
        assert_eq!(aclrtGetLastError(7), ACL_ERROR_INVALID_PARAM);
    }

    #[test]
    fn messages_come_newest_first() {
        call("first", || Err(AclError::param("one")));
        call("second", || Err(AclError::param("two")));
        let text = unsafe { std::ffi::CStr::from_ptr(aclGetRecentErrMsg()) };
        assert_eq!(text.to_str().unwrap(), "second: two\nfirst: one");
    }
}
