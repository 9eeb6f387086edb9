//! ACL's argument builder and its launch: `aclrtKernelArgsInit` makes an args handle for a
//! function, `aclrtKernelArgsAppend` adds one kernel argument per call, and
//! `aclrtLaunchKernelWithConfig` launches the function with them.
//!
//! An npusim kernel takes its arguments per the RISC-V LP64F calling convention, so each
//! argument's class matters: an appended 1-, 2-, 4- or 8-byte parameter is an integer or a
//! pointer (4 bytes are sign-extended, as RISC-V passes `int` and `unsigned`), a 16-byte one a
//! struct of two integer words. A float goes in a float register, so it is appended with the
//! npusim extension `npusimKernelArgsAppendFloat`. A placeholder (`aclrtKernelArgsAppendPlaceHolder`)
//! passes the device address of a buffer the caller fills on the host through
//! `aclrtKernelArgsGetPlaceHolderBuffer`, of any size (a tiling struct, say): each launch copies
//! it to fresh device memory, stream-ordered before the kernel, and frees it once the kernel is
//! done. That is how ACL passes structs too.

use std::ffi::c_void;

use npusim_engine::Arg;

use npusim_engine::SimTime;

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::{ArgsEntry, Kind, Param, key_of, lookup, new_key, to_ptr};
use crate::state::{Session, session};
use crate::types::*;

/// Most bytes of one placeholder buffer.
const MAX_PLACEHOLDER: usize = 1 << 20;

/// The args-table key `p` names: one this library handed out, or caller memory given to
/// `aclrtKernelArgsInitByUserMem`.
fn args_key(s: &Session, p: aclrtArgsHandle) -> AclResult<u64> {
    let t = s.tables();
    if let Some(&k) = t.user_args.get(&key_of(p)) {
        return Ok(k);
    }
    Ok(lookup(&t.args, Kind::Args, p, "argsHandle")?.0)
}

/// Runs `f` on the args entry `p` names.
fn with_args<T>(
    s: &Session,
    p: aclrtArgsHandle,
    f: impl FnOnce(&mut ArgsEntry) -> AclResult<T>,
) -> AclResult<T> {
    let key = args_key(s, p)?;
    let mut t = s.tables();
    let a = t
        .args
        .get_mut(&key)
        .ok_or_else(|| AclError::new(ACL_ERROR_RT_PARAM_INVALID, "the args handle was released"))?;
    f(a)
}

/// The slots of a `size`-byte parameter at `p`.
///
/// # Safety
/// `p` is readable for `size` bytes.
unsafe fn slots(p: *const c_void, size: usize) -> AclResult<Vec<u64>> {
    non_null(p, "param")?;
    let mut b = [0u8; 16];
    if matches!(size, 1 | 2 | 4 | 8 | 16) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), b.as_mut_ptr(), size) };
    }
    let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    Ok(match size {
        1 => vec![b[0] as u64],
        2 => vec![u16::from_le_bytes([b[0], b[1]]) as u64],
        4 => vec![i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64 as u64],
        8 => vec![word(0)],
        16 => vec![word(0), word(1)],
        _ => {
            return Err(AclError::param(format!(
                "paramSize {size}: an argument is 1, 2, 4, 8 or 16 bytes; pass larger structs \
                 through aclrtKernelArgsAppendPlaceHolder"
            )));
        }
    })
}

/// Adds `param` to the args handle; writes its handle.
fn append(
    s: &Session,
    p: aclrtArgsHandle,
    param: Param,
    out: *mut aclrtParamHandle,
) -> AclResult<()> {
    let key = new_key(Kind::Param);
    with_args(s, p, |a| {
        if a.finalized {
            return Err(AclError::param(
                "the args handle is finalized: no argument can be added",
            ));
        }
        let slots: usize = a
            .params
            .iter()
            .map(|(_, p)| match p {
                Param::Slots(v) => v.len(),
                _ => 1,
            })
            .sum::<usize>()
            + match &param {
                Param::Slots(v) => v.len(),
                _ => 1,
            };
        let max = npusim_engine::launch::MAX_ARGS;
        if slots > max {
            return Err(AclError::param(format!(
                "{slots} argument slots; at most {max}"
            )));
        }
        a.params.push((key, param));
        Ok(())
    })?;
    // SAFETY: the caller checked `out` is non-NULL.
    unsafe { out.write(to_ptr(key)) };
    Ok(())
}

