//! Kernel binaries and launches. A binary is an ELF object for the simulated AI core (compiled
//! from C against `device/sdk/npusim.h`, see `examples/kernels/`), loaded into the current
//! context.
//!
//! # Kernel arguments
//!
//! `aclrtLaunchKernel` takes the kernel's arguments as one buffer of 8-byte slots, one slot per
//! argument, in order: a pointer or an integer fills its slot (zero- or sign-extended to 64
//! bits), so a C struct of `void *` / `uint64_t` / `int64_t` fields is such a buffer. The slots
//! are passed to the kernel per the RISC-V LP64 calling convention, in integer registers.
//! `argsData` may be host memory or, as ACL documents, device memory of the current context
//! (read when the launch is enqueued: write it with a synchronous copy first).
//!
//! A `float` argument travels in a float register, so it needs its type: use the npusim
//! extension `npusimLaunchKernel`, whose `floatMask` has bit `i` set when slot `i` holds a
//! `float` (in the slot's low 4 bytes).

use npusim_engine::Launch;
use std::ffi::{CStr, c_char, c_void};

use npusim_engine::{Arg, Context, Kernel};

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::{BinEntry, BinSource, FuncEntry, Kind, lookup, new_key, to_ptr};
use crate::state::{Session, session};
use crate::types::*;

/// Most argument slots of one launch (the task descriptor's argument words).
const MAX_SLOTS: usize = npusim_engine::launch::MAX_ARGS;

fn register_binary(
    s: &Session,
    binary: npusim_engine::Binary,
    source: BinSource,
    out: *mut aclrtBinHandle,
) -> AclResult<()> {
    let (ctx, _) = s.current_ctx()?;
    let key = new_key(Kind::Binary);
    s.tables().binaries.insert(
        key,
        BinEntry {
            binary,
            ctx,
            functions: Default::default(),
            source,
        },
    );
    // SAFETY: the caller checked `out` is non-NULL; C passes a writable aclrtBinHandle.
    unsafe { out.write(to_ptr(key)) };
    Ok(())
}

/// `aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options,
/// aclrtBinHandle *binHandle)`: loads a kernel object file into the current context. The
/// options are accepted and ignored.
///
/// # Safety
/// `binPath` is NULL or a NUL-terminated string; `binHandle` is NULL or points to an
/// `aclrtBinHandle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtBinaryLoadFromFile(
    binPath: *const c_char,
    options: *mut aclrtBinaryLoadOptions,
    binHandle: *mut aclrtBinHandle,
) -> aclError {
    let _ = options;
    call("aclrtBinaryLoadFromFile", || {
        non_null(binPath, "binPath")?;
        non_null(binHandle, "binHandle")?;
        // SAFETY: checked non-NULL; the caller passes a NUL-terminated string.
        let path = unsafe { CStr::from_ptr(binPath) }
            .to_string_lossy()
            .into_owned();
        let s = session()?;
        let binary = s.rt.binaries().load_file(&path)?;
        register_binary(&s, binary, BinSource::File(path), binHandle)
    })
}

/// `aclError aclrtBinaryLoadFromData(const void *data, size_t length, const
/// aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)`: loads a kernel object from
/// memory into the current context.
///
/// # Safety
/// `data` is NULL or valid for `length` bytes; `binHandle` is NULL or points to an
/// `aclrtBinHandle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtBinaryLoadFromData(
    data: *const c_void,
    length: usize,
    options: *const aclrtBinaryLoadOptions,
    binHandle: *mut aclrtBinHandle,
) -> aclError {
    let _ = options;
    call("aclrtBinaryLoadFromData", || {
        non_null(data, "data")?;
        non_null(binHandle, "binHandle")?;
        if length == 0 {
            return Err(AclError::param("length is 0"));
        }
        // SAFETY: checked non-NULL; the caller passes `length` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length) };
        let s = session()?;
        let binary = s.rt.binaries().load(bytes)?;
        register_binary(&s, binary, BinSource::Data(bytes.into()), binHandle)
    })
}

