//! Notifies: `aclrtRecordNotify` marks a point in one stream; `aclrtWaitAndResetNotify` makes
//! another stream's later work wait until that point is reached, and consumes the record. A
//! notify is one runtime event: its k-th record is the notify's k-th `aclrtRecordNotify`, and
//! the k-th wait waits for exactly that record (`Events::stream_wait_record`), whether
//! the record was enqueued before the wait or comes after it.
//!
//! A hardware notify is a flag: two records before one wait leave it set once, so a second
//! wait would block. Here records and waits pair up in order, like a counting semaphore; a
//! program that records once per wait, as the samples do, cannot tell the difference.

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::{Kind, NotifyEntry, lookup, new_key, serial, to_ptr};
use crate::state::{Session, session};
use crate::types::*;

fn notify_entry(s: &Session, p: aclrtNotify) -> AclResult<(u64, u64, npusim_engine::Event)> {
    let t = s.tables();
    let (k, n) = lookup(&t.notifies, Kind::Notify, p, "notify")?;
    Ok((k, n.ctx, n.event))
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
        let event = s.rt.events().create()?;
        let key = new_key(Kind::Notify);
        s.tables().notifies.insert(
            key,
            NotifyEntry {
                ctx,
                event,
                waits: 0,
            },
        );
        // SAFETY: checked non-NULL.
        unsafe { notify.write(to_ptr(key)) };
        Ok(())
    })
}

/// `aclError aclrtDestroyNotify(aclrtNotify notify)`: destroys a notify. Waits already
/// enqueued on records that were enqueued still wait for them; waits for records that will
/// now never come stop waiting.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    call("aclrtDestroyNotify", || {
        let s = session()?;
        let (key, ctx, event) = notify_entry(&s, notify)?;
        check_context(&s, ctx)?;
        s.tables().notifies.remove(&key);
        crate::event::release(&s, ctx, event)
    })
}

/// `aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream)`: marks the work
/// submitted to `stream` (NULL: the default stream) so far; the oldest wait not yet paired
/// with a record (or the next wait) waits for it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    call("aclrtRecordNotify", || {
        let s = session()?;
        let (_, ctx, event) = notify_entry(&s, notify)?;
        check_context(&s, ctx)?;
        let st = s.stream_or_default(stream)?;
        s.rt.events().record(event, st)?;
        s.note_latest(st);
        Ok(())
    })
}

/// `aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t
/// timeout)`: `stream`'s later work waits until the notify's next unconsumed record fires
/// (enqueued already or still to come), and consumes it. With a `timeout` (milliseconds of
/// simulated time; 0: the process's wait timeout, `aclrtSetOpWaitTimeout`, or for ever) a wait
/// blocked longer fails with ACL_ERROR_RT_WAIT_TIMEOUT, reported at the stream's next
/// synchronize, and the stream goes on.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    call("aclrtWaitAndResetNotify", || {
        let s = session()?;
        let (key, ctx, event) = notify_entry(&s, notify)?;
        check_context(&s, ctx)?;
        let st = s.stream_or_default(stream)?;
        let record = match s.tables().notifies.get(&key) {
            Some(n) => n.waits + 1,
            None => {
                return Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    "the notify was destroyed during the wait",
                ));
            }
        };
        let limit = (timeout > 0).then(|| npusim_engine::SimTime::from_ms(timeout as u64));
        s.rt.events().stream_wait_record(st, event, record, limit)?;
        if let Some(n) = s.tables().notifies.get_mut(&key) {
            n.waits = record;
        }
        Ok(())
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
        let (key, _, _) = notify_entry(&s, notify)?;
        // SAFETY: checked non-NULL.
        unsafe { notifyId.write(serial(key) as u32) };
        Ok(())
    })
}
