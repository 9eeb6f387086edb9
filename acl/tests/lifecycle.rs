//! What the C API does before `aclInit` and after `aclFinalize`, as CANN documents it (the
//! table in the README's C API section): the run mode, the version, the last error message and
//! the float16 conversions need no session; `aclInit` while initialized returns
//! ACL_ERROR_REPEAT_INITIALIZE and `aclFinalize` while not initialized
//! ACL_ERROR_REPEAT_FINALIZE; every other call returns ACL_ERROR_UNINITIALIZE and changes
//! nothing. A test binary of its own: the session is the process's.

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use npusim_acl::args::*;
use npusim_acl::callback::*;
use npusim_acl::context::*;
use npusim_acl::device::*;
use npusim_acl::error::*;
use npusim_acl::event::*;
use npusim_acl::float16::*;
use npusim_acl::host::*;
use npusim_acl::kernel::*;
use npusim_acl::memory::*;
use npusim_acl::notify::*;
use npusim_acl::pool::*;
use npusim_acl::query::*;
use npusim_acl::sanitizer::*;
use npusim_acl::session::*;
use npusim_acl::stream::*;
use npusim_acl::types::*;

/// Whether a call needs a session.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// Works the same before `aclInit`, inside a session and after `aclFinalize`.
    Always,
    /// ACL_ERROR_UNINITIALIZE outside a session.
    Session,
}

unsafe extern "C" fn host_fn(_: *mut c_void) {}

