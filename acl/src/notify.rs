//! Notifies: `aclrtRecordNotify` marks a point in one stream; `aclrtWaitAndResetNotify` makes
//! another stream's later work wait until that point is reached, and consumes the record. A
//! notify is built on the runtime's events: each record is a fresh event recorded on its
//! stream, queued on the notify; each wait takes the oldest queued record and waits on it.
//!
//! npusim needs a record enqueued before the wait that consumes it: a wait with no record to
//! wait for would have to hold its stream for a record the host has not submitted yet, which
//! the runtime's streams cannot express, so it is ACL_ERROR_RT_FEATURE_NOT_SUPPORT (not a hang).

use npusim_engine::Event;

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::{Kind, NotifyEntry, lookup, new_key, serial, to_ptr};
use crate::session::{Session, session};
use crate::types::*;

fn notify_key(s: &Session, p: aclrtNotify) -> AclResult<(u64, u64)> {
    let t = s.tables();
    let (k, n) = lookup(&t.notifies, Kind::Notify, p, "notify")?;
    Ok((k, n.ctx))
}

/// Fails with ACL_ERROR_RT_STREAM_CONTEXT unless the notify belongs to the current context.
fn check_context(s: &Session, ctx: u64) -> AclResult<()> {
    let (current, _) = s.current_ctx()?;
    if current != ctx {
        return Err(AclError::new(
            ACL_ERROR_RT_STREAM_CONTEXT,
            "the notify belongs to another context than the current one",
        ));
    }
    Ok(())
}

/// `aclError aclrtCreateNotify(aclrtNotify *notify, uint64_t flag)`: a notify in the current
/// context. The flags (ACL_NOTIFY_DEFAULT, ACL_NOTIFY_DEVICE_USE_ONLY) change nothing.
///
/// # Safety
/// `notify` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
    let _ = flag;
    call("aclrtCreateNotify", || {
        non_null(notify, "notify")?;
        let s = session()?;
        let (ctx, _) = s.current_ctx()?;
        let key = new_key(Kind::Notify);
        s.tables().notifies.insert(
            key,
            NotifyEntry {
                ctx,
                pending: Default::default(),
            },
        );
        // SAFETY: checked non-NULL.
        unsafe { notify.write(to_ptr(key)) };
        Ok(())
    })
}

/// `aclError aclrtDestroyNotify(aclrtNotify notify)`: destroys a notify. Waits already
/// enqueued on it still wait for their records; records never waited for are dropped.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    call("aclrtDestroyNotify", || {
        let s = session()?;
        let (key, ctx) = notify_key(&s, notify)?;
        check_context(&s, ctx)?;
        let pending = s
            .tables()
            .notifies
            .remove(&key)
            .map(|n| n.pending)
            .unwrap_or_default();
        for ev in pending {
            crate::event::release(&s, ctx, ev)?;
        }
        Ok(())
    })
}

/// `aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream)`: marks the work
/// submitted to `stream` (NULL: the default stream) so far; the next wait consumes it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    call("aclrtRecordNotify", || {
        let s = session()?;
        let (key, ctx) = notify_key(&s, notify)?;
        check_context(&s, ctx)?;
        let st = s.stream_or_default(stream)?;
        let ev = s.rt.create_event()?;
        if let Err(e) = s.rt.record_event(ev, st) {
            let _ = s.rt.destroy_event(ev);
            return Err(e.into());
        }
        s.note_task(st);
        match s.tables().notifies.get_mut(&key) {
            Some(n) => n.pending.push_back(ev),
            None => {
                return Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    "the notify was destroyed during the record",
                ));
            }
        }
        Ok(())
    })
}

/// `aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t
/// timeout)`: `stream`'s later work waits until the oldest record not yet waited for is
/// reached, and that record is consumed. With no such record:
/// ACL_ERROR_RT_FEATURE_NOT_SUPPORT (see the module docs). `timeout` (milliseconds) is
/// accepted and not applied.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    let _ = timeout;
    call("aclrtWaitAndResetNotify", || {
        let s = session()?;
        let (key, ctx) = notify_key(&s, notify)?;
        check_context(&s, ctx)?;
        let st = s.stream_or_default(stream)?;
        let ev: Event = s
            .tables()
            .notifies
            .get_mut(&key)
            .and_then(|n| n.pending.pop_front())
            .ok_or_else(|| {
                AclError::new(
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    "the notify has no record to wait for: npusim needs aclrtRecordNotify \
                     enqueued before the aclrtWaitAndResetNotify that consumes it",
                )
            })?;
        let waited = s.rt.stream_wait_event(st, ev);
        if waited.is_err()
            && let Some(n) = s.tables().notifies.get_mut(&key)
        {
            n.pending.push_front(ev);
            return Ok(waited?);
        }
        crate::event::release(&s, ctx, ev)
    })
}

/// `aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t *notifyId)`: a small number naming
/// the notify (unique in the process).
///
/// # Safety
/// `notifyId` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetNotifyId(notify: aclrtNotify, notifyId: *mut u32) -> aclError {
    call("aclrtGetNotifyId", || {
        non_null(notifyId, "notifyId")?;
        let s = session()?;
        let (key, _) = notify_key(&s, notify)?;
        // SAFETY: checked non-NULL.
        unsafe { notifyId.write(serial(key) as u32) };
        Ok(())
    })
}