/// `aclError aclrtKernelArgsGetHandleMemSize(aclrtFuncHandle funcHandle, size_t *memSize)`: the
/// bytes of caller memory `aclrtKernelArgsInitByUserMem` takes as an args handle.
///
/// # Safety
/// `memSize` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsGetHandleMemSize(
    funcHandle: aclrtFuncHandle,
    memSize: *mut usize,
) -> aclError {
    call("aclrtKernelArgsGetHandleMemSize", || {
        non_null(memSize, "memSize")?;
        let s = session()?;
        lookup(
            &s.tables().functions,
            Kind::Function,
            funcHandle,
            "funcHandle",
        )?;
        // SAFETY: checked non-NULL.
        unsafe { memSize.write(64) };
        Ok(())
    })
}

/// `aclError aclrtKernelArgsGetMemSize(aclrtFuncHandle funcHandle, size_t userArgsSize, size_t
/// *actualArgsSize)`: the bytes of argument memory for `userArgsSize` bytes of arguments
/// (npusim needs no more).
///
/// # Safety
/// `actualArgsSize` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsGetMemSize(
    funcHandle: aclrtFuncHandle,
    userArgsSize: usize,
    actualArgsSize: *mut usize,
) -> aclError {
    call("aclrtKernelArgsGetMemSize", || {
        non_null(actualArgsSize, "actualArgsSize")?;
        let s = session()?;
        lookup(
            &s.tables().functions,
            Kind::Function,
            funcHandle,
            "funcHandle",
        )?;
        // SAFETY: checked non-NULL.
        unsafe { actualArgsSize.write(userArgsSize.max(8)) };
        Ok(())
    })
}

fn init(s: &Session, func: aclrtFuncHandle) -> AclResult<u64> {
    let (ctx, _) = s.current_ctx()?;
    let mut t = s.tables();
    let (fkey, _) = lookup(&t.functions, Kind::Function, func, "funcHandle")?;
    let key = new_key(Kind::Args);
    t.args.insert(
        key,
        ArgsEntry {
            func: fkey,
            ctx,
            params: Vec::new(),
            finalized: false,
        },
    );
    Ok(key)
}

/// `aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle *argsHandle)`: an
/// empty args handle for `funcHandle`, in the current context.
///
/// # Safety
/// `argsHandle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsInit(
    funcHandle: aclrtFuncHandle,
    argsHandle: *mut aclrtArgsHandle,
) -> aclError {
    call("aclrtKernelArgsInit", || {
        non_null(argsHandle, "argsHandle")?;
        let key = init(&*session()?, funcHandle)?;
        // SAFETY: checked non-NULL.
        unsafe { argsHandle.write(to_ptr(key)) };
        Ok(())
    })
}

/// `aclError aclrtKernelArgsInitByUserMem(aclrtFuncHandle funcHandle, aclrtArgsHandle
/// argsHandle, void *userHostMem, size_t actualArgsSize)`: makes the caller's memory
/// `argsHandle` (of `aclrtKernelArgsGetHandleMemSize` bytes) an empty args handle. npusim
/// keeps the arguments itself and never writes either buffer.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtKernelArgsInitByUserMem(
    funcHandle: aclrtFuncHandle,
    argsHandle: aclrtArgsHandle,
    userHostMem: *mut c_void,
    actualArgsSize: usize,
) -> aclError {
    let _ = actualArgsSize;
    call("aclrtKernelArgsInitByUserMem", || {
        non_null(argsHandle, "argsHandle")?;
        non_null(userHostMem, "userHostMem")?;
        let s = session()?;
        let key = init(&s, funcHandle)?;
        let mut t = s.tables();
        if let Some(old) = t.user_args.insert(key_of(argsHandle), key) {
            t.args.remove(&old);
        }
        Ok(())
    })
}

/// `aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void *param, size_t paramSize,
/// aclrtParamHandle *paramHandle)`: adds the next argument, `paramSize` bytes read from
/// `param` now (see the module docs for the sizes).
///
/// # Safety
/// `param` is readable for `paramSize` bytes; `paramHandle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsAppend(
    argsHandle: aclrtArgsHandle,
    param: *mut c_void,
    paramSize: usize,
    paramHandle: *mut aclrtParamHandle,
) -> aclError {
    call("aclrtKernelArgsAppend", || {
        non_null(paramHandle, "paramHandle")?;
        // SAFETY: the caller's contract.
        let v = unsafe { slots(param, paramSize) }?;
        append(&*session()?, argsHandle, Param::Slots(v), paramHandle)
    })
}