/// A call of the table: its name, its rule, and the call.
type Row = (&'static str, Rule, Box<dyn Fn() -> aclError>);

/// Every group of the README's table, a few calls each, with valid out-parameters (so only the
/// session decides) and a made-up handle where one is taken.
fn table() -> Vec<Row> {
    let h = 0x5eed_0000usize as *mut c_void;
    // SAFETY (all rows): out-parameters point at locals; handles are checked, never
    // dereferenced.
    unsafe {
        vec![
            (
                "aclrtGetRunMode",
                Rule::Always,
                Box::new(|| aclrtGetRunMode(&mut 0)),
            ),
            (
                "aclrtGetVersion",
                Rule::Always,
                Box::new(|| aclrtGetVersion(&mut 0, &mut 0, &mut 0)),
            ),
            (
                "aclGetRecentErrMsg",
                Rule::Always,
                Box::new(|| {
                    let _ = aclGetRecentErrMsg();
                    ACL_SUCCESS
                }),
            ),
            (
                "aclFloat16ToFloat / aclFloatToFloat16",
                Rule::Always,
                Box::new(|| {
                    assert_eq!(aclFloat16ToFloat(aclFloatToFloat16(1.5)), 1.5);
                    ACL_SUCCESS
                }),
            ),
            // Item 0: the AI core count.
            (
                "npusimPlatformValue",
                Rule::Always,
                Box::new(|| npusimPlatformValue(0, &mut 0)),
            ),
            (
                "aclrtSetDevice",
                Rule::Session,
                Box::new(|| aclrtSetDevice(0)),
            ),
            (
                "aclrtResetDevice",
                Rule::Session,
                Box::new(|| aclrtResetDevice(0)),
            ),
            (
                "aclrtGetDevice",
                Rule::Session,
                Box::new(|| aclrtGetDevice(&mut 0)),
            ),
            (
                "aclrtGetDeviceCount",
                Rule::Always,
                Box::new(|| aclrtGetDeviceCount(&mut 0)),
            ),
            (
                "aclrtSynchronizeDevice",
                Rule::Session,
                Box::new(|| aclrtSynchronizeDevice()),
            ),
            (
                "aclrtGetSocName",
                Rule::Session,
                Box::new(|| {
                    if aclrtGetSocName().is_null() {
                        ACL_ERROR_UNINITIALIZE
                    } else {
                        ACL_SUCCESS
                    }
                }),
            ),
            (
                "aclrtGetMemInfo",
                Rule::Session,
                Box::new(|| aclrtGetMemInfo(0, &mut 0, &mut 0)),
            ),
            (
                "aclrtGetDeviceInfo",
                Rule::Session,
                Box::new(|| aclrtGetDeviceInfo(0, 0, &mut 0)),
            ),
            (
                "aclrtSetOpExecuteTimeOut",
                Rule::Session,
                Box::new(|| aclrtSetOpExecuteTimeOut(1)),
            ),
            (
                "aclrtCreateContext",
                Rule::Session,
                Box::new(|| aclrtCreateContext(&mut null_mut(), 0)),
            ),
            (
                "aclrtDestroyContext",
                Rule::Session,
                Box::new(move || aclrtDestroyContext(h)),
            ),
            (
                "aclrtGetCurrentContext",
                Rule::Session,
                Box::new(|| aclrtGetCurrentContext(&mut null_mut())),
            ),
            (
                "aclrtCreateStream",
                Rule::Session,
                Box::new(|| aclrtCreateStream(&mut null_mut())),
            ),
            (
                "aclrtDestroyStream",
                Rule::Session,
                Box::new(move || aclrtDestroyStream(h)),
            ),
            (
                "aclrtSynchronizeStream",
                Rule::Session,
                Box::new(move || aclrtSynchronizeStream(h)),
            ),
            (
                "aclrtCreateEvent",
                Rule::Session,
                Box::new(|| aclrtCreateEvent(&mut null_mut())),
            ),
            (
                "aclrtRecordEvent",
                Rule::Session,
                Box::new(move || aclrtRecordEvent(h, h)),
            ),
            (
                "aclrtSynchronizeEvent",
                Rule::Session,
                Box::new(move || aclrtSynchronizeEvent(h)),
            ),
            (
                "aclrtCreateNotify",
                Rule::Session,
                Box::new(|| aclrtCreateNotify(&mut null_mut(), 0)),
            ),
            (
                "aclrtMalloc",
                Rule::Session,
                Box::new(|| aclrtMalloc(&mut null_mut(), 64, 0)),
            ),
            ("aclrtFree", Rule::Session, Box::new(move || aclrtFree(h))),
            (
                "aclrtMemset",
                Rule::Session,
                Box::new(move || aclrtMemset(h, 4, 0, 4)),
            ),
            (
                "aclrtMemcpy",
                Rule::Session,
                Box::new(move || {
                    let mut x = [0u8; 4];
                    aclrtMemcpy(x.as_mut_ptr().cast(), 4, h, 4, 2)
                }),
            ),
            (
                "aclrtMallocHost",
                Rule::Session,
                Box::new(|| aclrtMallocHost(&mut null_mut(), 64)),
            ),
            (
                "aclrtFreeHost",
                Rule::Session,
                Box::new(move || aclrtFreeHost(h)),
            ),
            (
                "aclrtMemPoolDestroy",
                Rule::Session,
                Box::new(move || aclrtMemPoolDestroy(h)),
            ),
            (
                "aclrtLaunchHostFunc",
                Rule::Session,
                Box::new(move || aclrtLaunchHostFunc(h, Some(host_fn), null_mut())),
            ),
            (
                "aclrtSubscribeReport",
                Rule::Session,
                Box::new(move || aclrtSubscribeReport(1, h)),
            ),
            (
                "aclrtProcessReport",
                Rule::Session,
                Box::new(|| aclrtProcessReport(1)),
            ),
            (
                "aclrtBinaryUnLoad",
                Rule::Session,
                Box::new(move || aclrtBinaryUnLoad(h)),
            ),
            (
                "aclrtKernelArgsInit",
                Rule::Session,
                Box::new(move || aclrtKernelArgsInit(h, &mut null_mut())),
            ),
            (
                "npusimSanitizerHostSync",
                Rule::Session,
                Box::new(|| npusimSanitizerHostSync()),
            ),
        ]
    }
}

fn walk(phase: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, rule, f) in table() {
        let got = f();
        let want = match rule {
            Rule::Always => ACL_SUCCESS,
            Rule::Session => ACL_ERROR_UNINITIALIZE,
        };
        if got != want {
            wrong.push(format!("{name} {phase}: {got}, CANN documents {want}"));
        }
    }
    wrong
}

#[test]
fn calls_before_acl_init_and_after_acl_finalize_follow_cann_s_rules() {
    // SAFETY: no pointers.
    unsafe {
        let mut wrong = walk("before aclInit");
        assert_eq!(
            aclFinalize(),
            ACL_ERROR_REPEAT_FINALIZE,
            "aclFinalize before aclInit"
        );
        assert_eq!(aclInit(null()), ACL_SUCCESS);
        assert_eq!(
            aclInit(null()),
            ACL_ERROR_REPEAT_INITIALIZE,
            "aclInit twice"
        );
        // Inside the session the calls that need none answer the same.
        let mut mode = 7;
        assert_eq!(aclrtGetRunMode(&mut mode), ACL_SUCCESS);
        assert_eq!(mode, ACL_HOST);
        assert_eq!(aclFinalize(), ACL_SUCCESS);
        wrong.extend(walk("after aclFinalize"));
        assert_eq!(
            aclFinalize(),
            ACL_ERROR_REPEAT_FINALIZE,
            "aclFinalize twice"
        );
        // A new session after a finalize works.
        assert_eq!(aclInit(null()), ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        assert_eq!(aclFinalize(), ACL_SUCCESS);
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
