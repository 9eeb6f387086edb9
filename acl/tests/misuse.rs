//! A misuse sweep of the C API: every exported function called with NULL, garbage, destroyed
//! and wrong-kind handles, out-of-range values and overflowing sizes. Each call must return an
//! error code the header documents (never success, never ACL_ERROR_RT_INTERNAL_ERROR, which
//! means a caught panic), and the session must work normally afterwards.
//!
//! Handles are checked, never dereferenced, so garbage handle values are safe to pass; pointers
//! the C API writes through (out-parameters) are only ever NULL or valid here, as the C contract
//! requires.

use std::collections::BTreeSet;
use std::ffi::{CString, c_void};
use std::ptr::{null, null_mut};
use std::sync::Mutex;

use npusim_acl::callback::*;
use npusim_acl::context::*;
use npusim_acl::device::*;
use npusim_acl::error::*;
use npusim_acl::event::*;
use npusim_acl::exception::*;
use npusim_acl::host::*;
use npusim_acl::kernel::*;
use npusim_acl::memory::*;
use npusim_acl::pool::*;
use npusim_acl::session::*;
use npusim_acl::stream::*;
use npusim_acl::types::*;

/// One session per process: the tests of this file take turns.
static SESSION: Mutex<()> = Mutex::new(());

/// Every error code the C header and npusim's error codes document (`pub const NAME: i32 = N`
/// in the two files that define them).
fn documented_codes() -> BTreeSet<i32> {
    let mut codes = BTreeSet::new();
    for source in [
        include_str!("../src/types.rs"),
        include_str!("../../components/src/error.rs"),
    ] {
        for line in source.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("pub const ")
                && (rest.contains(": aclError =") || rest.contains(": i32 ="))
                && let Some(value) = rest.split('=').nth(1)
                && let Ok(v) = value
                    .trim()
                    .trim_end_matches(';')
                    .replace('_', "")
                    .parse::<i32>()
            {
                codes.insert(v);
            }
        }
    }
    codes.remove(&ACL_SUCCESS);
    codes.remove(&ACL_ERROR_RT_INTERNAL_ERROR);
    codes
}

struct Sweep {
    documented: BTreeSet<i32>,
    calls: usize,
}

impl Sweep {
    /// `code` must be a documented error (not success, not an internal error).
    fn bad(&mut self, what: &str, code: aclError) {
        self.calls += 1;
        assert!(
            self.documented.contains(&code),
            "{what}: returned {code}, not a documented error code"
        );
    }

    /// `code` must be exactly `want`.
    fn exact(&mut self, what: &str, code: aclError, want: aclError) {
        self.calls += 1;
        assert_eq!(code, want, "{what}");
    }
}

fn garbage() -> *mut c_void {
    std::ptr::without_provenance_mut(0xdead_beef_0000_1234)
}

fn kernel_object() -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kernels/vector_add.o"),
    )
    .unwrap()
}

unsafe extern "C" fn nothing(_: *mut c_void) {}

/// Live objects of every kind, and destroyed ones.
struct Objects {
    ctx: aclrtContext,
    stream: aclrtStream,
    event: aclrtEvent,
    pool: aclrtMemPool,
    bin: aclrtBinHandle,
    func: aclrtFuncHandle,
    dev: *mut c_void,
    dead_ctx: aclrtContext,
    dead_stream: aclrtStream,
    dead_event: aclrtEvent,
    dead_pool: aclrtMemPool,
    dead_bin: aclrtBinHandle,
}