/// `aclError npusimKernelArgsAppendFloat(aclrtArgsHandle argsHandle, float value,
/// aclrtParamHandle *paramHandle)` (npusim extension): adds a `float` argument, passed in a
/// float register.
///
/// # Safety
/// `paramHandle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npusimKernelArgsAppendFloat(
    argsHandle: aclrtArgsHandle,
    value: f32,
    paramHandle: *mut aclrtParamHandle,
) -> aclError {
    call("npusimKernelArgsAppendFloat", || {
        non_null(paramHandle, "paramHandle")?;
        append(&*session()?, argsHandle, Param::Float(value), paramHandle)
    })
}

/// `aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle, aclrtParamHandle
/// *paramHandle)`: adds an argument that is the device address of a buffer filled through
/// `aclrtKernelArgsGetPlaceHolderBuffer`.
///
/// # Safety
/// `paramHandle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsAppendPlaceHolder(
    argsHandle: aclrtArgsHandle,
    paramHandle: *mut aclrtParamHandle,
) -> aclError {
    call("aclrtKernelArgsAppendPlaceHolder", || {
        non_null(paramHandle, "paramHandle")?;
        append(
            &*session()?,
            argsHandle,
            Param::PlaceHolder(Vec::new()),
            paramHandle,
        )
    })
}

/// `aclError aclrtKernelArgsGetPlaceHolderBuffer(aclrtArgsHandle argsHandle, aclrtParamHandle
/// paramHandle, size_t dataSize, void **bufferAddr)`: a host buffer of `dataSize` bytes
/// (zeroed, at most 1 MiB) for the placeholder's data, valid until the next call for this
/// placeholder or the args handle's release; each launch copies what it holds then.
///
/// # Safety
/// `bufferAddr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsGetPlaceHolderBuffer(
    argsHandle: aclrtArgsHandle,
    paramHandle: aclrtParamHandle,
    dataSize: usize,
    bufferAddr: *mut *mut c_void,
) -> aclError {
    call("aclrtKernelArgsGetPlaceHolderBuffer", || {
        non_null(bufferAddr, "bufferAddr")?;
        non_null(paramHandle, "paramHandle")?;
        if dataSize == 0 || dataSize > MAX_PLACEHOLDER {
            return Err(AclError::param(format!(
                "dataSize {dataSize}: expected 1..={MAX_PLACEHOLDER}"
            )));
        }
        let s = session()?;
        let ptr = with_args(&s, argsHandle, |a| {
            let key = key_of(paramHandle);
            match a.params.iter_mut().find(|(k, _)| *k == key) {
                Some((_, Param::PlaceHolder(buf))) => {
                    *buf = vec![0; dataSize];
                    Ok(buf.as_mut_ptr().cast::<c_void>())
                }
                Some(_) => Err(AclError::param("paramHandle is not a placeholder")),
                None => Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    "paramHandle is not a parameter of this args handle",
                )),
            }
        })?;
        // SAFETY: checked non-NULL.
        unsafe { bufferAddr.write(ptr) };
        Ok(())
    })
}

/// `aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle
/// paramHandle, void *param, size_t paramSize)`: replaces an argument's value (the same size
/// rules as `aclrtKernelArgsAppend`; for a placeholder, its buffer's bytes, at most its size).
/// Launches already enqueued keep the values they were given.
///
/// # Safety
/// `param` is readable for `paramSize` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtKernelArgsParaUpdate(
    argsHandle: aclrtArgsHandle,
    paramHandle: aclrtParamHandle,
    param: *mut c_void,
    paramSize: usize,
) -> aclError {
    call("aclrtKernelArgsParaUpdate", || {
        non_null(paramHandle, "paramHandle")?;
        non_null(param, "param")?;
        let s = session()?;
        let key = key_of(paramHandle);
        with_args(&s, argsHandle, |a| {
            let Some((_, p)) = a.params.iter_mut().find(|(k, _)| *k == key) else {
                return Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    "paramHandle is not a parameter of this args handle",
                ));
            };
            match p {
                Param::PlaceHolder(buf) => {
                    if paramSize > buf.len() {
                        return Err(AclError::param(format!(
                            "paramSize {paramSize} exceeds the placeholder's {} bytes",
                            buf.len()
                        )));
                    }
                    // SAFETY: the caller's contract.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            param.cast::<u8>(),
                            buf.as_mut_ptr(),
                            paramSize,
                        )
                    };
                }
                Param::Float(f) => {
                    if paramSize != 4 {
                        return Err(AclError::param("a float argument is 4 bytes"));
                    }
                    // SAFETY: the caller's contract (4 readable bytes).
                    *f = unsafe { param.cast::<f32>().read_unaligned() };
                }
                Param::Slots(v) => {
                    // SAFETY: the caller's contract.
                    let new = unsafe { slots(param, paramSize) }?;
                    if new.len() != v.len() {
                        return Err(AclError::param(
                            "paramSize changes the argument's number of slots",
                        ));
                    }
                    *v = new;
                }
            }
            Ok(())
        })
    })
}