/// `aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName,
/// aclrtFuncHandle *funcHandle)`: the kernel function `kernelName` of a loaded binary (the
/// same handle on every call with the same name).
///
/// # Safety
/// `kernelName` is NULL or a NUL-terminated string; `funcHandle` is NULL or points to an
/// `aclrtFuncHandle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtBinaryGetFunction(
    binHandle: aclrtBinHandle,
    kernelName: *const c_char,
    funcHandle: *mut aclrtFuncHandle,
) -> aclError {
    call("aclrtBinaryGetFunction", || {
        non_null(kernelName, "kernelName")?;
        non_null(funcHandle, "funcHandle")?;
        // SAFETY: checked non-NULL; the caller passes a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(kernelName) }
            .to_string_lossy()
            .into_owned();
        let s = session()?;
        let (bin_key, binary, known) = {
            let t = s.tables();
            let (k, b) = lookup(&t.binaries, Kind::Binary, binHandle, "binHandle")?;
            (k, b.binary, b.functions.get(&name).copied())
        };
        let key = match known {
            Some(k) => k,
            None => {
                let kernel = s.rt.binaries().get_function(binary, &name)?;
                let key = new_key(Kind::Function);
                let mut t = s.tables();
                let Some(b) = t.binaries.get_mut(&bin_key) else {
                    return Err(AclError::new(
                        ACL_ERROR_RT_PARAM_INVALID,
                        "the binary was unloaded during the lookup",
                    ));
                };
                b.functions.insert(name.clone(), key);
                t.functions.insert(
                    key,
                    FuncEntry {
                        kernel,
                        name,
                        bin: bin_key,
                        elsewhere: Default::default(),
                    },
                );
                key
            }
        };
        // SAFETY: checked non-NULL; the caller passes a writable aclrtFuncHandle.
        unsafe { funcHandle.write(to_ptr(key)) };
        Ok(())
    })
}

/// Unloads the copies of a binary loaded into other contexts (best effort: a context that
/// faulted or went has released them already).
pub(crate) fn unload_clones(s: &Session, clones: Vec<(u64, npusim_engine::Binary)>) {
    for (ctx, binary) in clones {
        let Some(c) = s.tables().contexts.get(&ctx).map(|c| c.ctx) else {
            continue;
        };
        if s.rt.contexts().push(c).is_ok() {
            let _ = s.rt.binaries().unload(binary);
            s.rt.contexts().pop();
        }
    }
}

/// `aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle)`: waits for the device's queued work,
/// then unloads the binary (and its copies in other contexts); its function handles become
/// invalid.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtBinaryUnLoad(binHandle: aclrtBinHandle) -> aclError {
    call("aclrtBinaryUnLoad", || {
        let s = session()?;
        let (key, binary) = {
            let t = s.tables();
            let (k, b) = lookup(&t.binaries, Kind::Binary, binHandle, "binHandle")?;
            (k, b.binary)
        };
        if let Err(e) = s.rt.binaries().unload(binary) {
            // After a fault under ACL_STOP_ON_FAILURE unloading is cleanup, and succeeds; the
            // runtime binary goes with the context (or the reset that clears its fault).
            if !matches!(s.rt.contexts().error(), Ok(Some(_))) {
                return Err(e.into());
            }
            let mut t = s.tables();
            let ctx = t.binaries.get(&key).map(|b| b.ctx);
            if let Some(c) = ctx.and_then(|c| t.contexts.get_mut(&c)) {
                c.retired_binaries.push(binary);
            }
        }
        let clones = s.tables().remove_binary(key);
        unload_clones(&s, clones);
        Ok(())
    })
}