unsafe fn objects() -> Objects {
    unsafe {
        let ok = |c: aclError| assert_eq!(c, ACL_SUCCESS);
        let mut ctx = null_mut();
        ok(aclrtCreateContext(&mut ctx, 0));
        let mut stream = null_mut();
        ok(aclrtCreateStream(&mut stream));
        let mut event = null_mut();
        ok(aclrtCreateEvent(&mut event));
        let props = aclrtMemPoolProps {
            allocType: 0,
            handleType: 0,
            location: aclrtMemLocation {
                id: 0,
                type_: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            maxSize: 1 << 20,
            reserved: [0; 32],
        };
        let mut pool = null_mut();
        ok(aclrtMemPoolCreate(&mut pool, &props));
        let object = kernel_object();
        let mut bin = null_mut();
        ok(aclrtBinaryLoadFromData(
            object.as_ptr().cast(),
            object.len(),
            null(),
            &mut bin,
        ));
        let name = CString::new("vadd_f32").unwrap();
        let mut func = null_mut();
        ok(aclrtBinaryGetFunction(bin, name.as_ptr(), &mut func));
        let mut dev = null_mut();
        ok(aclrtMalloc(&mut dev, 4096, 0));

        let (mut dead_stream, mut dead_event, mut dead_pool, mut dead_bin) =
            (null_mut(), null_mut(), null_mut(), null_mut());
        ok(aclrtCreateStream(&mut dead_stream));
        ok(aclrtDestroyStream(dead_stream));
        ok(aclrtCreateEvent(&mut dead_event));
        ok(aclrtDestroyEvent(dead_event));
        ok(aclrtMemPoolCreate(&mut dead_pool, &props));
        ok(aclrtMemPoolDestroy(dead_pool));
        ok(aclrtBinaryLoadFromData(
            object.as_ptr().cast(),
            object.len(),
            null(),
            &mut dead_bin,
        ));
        ok(aclrtBinaryUnLoad(dead_bin));
        let mut dead_ctx = null_mut();
        ok(aclrtCreateContext(&mut dead_ctx, 0));
        ok(aclrtDestroyContext(dead_ctx));
        ok(aclrtSetCurrentContext(ctx));
        Objects {
            ctx,
            stream,
            event,
            pool,
            bin,
            func,
            dev,
            dead_ctx,
            dead_stream,
            dead_event,
            dead_pool,
            dead_bin,
        }
    }
}

#[test]
fn every_function_refuses_null_garbage_destroyed_and_wrong_kind_handles() {
    let _turn = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = Sweep {
        documented: documented_codes(),
        calls: 0,
    };
    // SAFETY: every pointer passed is NULL, a handle value (never dereferenced) or valid.
    unsafe {
        // Before aclInit.
        s.bad("aclrtSetDevice before aclInit", aclrtSetDevice(0));
        s.bad(
            "aclrtCreateStream before aclInit",
            aclrtCreateStream(&mut null_mut()),
        );
        assert_eq!(aclInit(null()), ACL_SUCCESS);
        s.bad("aclInit twice", aclInit(null()));
        let bad_path = CString::new("/nonexistent/acl.json").unwrap();
        s.bad("aclInit twice with a bad path", aclInit(bad_path.as_ptr()));
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        let o = objects();
        let g = garbage();

        // Handles of every kind but the one wanted, plus NULL-less garbage and destroyed ones.
        let not_stream = [g, o.dead_stream, o.event, o.ctx, o.pool, o.bin, o.func];
        let not_event = [g, o.dead_event, o.stream, o.ctx, o.pool, o.bin, o.func];
        let not_ctx = [g, o.dead_ctx, o.stream, o.event, o.pool, o.bin, o.func];
        let not_pool = [g, o.dead_pool, o.stream, o.event, o.ctx, o.bin, o.func];
        let not_bin = [g, o.dead_bin, o.stream, o.event, o.ctx, o.pool, o.func];
        let not_func = [g, o.stream, o.event, o.ctx, o.pool, o.bin];

        // Devices.
        for id in [-1, 1, 9999, i32::MIN, i32::MAX] {
            s.bad("aclrtSetDevice(bad id)", aclrtSetDevice(id));
            s.bad("aclrtResetDevice(bad id)", aclrtResetDevice(id));
            s.bad(
                "aclrtCreateContext(bad id)",
                aclrtCreateContext(&mut null_mut(), id),
            );
        }
        s.bad("aclrtGetDevice(NULL)", aclrtGetDevice(null_mut()));
        s.bad("aclrtGetDeviceCount(NULL)", aclrtGetDeviceCount(null_mut()));

        // Contexts.
        s.bad(
            "aclrtCreateContext(NULL)",
            aclrtCreateContext(null_mut(), 0),
        );
        s.bad(
            "aclrtGetCurrentContext(NULL)",
            aclrtGetCurrentContext(null_mut()),
        );
        s.bad("aclrtDestroyContext(NULL)", aclrtDestroyContext(null_mut()));
        s.bad(
            "aclrtSetCurrentContext(NULL)",
            aclrtSetCurrentContext(null_mut()),
        );
        for h in not_ctx {
            s.bad("aclrtDestroyContext(not a context)", aclrtDestroyContext(h));
            s.bad(
                "aclrtSetCurrentContext(not a context)",
                aclrtSetCurrentContext(h),
            );
        }

        // Streams.
        s.bad("aclrtCreateStream(NULL)", aclrtCreateStream(null_mut()));
        s.bad(
            "aclrtCreateStreamWithConfig(NULL)",
            aclrtCreateStreamWithConfig(null_mut(), 0, 0),
        );
        s.bad("aclrtDestroyStream(NULL)", aclrtDestroyStream(null_mut()));
        s.bad(
            "aclrtStreamQuery(status NULL)",
            aclrtStreamQuery(o.stream, null_mut()),
        );
        s.bad(
            "aclrtSetStreamFailureMode(bad mode)",
            aclrtSetStreamFailureMode(o.stream, 77),
        );
        for h in not_stream {
            let mut status = 0u32;
            s.bad("aclrtDestroyStream", aclrtDestroyStream(h));
            s.bad("aclrtSynchronizeStream", aclrtSynchronizeStream(h));
            s.bad(
                "aclrtSynchronizeStreamWithTimeout",
                aclrtSynchronizeStreamWithTimeout(h, 10),
            );
            s.bad("aclrtStreamQuery", aclrtStreamQuery(h, &mut status));
            s.bad(
                "aclrtSetStreamFailureMode",
                aclrtSetStreamFailureMode(h, ACL_STOP_ON_FAILURE),
            );
            s.bad("aclrtRecordEvent(bad stream)", aclrtRecordEvent(o.event, h));
            s.bad("aclrtResetEvent(bad stream)", aclrtResetEvent(o.event, h));
            s.bad(
                "aclrtStreamWaitEvent(bad stream)",
                aclrtStreamWaitEvent(h, o.event),
            );
            s.bad(
                "aclrtMemcpyAsync(bad stream)",
                aclrtMemcpyAsync(o.dev, 64, o.dev, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, h),
            );
            s.bad(
                "aclrtMemsetAsync(bad stream)",
                aclrtMemsetAsync(o.dev, 64, 0, 64, h),
            );
            s.bad(
                "aclrtLaunchCallback(bad stream)",
                aclrtLaunchCallback(Some(nothing), null_mut(), ACL_CALLBACK_BLOCK, h),
            );
            s.bad(
                "aclrtLaunchKernel(bad stream)",
                aclrtLaunchKernel(o.func, 1, null(), 0, h),
            );
            s.bad(
                "aclrtMemPoolMallocAsync(bad stream)",
                aclrtMemPoolMallocAsync(&mut null_mut(), 64, o.pool, h),
            );
            s.bad(
                "aclrtMemPoolFreeAsync(bad stream)",
                aclrtMemPoolFreeAsync(o.dev, h),
            );
            s.bad(
                "aclrtSubscribeReport(bad stream)",
                aclrtSubscribeReport(1, h),
            );
            s.bad(
                "aclrtUnSubscribeReport(bad stream)",
                aclrtUnSubscribeReport(1, h),
            );
        }

        // Events.
        s.bad("aclrtCreateEvent(NULL)", aclrtCreateEvent(null_mut()));
        s.bad(
            "aclrtCreateEventWithFlag(NULL)",
            aclrtCreateEventWithFlag(null_mut(), 0),
        );
        s.bad(
            "aclrtQueryEventStatus(status NULL)",
            aclrtQueryEventStatus(o.event, null_mut()),
        );
        s.bad(
            "aclrtEventElapsedTime(ms NULL)",
            aclrtEventElapsedTime(null_mut(), o.event, o.event),
        );
        s.bad(
            "aclrtEventElapsedTime(never recorded)",
            aclrtEventElapsedTime(&mut 0.0, o.event, o.event),
        );
        for h in not_event.into_iter().chain([null_mut()]) {
            let mut status = 0u32;
            let mut ms = 0.0f32;
            s.bad("aclrtDestroyEvent", aclrtDestroyEvent(h));
            s.bad("aclrtRecordEvent", aclrtRecordEvent(h, o.stream));
            s.bad("aclrtResetEvent", aclrtResetEvent(h, o.stream));
            s.bad("aclrtStreamWaitEvent", aclrtStreamWaitEvent(o.stream, h));
            s.bad("aclrtSynchronizeEvent", aclrtSynchronizeEvent(h));
            s.bad(
                "aclrtQueryEventStatus",
                aclrtQueryEventStatus(h, &mut status),
            );
            s.bad(
                "aclrtEventElapsedTime(start)",
                aclrtEventElapsedTime(&mut ms, h, o.event),
            );
            s.bad(
                "aclrtEventElapsedTime(end)",
                aclrtEventElapsedTime(&mut ms, o.event, h),
            );
        }

        // Memory.
        s.bad("aclrtMalloc(NULL)", aclrtMalloc(null_mut(), 64, 0));
        s.bad("aclrtMalloc(0 bytes)", aclrtMalloc(&mut null_mut(), 0, 0));
        s.bad(
            "aclrtMalloc(bad policy)",
            aclrtMalloc(&mut null_mut(), 64, 0x77),
        );
        s.bad(
            "aclrtMalloc(SIZE_MAX)",
            aclrtMalloc(&mut null_mut(), usize::MAX, 0),
        );
        s.bad("aclrtFree(NULL)", aclrtFree(null_mut()));
        s.bad("aclrtFree(garbage)", aclrtFree(g));
        s.bad(
            "aclrtFree(interior pointer)",
            aclrtFree(o.dev.wrapping_byte_add(64)),
        );
        s.bad("aclrtMallocHost(NULL)", aclrtMallocHost(null_mut(), 64));
        s.bad("aclrtMallocHost(0)", aclrtMallocHost(&mut null_mut(), 0));
        s.bad("aclrtFreeHost(NULL)", aclrtFreeHost(null_mut()));
        s.bad("aclrtFreeHost(garbage)", aclrtFreeHost(g));
        let mut host = vec![0u8; 4096];
        let hp: *mut c_void = host.as_mut_ptr().cast();
        s.bad("aclrtFreeHost(not from aclrtMallocHost)", aclrtFreeHost(hp));
        for (what, dst, src) in [
            ("dst NULL", null_mut(), hp.cast_const()),
            ("src NULL", hp, null()),
        ] {
            s.bad(what, aclrtMemcpy(dst, 64, src, 64, ACL_MEMCPY_HOST_TO_HOST));
            s.bad(
                what,
                aclrtMemcpyAsync(dst, 64, src, 64, ACL_MEMCPY_HOST_TO_HOST, o.stream),
            );
        }
        s.bad(
            "aclrtMemcpy(count > destMax)",
            aclrtMemcpy(hp, 8, o.dev, 64, ACL_MEMCPY_DEVICE_TO_HOST),
        );
        s.bad("aclrtMemcpy(bad kind)", aclrtMemcpy(hp, 64, o.dev, 64, 99));
        s.bad(
            "aclrtMemcpy(garbage device pointer)",
            aclrtMemcpy(hp, 64, g, 64, ACL_MEMCPY_DEVICE_TO_HOST),
        );
        s.bad(
            "aclrtMemcpy(host kind on device memory)",
            aclrtMemcpy(o.dev, 64, hp, 64, ACL_MEMCPY_HOST_TO_HOST),
        );
        s.bad(
            "aclrtMemcpy(device to device past the end)",
            aclrtMemcpy(o.dev, 8192, o.dev, 8192, ACL_MEMCPY_DEVICE_TO_DEVICE),
        );
        s.bad("aclrtMemset(NULL)", aclrtMemset(null_mut(), 64, 0, 64));
        s.bad(
            "aclrtMemset(count > maxCount)",
            aclrtMemset(o.dev, 8, 0, 64),
        );
        s.bad(
            "aclrtMemset(past the end)",
            aclrtMemset(o.dev, usize::MAX, 0, usize::MAX),
        );
        s.bad("aclrtMemset(garbage)", aclrtMemset(g, 64, 0, 64));
        s.bad(
            "aclrtMemsetAsync(garbage)",
            aclrtMemsetAsync(g, 64, 0, 64, o.stream),
        );

        // Pools.
        s.bad(
            "aclrtMemPoolCreate(NULL pool)",
            aclrtMemPoolCreate(null_mut(), null()),
        );
        s.bad(
            "aclrtMemPoolCreate(NULL props)",
            aclrtMemPoolCreate(&mut null_mut(), null()),
        );
        s.bad(
            "aclrtMemPoolMallocAsync(NULL ptr)",
            aclrtMemPoolMallocAsync(null_mut(), 64, o.pool, o.stream),
        );
        s.bad(
            "aclrtMemPoolMallocAsync(0 bytes)",
            aclrtMemPoolMallocAsync(&mut null_mut(), 0, o.pool, o.stream),
        );
        s.bad(
            "aclrtMemPoolFreeAsync(NULL)",
            aclrtMemPoolFreeAsync(null_mut(), o.stream),
        );
        s.bad(
            "aclrtMemPoolFreeAsync(not pool memory)",
            aclrtMemPoolFreeAsync(o.dev, o.stream),
        );
        for h in not_pool.into_iter().chain([null_mut()]) {
            s.bad("aclrtMemPoolDestroy", aclrtMemPoolDestroy(h));
            s.bad(
                "aclrtMemPoolMallocAsync",
                aclrtMemPoolMallocAsync(&mut null_mut(), 64, h, o.stream),
            );
        }

        // Binaries and kernels.
        let object = kernel_object();
        s.bad(
            "aclrtBinaryLoadFromData(NULL data)",
            aclrtBinaryLoadFromData(null(), 64, null(), &mut null_mut()),
        );
        s.bad(
            "aclrtBinaryLoadFromData(NULL handle)",
            aclrtBinaryLoadFromData(object.as_ptr().cast(), object.len(), null(), null_mut()),
        );
        s.bad(
            "aclrtBinaryLoadFromData(0 bytes)",
            aclrtBinaryLoadFromData(object.as_ptr().cast(), 0, null(), &mut null_mut()),
        );
        s.bad(
            "aclrtBinaryLoadFromData(truncated)",
            aclrtBinaryLoadFromData(object.as_ptr().cast(), 40, null(), &mut null_mut()),
        );
        let junk = [0x7fu8; 256];
        s.bad(
            "aclrtBinaryLoadFromData(junk)",
            aclrtBinaryLoadFromData(junk.as_ptr().cast(), junk.len(), null(), &mut null_mut()),
        );
        s.bad(
            "aclrtBinaryLoadFromFile(NULL path)",
            aclrtBinaryLoadFromFile(null(), null_mut(), &mut null_mut()),
        );
        s.bad(
            "aclrtBinaryLoadFromFile(missing file)",
            aclrtBinaryLoadFromFile(bad_path.as_ptr(), null_mut(), &mut null_mut()),
        );
        let name = CString::new("vadd_f32").unwrap();
        let missing = CString::new("no_such_kernel").unwrap();
        s.bad(
            "aclrtBinaryGetFunction(NULL name)",
            aclrtBinaryGetFunction(o.bin, null(), &mut null_mut()),
        );
        s.bad(
            "aclrtBinaryGetFunction(NULL out)",
            aclrtBinaryGetFunction(o.bin, name.as_ptr(), null_mut()),
        );
        s.bad(
            "aclrtBinaryGetFunction(unknown name)",
            aclrtBinaryGetFunction(o.bin, missing.as_ptr(), &mut null_mut()),
        );
        for h in not_bin.into_iter().chain([null_mut()]) {
            s.bad(
                "aclrtBinaryGetFunction",
                aclrtBinaryGetFunction(h, name.as_ptr(), &mut null_mut()),
            );
            s.bad("aclrtBinaryUnLoad", aclrtBinaryUnLoad(h));
        }
        for h in not_func.into_iter().chain([null_mut()]) {
            s.bad(
                "aclrtLaunchKernel",
                aclrtLaunchKernel(h, 1, null(), 0, o.stream),
            );
            s.bad(
                "npusimLaunchKernel",
                npusimLaunchKernel(h, 1, null(), 0, 0, o.stream),
            );
        }
        let args = [0u64; 4];
        for (what, block_dim, size, mask) in [
            ("block dim 0", 0, 32, 0),
            ("argsSize not a multiple of 8", 1, 13, 0),
            ("argsSize huge", 1, usize::MAX & !7, 0),
            ("floatMask past the arguments", 1, 32, 1 << 10),
        ] {
            s.bad(
                what,
                npusimLaunchKernel(
                    o.func,
                    block_dim,
                    args.as_ptr().cast(),
                    size,
                    mask,
                    o.stream,
                ),
            );
        }
        s.bad(
            "aclrtLaunchKernel(NULL args with a size)",
            aclrtLaunchKernel(o.func, 1, null(), 32, o.stream),
        );

        // Callbacks and exceptions.
        s.bad(
            "aclrtLaunchCallback(NULL fn)",
            aclrtLaunchCallback(None, null_mut(), ACL_CALLBACK_BLOCK, o.stream),
        );
        s.bad(
            "aclrtLaunchCallback(bad block type)",
            aclrtLaunchCallback(Some(nothing), null_mut(), 77, o.stream),
        );
        s.bad("aclrtProcessReport(unsubscribed)", aclrtProcessReport(1));
        s.bad(
            "aclrtUnSubscribeReport(never subscribed)",
            aclrtUnSubscribeReport(12345, o.stream),
        );
        for info in [null(), garbage().cast_const().cast()] {
            assert_eq!(aclrtGetTaskIdFromExceptionInfo(info), u32::MAX);
            assert_eq!(aclrtGetStreamIdFromExceptionInfo(info), u32::MAX);
            assert_eq!(aclrtGetThreadIdFromExceptionInfo(info), u32::MAX);
            assert_eq!(aclrtGetDeviceIdFromExceptionInfo(info), u32::MAX);
            assert_eq!(aclrtGetErrorCodeFromExceptionInfo(info), u32::MAX);
            s.calls += 5;
        }
        assert!(
            !aclGetRecentErrMsg().is_null(),
            "the failures above left messages"
        );
        assert!(
            aclGetRecentErrMsg().is_null(),
            "and reading them cleared them"
        );

        // The session still works: a round trip through device memory.
        let input: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        let mut output = vec![0u8; 4096];
        assert_eq!(
            aclrtMemcpy(
                o.dev,
                4096,
                input.as_ptr().cast(),
                4096,
                ACL_MEMCPY_HOST_TO_DEVICE
            ),
            ACL_SUCCESS
        );
        assert_eq!(
            aclrtMemcpy(
                output.as_mut_ptr().cast(),
                4096,
                o.dev,
                4096,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            ACL_SUCCESS
        );
        assert_eq!(input, output);
        assert_eq!(aclrtSynchronizeStream(o.stream), ACL_SUCCESS);
        assert_eq!(aclrtSynchronizeDevice(), ACL_SUCCESS);
        assert_eq!(aclrtFree(o.dev), ACL_SUCCESS);
        assert_eq!(aclrtMemPoolDestroy(o.pool), ACL_SUCCESS);
        assert_eq!(aclrtBinaryUnLoad(o.bin), ACL_SUCCESS);
        assert_eq!(aclrtDestroyEvent(o.event), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(o.stream), ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        assert_eq!(aclrtDestroyContext(o.ctx), ACL_SUCCESS);
        assert_eq!(aclFinalize(), ACL_SUCCESS);
        s.bad("aclFinalize twice", aclFinalize());
        s.bad(
            "aclrtSynchronizeDevice after aclFinalize",
            aclrtSynchronizeDevice(),
        );
    }
    assert!(s.calls > 250, "{} misuse calls", s.calls);
}

/// Sizes that used to abort the process or come back with the wrong code.
#[test]
fn overflowing_sizes_return_their_documented_codes() {
    let _turn = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = Sweep {
        documented: documented_codes(),
        calls: 0,
    };
    // SAFETY: as above; host buffers are valid for the counts the calls may touch.
    unsafe {
        assert_eq!(aclInit(null()), ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        s.exact(
            "aclrtMallocHost(64 GiB)",
            aclrtMallocHost(&mut null_mut(), 64 << 30),
            ACL_ERROR_RT_MEMORY_ALLOCATION,
        );
        s.exact(
            "aclrtMallocHost(SIZE_MAX)",
            aclrtMallocHost(&mut null_mut(), usize::MAX),
            ACL_ERROR_RT_MEMORY_ALLOCATION,
        );

        let mut dev = null_mut();
        assert_eq!(aclrtMalloc(&mut dev, 4096, 0), ACL_SUCCESS);
        let mut host = vec![0u8; 4096];
        for count in [4097, 1 << 40, usize::MAX] {
            s.exact(
                "aclrtMemcpy device to host past the allocation",
                aclrtMemcpy(
                    host.as_mut_ptr().cast(),
                    usize::MAX,
                    dev,
                    count,
                    ACL_MEMCPY_DEVICE_TO_HOST,
                ),
                ACL_ERROR_RT_PARAM_INVALID,
            );
        }

        let big = vec![0u8; 8192];
        s.exact(
            "aclrtMemcpy host to device past the allocation",
            aclrtMemcpy(
                dev,
                usize::MAX,
                big.as_ptr().cast(),
                big.len(),
                ACL_MEMCPY_HOST_TO_DEVICE,
            ),
            ACL_ERROR_RT_PARAM_INVALID,
        );

        let props = aclrtMemPoolProps {
            allocType: 0,
            handleType: 0,
            location: aclrtMemLocation {
                id: 0,
                type_: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            maxSize: 1 << 20,
            reserved: [0; 32],
        };
        let mut pool = null_mut();
        assert_eq!(aclrtMemPoolCreate(&mut pool, &props), ACL_SUCCESS);
        let mut p = null_mut();
        assert_eq!(
            aclrtMemPoolMallocAsync(&mut p, 32, pool, null_mut()),
            ACL_SUCCESS
        );
        // 32 in use + (SIZE_MAX - 31) wraps to 0: it must still be past maxSize.
        s.exact(
            "aclrtMemPoolMallocAsync(SIZE_MAX - 31)",
            aclrtMemPoolMallocAsync(&mut null_mut(), usize::MAX - 31, pool, null_mut()),
            ACL_ERROR_RT_MEMORY_ALLOCATION,
        );
        s.bad(
            "aclrtMemPoolMallocAsync(SIZE_MAX)",
            aclrtMemPoolMallocAsync(&mut null_mut(), usize::MAX, pool, null_mut()),
        );
        assert_eq!(aclrtMemPoolFreeAsync(p, null_mut()), ACL_SUCCESS);
        assert_eq!(aclrtMemPoolDestroy(pool), ACL_SUCCESS);
        assert_eq!(aclrtFree(dev), ACL_SUCCESS);
        assert_eq!(aclFinalize(), ACL_SUCCESS);
    }
}
