//! The stream sanitizer's annotations for C (npusim extensions): a host program tells the
//! sanitizer of synchronization between its threads that the runtime cannot see — a mutex, a
//! condition variable, a queue, `pthread_join` — as ThreadSanitizer's
//! `AnnotateHappensBefore` / `AnnotateHappensAfter`. The sanitizer itself is turned on by
//! `NPUSIM_SANITIZE` at `aclInit` ([`crate::session`]); the rules are
//! [`npusim_engine::sanitizer`]'s. With the sanitizer off each is a no-op that succeeds.

use crate::error::call;
use crate::state::session;
use crate::types::*;

/// `aclError npusimSanitizerRelease(uint64_t key)` (npusim extension): everything the
/// calling thread is ordered after so far — its own calls included — is published under
/// `key`; a later `npusimSanitizerAcquire(key)` on any thread is ordered after it. Call it
/// just before the hand-off (unlocking, signalling, enqueueing for another thread).
#[unsafe(no_mangle)]
pub extern "C" fn npusimSanitizerRelease(key: u64) -> aclError {
    call("npusimSanitizerRelease", || {
        session()?.rt.sanitizer().release(key);
        Ok(())
    })
}

/// `aclError npusimSanitizerAcquire(uint64_t key)` (npusim extension): the calling thread is
/// ordered after everything published under `key` so far. Call it just after the hand-off
/// (locking, being signalled, dequeuing).
#[unsafe(no_mangle)]
pub extern "C" fn npusimSanitizerAcquire(key: u64) -> aclError {
    call("npusimSanitizerAcquire", || {
        session()?.rt.sanitizer().acquire(key);
        Ok(())
    })
}

/// `aclError npusimSanitizerHostSync(void)` (npusim extension): the calling thread is ordered
/// after everything every host thread did so far. Call it after `pthread_join` or a
/// `pthread_barrier_wait`.
#[unsafe(no_mangle)]
pub extern "C" fn npusimSanitizerHostSync() -> aclError {
    call("npusimSanitizerHostSync", || {
        session()?.rt.sanitizer().host_sync();
        Ok(())
    })
}