/// Reads `out.len()` bytes of device memory of context `ctx` at `addr`, as of now.
fn read_device(s: &Session, ctx: Context, addr: u64, out: &mut [u8]) -> AclResult<()> {
    s.rt.memory()
        .read_now(ctx, npusim_engine::DevicePtr(addr), out)
        .map_err(|e| match e {
            npusim_engine::NpuError::InvalidPointer { .. } => AclError::new(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("reading the kernel arguments at {addr:#x}: {e}"),
            ),
            e => e.into(),
        })
}

/// Decodes an argument buffer into npusim arguments.
///
/// # Safety
/// `data` is valid for `size` bytes unless it is device memory of the current context.
unsafe fn decode_args(
    s: &Session,
    current: (u64, Context),
    data: *const c_void,
    size: usize,
    float_mask: u64,
) -> AclResult<Vec<Arg>> {
    if !size.is_multiple_of(8) {
        return Err(AclError::param(format!(
            "argsSize {size} is not a multiple of 8: each argument fills an 8-byte slot"
        )));
    }
    let slots = size / 8;
    if slots > MAX_SLOTS {
        return Err(AclError::param(format!(
            "{slots} argument slots; at most {MAX_SLOTS}"
        )));
    }
    if slots < 64 && float_mask >> slots != 0 {
        return Err(AclError::param(format!(
            "floatMask {float_mask:#x} marks slots past the {slots} given"
        )));
    }
    if slots == 0 {
        return Ok(Vec::new());
    }
    non_null(data, "argsData")?;
    let mut bytes = vec![0u8; size];
    let (ctx_key, ctx) = current;
    if s.is_device(ctx_key, data.addr() as u64, size as u64) {
        read_device(s, ctx, data.addr() as u64, &mut bytes)?;
    } else {
        // SAFETY: host memory valid for `size` bytes (the caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(data.cast::<u8>(), bytes.as_mut_ptr(), size) };
    }
    Ok(bytes
        .chunks_exact(8)
        .enumerate()
        .map(|(i, w)| {
            let word = u64::from_le_bytes(w.try_into().expect("8-byte chunk"));
            if float_mask >> i & 1 == 1 {
                Arg::F32(f32::from_bits(word as u32))
            } else {
                Arg::U64(word)
            }
        })
        .collect())
}

/// The kernel `func` names, for a launch in the current context. A function loaded in another
/// context of the same device is launched as ACL does: its binary is loaded into the current
/// context on first use there (and unloaded with it); a function of another device's context
/// is refused by the runtime (ACL_ERROR_RT_STREAM_CONTEXT).
pub(crate) fn resolve(s: &Session, func: aclrtFuncHandle) -> AclResult<(u64, Kernel)> {
    resolve_in(s, func, s.current_ctx()?)
}

/// As [`resolve`], in the current context `current` (its handle value and context) the caller
/// already looked up.
fn resolve_in(
    s: &Session,
    func: aclrtFuncHandle,
    current: (u64, Context),
) -> AclResult<(u64, Kernel)> {
    let (fkey, kernel, name, bin) = {
        let t = s.tables();
        let (k, f) = lookup(&t.functions, Kind::Function, func, "funcHandle")?;
        (k, f.kernel, f.name.clone(), f.bin)
    };
    let (ctx_key, ctx) = current;
    let (home_key, source) = {
        let t = s.tables();
        let b = t.binaries.get(&bin).ok_or_else(|| {
            AclError::new(
                ACL_ERROR_RT_PARAM_INVALID,
                "the function's binary was unloaded",
            )
        })?;
        if b.ctx == ctx_key {
            return Ok((fkey, kernel));
        }
        if let Some((_, k)) = t
            .functions
            .get(&fkey)
            .and_then(|f| f.elsewhere.get(&ctx_key))
        {
            return Ok((fkey, *k));
        }
        (b.ctx, b.source.clone())
    };
    let home = s.tables().contexts.get(&home_key).map(|c| c.ctx);
    let same_device = home.is_some_and(|h| device_of(s, h) == device_of(s, ctx));
    if !same_device {
        // The runtime names the mismatch.
        return Ok((fkey, kernel));
    }
    let binary = match &source {
        BinSource::File(path) => s.rt.binaries().load_file(path)?,
        BinSource::Data(bytes) => s.rt.binaries().load(bytes)?,
    };
    let here = s.rt.binaries().get_function(binary, &name)?;
    let clone_key = new_key(Kind::Binary);
    let mut t = s.tables();
    t.binaries.insert(
        clone_key,
        BinEntry {
            binary,
            ctx: ctx_key,
            functions: Default::default(),
            source,
        },
    );
    if let Some(f) = t.functions.get_mut(&fkey) {
        f.elsewhere.insert(ctx_key, (clone_key, here));
    }
    Ok((fkey, here))
}

