//! Misuse whose outcome CANN's documentation states, called through the C ABI: the code npusim
//! returns must be the documented one.

use std::ptr::{null, null_mut};
use std::sync::{Mutex, MutexGuard};

use npusim_acl::callback::*;
use npusim_acl::device::*;
use npusim_acl::exception::*;
use npusim_acl::host::*;
use npusim_acl::memory::*;
use npusim_acl::session::*;
use npusim_acl::stream::*;
use npusim_acl::types::*;

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
