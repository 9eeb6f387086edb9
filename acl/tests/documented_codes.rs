//! Misuse whose outcome CANN's documentation states, called through the C ABI: the code npusim
//! returns must be the documented one. The README's C API section lists these rows with the
//! page each code comes from; `every_row_of_the_readme_table_returns_its_code` walks that
//! table, the other tests are the cases npusim once answered differently.

use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::{Mutex, MutexGuard};

use npusim_acl::callback::*;
use npusim_acl::context::*;
use npusim_acl::device::*;
use npusim_acl::event::*;
use npusim_acl::exception::*;
use npusim_acl::host::*;
use npusim_acl::memory::*;
use npusim_acl::session::*;
use npusim_acl::stream::*;
use npusim_acl::types::*;

/// ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID (the C header's value; the crate names it internally).
const ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID: aclError = 107_006;

/// One session per process: the tests of this file take turns.
static SESSION: Mutex<()> = Mutex::new(());

/// A session with device 0 current, finalized when dropped.
struct Session(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Session {
    fn open() -> Self {
        let turn = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: NULL is "no configuration file".
        assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        Session(turn)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        assert_eq!(aclFinalize(), ACL_SUCCESS);
    }
}

unsafe extern "C" fn on_exception(_: *mut aclrtExceptionInfo) {}
unsafe extern "C" fn nothing(_: *mut c_void) {}

fn thread_id() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

#[test]
fn async_host_to_host_copy_is_refused_as_not_supported() {
    let _s = Session::open();
    let src = vec![7u8; 256];
    let mut dst = vec![0u8; 256];
    let mut stream = null_mut();
    // SAFETY: out-parameters and host buffers are valid for the sizes given.
    unsafe {
        assert_eq!(aclrtCreateStream(&mut stream), ACL_SUCCESS);
        assert_eq!(
            aclrtMemcpyAsync(
                dst.as_mut_ptr().cast(),
                256,
                src.as_ptr().cast(),
                256,
                ACL_MEMCPY_HOST_TO_HOST,
                stream,
            ),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        // Pinned memory on either side makes no difference.
        let mut pinned = null_mut();
        assert_eq!(aclrtMallocHost(&mut pinned, 256), ACL_SUCCESS);
        assert_eq!(
            aclrtMemcpyAsync(
                pinned,
                256,
                src.as_ptr().cast(),
                256,
                ACL_MEMCPY_HOST_TO_HOST,
                stream
            ),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_eq!(dst, vec![0u8; 256], "a refused copy copies nothing");
        // The synchronous copy between host buffers is supported.
        assert_eq!(
            aclrtMemcpy(
                dst.as_mut_ptr().cast(),
                256,
                src.as_ptr().cast(),
                256,
                ACL_MEMCPY_HOST_TO_HOST
            ),
            ACL_SUCCESS
        );
        assert_eq!(dst, src);
        assert_eq!(aclrtFreeHost(pinned), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(stream), ACL_SUCCESS);
    }
}

#[test]
fn unregistering_an_exception_callback_never_registered_succeeds() {
    let _s = Session::open();
    assert_eq!(
        aclrtExceptionInfoCallbackUnregister(Some(on_exception)),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtExceptionInfoCallbackRegister(Some(on_exception)),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtExceptionInfoCallbackUnregister(Some(on_exception)),
        ACL_SUCCESS
    );
    // Twice: the second finds nothing to remove, and succeeds too.
    assert_eq!(
        aclrtExceptionInfoCallbackUnregister(Some(on_exception)),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtExceptionInfoCallbackUnregister(None),
        ACL_ERROR_INVALID_PARAM
    );
}

#[test]
fn process_report_returns_the_runtime_codes_for_no_subscription_and_timeout() {
    let _s = Session::open();
    let me = thread_id();
    assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    assert_eq!(aclrtSubscribeReport(me, null_mut()), ACL_SUCCESS);
    assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_REPORT_TIMEOUT);
    assert_eq!(aclrtUnSubscribeReport(me, null_mut()), ACL_SUCCESS);
    assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);

    assert_eq!(aclrtProcessHostFunc(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    assert_eq!(aclrtSubscribeHostFunc(me, null_mut()), ACL_SUCCESS);
    assert_eq!(aclrtProcessHostFunc(10), ACL_ERROR_RT_REPORT_TIMEOUT);
    assert_eq!(aclrtUnSubscribeHostFunc(me, null_mut()), ACL_SUCCESS);
}

/// The rows of the README's table of documented codes, each with the call that shows it.
#[test]
fn every_row_of_the_readme_table_returns_its_code() {
    let _s = Session::open();
    let me = thread_id();
    let mut host = vec![0u8; 256];
    let hp: *mut c_void = host.as_mut_ptr().cast();
    // SAFETY: out-parameters and host buffers are valid for the sizes given; handles are
    // checked, never dereferenced.
    unsafe {
        let mut stream = null_mut();
        assert_eq!(aclrtCreateStream(&mut stream), ACL_SUCCESS);
        let mut event = null_mut();
        assert_eq!(aclrtCreateEvent(&mut event), ACL_SUCCESS);
        // A stream of another context, seen from device 0's primary context.
        let mut other = null_mut();
        assert_eq!(aclrtCreateContext(&mut other, 0), ACL_SUCCESS);
        let mut foreign = null_mut();
        assert_eq!(aclrtCreateStream(&mut foreign), ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        let rows: Vec<(&str, aclError, aclError)> = vec![
            (
                "aclInit while initialized",
                aclInit(null()),
                ACL_ERROR_REPEAT_INITIALIZE,
            ),
            (
                "aclrtSetDevice(out of range)",
                aclrtSetDevice(1),
                ACL_ERROR_RT_INVALID_DEVICEID,
            ),
            (
                "aclrtMallocHost(size 0)",
                aclrtMallocHost(&mut null_mut(), 0),
                ACL_ERROR_INVALID_PARAM,
            ),
            (
                "aclrtFree(NULL)",
                aclrtFree(null_mut()),
                ACL_ERROR_INVALID_PARAM,
            ),
            (
                "aclrtMemcpyAsync(ACL_MEMCPY_HOST_TO_HOST)",
                aclrtMemcpyAsync(
                    hp,
                    128,
                    hp.byte_add(128),
                    128,
                    ACL_MEMCPY_HOST_TO_HOST,
                    stream,
                ),
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            ),
            (
                "aclrtLaunchCallback(stream no thread subscribed)",
                aclrtLaunchCallback(Some(nothing), null_mut(), ACL_CALLBACK_BLOCK, stream),
                ACL_ERROR_RT_STREAM_NO_CB_REG,
            ),
            (
                "aclrtLaunchCallback(bad blockType)",
                aclrtLaunchCallback(Some(nothing), null_mut(), 7, stream),
                ACL_ERROR_INVALID_PARAM,
            ),
            (
                "aclrtProcessReport(timeout 0)",
                aclrtProcessReport(0),
                ACL_ERROR_INVALID_PARAM,
            ),
            (
                "aclrtProcessReport(thread not subscribed)",
                aclrtProcessReport(10),
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
            ),
            (
                "aclrtSubscribeReport",
                aclrtSubscribeReport(me, stream),
                ACL_SUCCESS,
            ),
            (
                "aclrtSubscribeReport(same stream again)",
                aclrtSubscribeReport(me, stream),
                ACL_ERROR_REPEAT_SUBSCRIBE,
            ),
            (
                "aclrtProcessReport(nothing came due)",
                aclrtProcessReport(10),
                ACL_ERROR_RT_REPORT_TIMEOUT,
            ),
            (
                "aclrtUnSubscribeReport",
                aclrtUnSubscribeReport(me, stream),
                ACL_SUCCESS,
            ),
            (
                "aclrtSynchronizeStreamWithTimeout(timeout 0)",
                aclrtSynchronizeStreamWithTimeout(stream, 0),
                ACL_ERROR_INVALID_PARAM,
            ),
            (
                "aclrtSynchronizeStream(stream of another context)",
                aclrtSynchronizeStream(foreign),
                ACL_ERROR_RT_STREAM_CONTEXT,
            ),
            (
                "aclrtEventElapsedTime(events never recorded)",
                aclrtEventElapsedTime(&mut 0.0, event, event),
                ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
            ),
            (
                "aclrtExceptionInfoCallbackUnregister(never registered)",
                aclrtExceptionInfoCallbackUnregister(Some(on_exception)),
                ACL_SUCCESS,
            ),
        ];
        let wrong: Vec<String> = rows
            .iter()
            .filter(|(_, got, want)| got != want)
            .map(|(what, got, want)| format!("{what}: {got}, documented {want}"))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
        assert_eq!(aclrtGetTaskIdFromExceptionInfo(null()), u32::MAX);
        assert_eq!(aclrtDestroyEvent(event), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(stream), ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        assert_eq!(aclrtDestroyContext(other), ACL_SUCCESS);
    }
}