/// The index of context `ctx`'s device (`None` once the context is gone).
pub(crate) fn device_of(s: &Session, ctx: Context) -> Option<u32> {
    s.rt.contexts().device_of(ctx).ok()
}

/// Enqueues `kernel` (function handle `func`) on `st` and remembers the launch for the
/// exception info and `aclrtGetThreadLastTaskId`.
pub(crate) fn submit(
    s: &Session,
    func: u64,
    kernel: Kernel,
    block_dim: u32,
    args: &[Arg],
    st: npusim_engine::Stream,
    timeout: Option<npusim_engine::SimTime>,
) -> AclResult<()> {
    let sub =
        s.rt.submit(Launch::new(kernel, block_dim, args, st).timeout(timeout))?;
    let seq = s.note_task(sub);
    let bytes: Vec<u8> = args.iter().flat_map(|a| a.word().to_le_bytes()).collect();
    s.launches
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(st, seq, func, bytes.into());
    Ok(())
}

/// # Safety
/// As [`decode_args`].
unsafe fn launch(
    func: aclrtFuncHandle,
    block_dim: u32,
    data: *const c_void,
    size: usize,
    float_mask: u64,
    stream: aclrtStream,
) -> AclResult<()> {
    let s = session()?;
    let st = s.stream_or_default(stream)?;
    // The current context is looked up once, for the function's clone and the arguments.
    let current = s.current_ctx()?;
    let (fkey, kernel) = resolve_in(&s, func, current)?;
    // SAFETY: the caller's contract.
    let args = unsafe { decode_args(&s, current, data, size, float_mask) }?;
    submit(&s, fkey, kernel, block_dim, &args, st, None)
}

/// `aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void
/// *argsData, size_t argsSize, aclrtStream stream)`: enqueues the kernel on `stream` (NULL: the
/// default stream) with `blockDim` blocks; `argsData` holds one 8-byte slot per argument (see
/// the module docs). Returns before the kernel runs; its faults come back at synchronize.
///
/// # Safety
/// `argsData` is valid for `argsSize` bytes (host memory) or is device memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchKernel(
    funcHandle: aclrtFuncHandle,
    blockDim: u32,
    argsData: *const c_void,
    argsSize: usize,
    stream: aclrtStream,
) -> aclError {
    call("aclrtLaunchKernel", || {
        // SAFETY: as this function's.
        unsafe { launch(funcHandle, blockDim, argsData, argsSize, 0, stream) }
    })
}

/// `aclError npusimLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void
/// *argsData, size_t argsSize, uint64_t floatMask, aclrtStream stream)` (npusim extension): as
/// `aclrtLaunchKernel`, where bit `i` of `floatMask` marks slot `i` as a `float` argument.
///
/// # Safety
/// As `aclrtLaunchKernel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npusimLaunchKernel(
    funcHandle: aclrtFuncHandle,
    blockDim: u32,
    argsData: *const c_void,
    argsSize: usize,
    floatMask: u64,
    stream: aclrtStream,
) -> aclError {
    call("npusimLaunchKernel", || {
        // SAFETY: as this function's.
        unsafe { launch(funcHandle, blockDim, argsData, argsSize, floatMask, stream) }
    })
}