/// `aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle)`: ends appending; the handle
/// can be launched from now on.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtKernelArgsFinalize(argsHandle: aclrtArgsHandle) -> aclError {
    call("aclrtKernelArgsFinalize", || {
        with_args(&*session()?, argsHandle, |a| {
            a.finalized = true;
            Ok(())
        })
    })
}

/// Checks a launch configuration and returns the launch's own timeout, if it sets one
/// (`ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT`, seconds, or `_TIMEOUT_US`; 0: the device's). The
/// other attributes change nothing in the model.
///
/// # Safety
/// `cfg` is NULL or valid, its `attrs` readable for `numAttrs` entries.
unsafe fn check_cfg(cfg: *const aclrtLaunchKernelCfg) -> AclResult<Option<SimTime>> {
    if cfg.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let cfg = unsafe { &*cfg };
    if cfg.numAttrs == 0 {
        return Ok(None);
    }
    non_null(cfg.attrs, "cfg->attrs")?;
    // SAFETY: the caller's contract.
    let attrs = unsafe { std::slice::from_raw_parts(cfg.attrs, cfg.numAttrs) };
    let timeouts = attrs
        .iter()
        .filter(|a| {
            matches!(
                a.id,
                ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT | ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US
            )
        })
        .count();
    if timeouts > 1 {
        return Err(AclError::param(
            "ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT and _TIMEOUT_US cannot be given together",
        ));
    }
    if let Some(a) = attrs.iter().find(|a| !(1..=9).contains(&a.id)) {
        return Err(AclError::param(format!(
            "unknown aclrtLaunchKernelAttrId {}",
            a.id
        )));
    }
    // The value union is little-endian: `timeout` is the low 16 bits of its first word,
    // `timeoutUs` its first two words (low, high).
    let timeout = attrs.iter().find_map(|a| match a.id {
        ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT => Some((a.value[0] & 0xffff) as u64 * 1_000_000),
        ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US => Some(a.value[0] as u64 | (a.value[1] as u64) << 32),
        _ => None,
    });
    Ok(timeout.filter(|&us| us > 0).map(SimTime::from_us))
}

/// `aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks,
/// aclrtStream stream, aclrtLaunchKernelCfg *cfg, aclrtArgsHandle argsHandle, void *reserve)`:
/// enqueues `funcHandle` with `numBlocks` blocks and the finalized arguments of `argsHandle`
/// on `stream` (NULL: the default stream).
///
/// # Safety
/// `cfg` is NULL or a valid configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchKernelWithConfig(
    funcHandle: aclrtFuncHandle,
    numBlocks: u32,
    stream: aclrtStream,
    cfg: *mut aclrtLaunchKernelCfg,
    argsHandle: aclrtArgsHandle,
    reserve: *mut c_void,
) -> aclError {
    let _ = reserve;
    call("aclrtLaunchKernelWithConfig", || {
        // SAFETY: the caller's contract.
        let timeout = unsafe { check_cfg(cfg) }?;
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        let (fkey, kernel) = crate::kernel::resolve(&s, funcHandle)?;
        // Take the values now: later updates do not change this launch.
        enum Value {
            Words(Vec<u64>),
            Float(f32),
            Buffer(Vec<u8>),
        }
        let values: Vec<Value> = with_args(&s, argsHandle, |a| {
            if a.func != fkey {
                return Err(AclError::param("argsHandle was made for another function"));
            }
            if !a.finalized {
                return Err(AclError::param(
                    "argsHandle is not finalized (aclrtKernelArgsFinalize)",
                ));
            }
            Ok(a.params
                .iter()
                .map(|(_, p)| match p {
                    Param::Slots(v) => Value::Words(v.clone()),
                    Param::Float(f) => Value::Float(*f),
                    Param::PlaceHolder(b) => Value::Buffer(b.clone()),
                })
                .collect())
        })?;
        let mut args = Vec::new();
        let mut buffers = Vec::new();
        let mut result = Ok(());
        for v in values {
            match v {
                Value::Words(w) => args.extend(w.into_iter().map(Arg::U64)),
                Value::Float(f) => args.push(Arg::F32(f)),
                Value::Buffer(b) => {
                    if b.is_empty() {
                        result = Err(AclError::param(
                            "a placeholder has no buffer (aclrtKernelArgsGetPlaceHolderBuffer)",
                        ));
                        break;
                    }
                    match s.rt.memory().malloc(b.len() as u64) {
                        Ok(p) => {
                            buffers.push(p);
                            args.push(Arg::U64(p.0));
                            if let Err(e) = s.rt.memory().memcpy_htod_async_pageable(p, &b, st) {
                                result = Err(e.into());
                                break;
                            }
                        }
                        Err(e) => {
                            result = Err(e.into());
                            break;
                        }
                    }
                }
            }
        }
        if result.is_ok() {
            result = crate::kernel::submit(&s, fkey, kernel, numBlocks, &args, st, timeout);
        }
        // Freed once the stream has passed the kernel (or at once if it was never enqueued).
        for p in buffers {
            let freed = if result.is_ok() {
                s.rt.memory().free_async(p, st)
            } else {
                s.rt.memory().free(p)
            };
            if let Err(e) = freed
                && result.is_ok()
            {
                result = Err(e.into());
            }
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots_of<T>(v: &T) -> AclResult<Vec<u64>> {
        // SAFETY: `v` is readable for its size.
        unsafe { slots((v as *const T).cast(), std::mem::size_of::<T>()) }
    }

    #[test]
    fn a_launch_configuration_gives_its_own_timeout() {
        let timeout = |id: u32, value: [u32; 4]| {
            let mut attr = aclrtLaunchKernelAttr { id, value };
            let cfg = aclrtLaunchKernelCfg {
                attrs: &mut attr,
                numAttrs: 1,
            };
            // SAFETY: `cfg` and its one attribute are live.
            unsafe { check_cfg(&cfg) }.map_err(|e| e.code)
        };
        // `timeout` (seconds) is the low 16 bits of the union's first word.
        assert_eq!(
            timeout(ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, [0xdead_0003, 0, 0, 0]),
            Ok(Some(SimTime::from_ms(3000)))
        );
        assert_eq!(
            timeout(ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US, [1500, 0, 0, 0]),
            Ok(Some(SimTime::from_us(1500)))
        );
        assert_eq!(
            timeout(ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US, [0, 1, 0, 0]),
            Ok(Some(SimTime::from_us(1 << 32)))
        );
        assert_eq!(timeout(ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, [0; 4]), Ok(None));
        assert_eq!(
            timeout(1, [0; 4]),
            Ok(None),
            "another attribute: no timeout"
        );
        assert!(timeout(99, [0; 4]).is_err());
        assert_eq!(
            unsafe { check_cfg(std::ptr::null()) }.map_err(|e| e.code),
            Ok(None)
        );
    }

    #[test]
    fn parameters_become_slots_as_rv64_passes_them() {
        assert_eq!(
            slots_of(&-1i32).unwrap(),
            vec![u64::MAX],
            "4 bytes sign-extend"
        );
        assert_eq!(
            slots_of(&0xffu8).unwrap(),
            vec![0xff],
            "1 byte zero-extends"
        );
        assert_eq!(slots_of(&0xfffeu16).unwrap(), vec![0xfffe]);
        assert_eq!(slots_of(&7u64).unwrap(), vec![7]);
        assert_eq!(
            slots_of(&[1u64, 2u64]).unwrap(),
            vec![1, 2],
            "a 16-byte struct"
        );
        let e = slots_of(&[0u8; 3]).unwrap_err();
        assert_eq!(e.code, ACL_ERROR_INVALID_PARAM);
        assert!(e.msg.contains("PlaceHolder"), "{}", e.msg);
    }
}
