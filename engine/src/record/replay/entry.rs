//! One recorded call replayed: [`replay_entry`] rebuilds a call of the trace on every replica
//! of the device it concerns (the rule in the parent module's docs).

use super::*;
/// A declared access set from its record, addresses mapped by `ptr`.
fn declared_access(
    ranges: &[crate::record::AccessRecord],
    exact: bool,
    ptr: impl Fn(u64) -> u64,
) -> npusim_components::AccessSet {
    use npusim_components::access::Space;
    use npusim_components::{Access, AccessMode, AccessSet};
    let mut set = AccessSet::new();
    if !exact {
        set.mark_inexact();
    }
    for r in ranges {
        set.push(Access {
            addr: if r.peer { r.addr } else { ptr(r.addr) },
            bytes: r.bytes,
            mode: match r.mode {
                0 => AccessMode::Read,
                1 => AccessMode::Write,
                _ => AccessMode::ReadWrite,
            },
            space: if r.peer { Space::Peer } else { Space::Local },
        });
    }
    set
}

/// Replays one call, on every replica of the device it concerns.
pub(super) fn replay_entry(
    st: &mut State,
    trace: &Trace,
    thread: u32,
    call: &Call,
    index: usize,
    errors: &mut Vec<(usize, NpuError)>,
) -> NpuResult<()> {
    let mut note = |r: NpuResult<()>| {
        if let Err(e) = r {
            errors.push((index, e));
        }
    };
    // Calls on no device in particular.
    match call {
        Call::SetDevice { device } => {
            st.set_top(thread, CtxRef::Primary(*device));
            return Ok(());
        }
        Call::CurrentContext { ctx } => {
            let top = st.top(thread).unwrap_or(CtxRef::Primary(0));
            st.ctx_alias.insert(*ctx, top);
            return Ok(());
        }
        Call::SetCurrentContext { ctx } => {
            let c = st.resolve_ctx(*ctx)?;
            st.set_top(thread, c);
            return Ok(());
        }
        Call::PushContext { ctx } => {
            let c = st.resolve_ctx(*ctx)?;
            st.threads.entry(thread).or_default().push(c);
            return Ok(());
        }
        Call::PopContext => {
            st.threads.entry(thread).or_default().pop();
            return Ok(());
        }
        Call::HostWork { ns } => {
            st.rt.host_work(SimTime(*ns));
            st.calls += 1;
            return Ok(());
        }
        Call::ReadShape { ns } => {
            st.rt.lock().charge(*ns);
            st.calls += 1;
            return Ok(());
        }
        Call::RegisterKernel { name } => {
            st.kernel(name)?;
            return Ok(());
        }
        Call::MallocHost { size, host } => {
            st.calls += 1;
            let b = st.rt.memory().malloc_host(*size)?;
            st.hosts.insert(*host, b);
            return Ok(());
        }
        Call::FreeHost { host } => {
            st.calls += 1;
            let b = st
                .hosts
                .remove(host)
                .ok_or_else(|| unknown("host buffer", *host))?;
            note(st.rt.memory().free_host(&b));
            return Ok(());
        }
        Call::CommInit { devices, comm } => {
            st.calls += 1;
            let mut lanes: Vec<u32> = devices
                .iter()
                .flat_map(|&d| (0..st.replicas(d)).map(move |j| (d, j)))
                .map(|(d, j)| st.lane(d, j))
                .collect();
            lanes.sort_unstable();
            let handles = st.rt.collectives().init_all(&lanes)?;
            let by_device = lanes.iter().copied().zip(handles).collect();
            st.comms.insert(*comm, (devices.clone(), by_device));
            return Ok(());
        }
        Call::SetCoreLimits {
            device,
            cube,
            vector,
        } => {
            for j in st.replicas_here(*device) {
                st.calls += 1;
                note(
                    st.rt
                        .limits()
                        .set_core_limits(st.lane(*device, j), *cube, *vector),
                );
            }
            return Ok(());
        }
        Call::DeclaredAccess { ranges, exact } => {
            st.declared.insert(thread, (ranges.clone(), *exact));
            return Ok(());
        }
        Call::RegisterOp { name } => {
            st.calls += 1;
            let op = st.ops.remove(name).ok_or_else(|| {
                NpuError::KernelNotFound(format!(
                    "trace: the program registered op {name}, whose code a trace does not \
                     hold: give it in ReplayOptions::ops"
                ))
            })?;
            note(st.rt.ops().register(op).map(drop));
            return Ok(());
        }
        Call::RegisterNpuOps { functions } => {
            st.calls += 1;
            let k = |i: usize| -> NpuResult<Kernel> {
                let f = *functions.get(i).ok_or_else(|| {
                    NpuError::InvalidParam("trace: register_npu_ops names too few functions".into())
                })?;
                st.functions
                    .get(&(f, 0))
                    .copied()
                    .ok_or_else(|| unknown("function", f))
            };
            let functions = [k(0)?, k(1)?, k(2)?, k(3)?];
            note(st.rt.npu_ops_with(functions).map(drop));
            return Ok(());
        }
        Call::SetKernelTimeout { ns } => {
            st.calls += 1;
            note(st.rt.limits().set_kernel_timeout(SimTime(*ns)));
            return Ok(());
        }
        Call::SetKernelWallLimit { ns } => {
            st.calls += 1;
            st.rt
                .limits()
                .set_kernel_wall_limit(std::time::Duration::from_nanos(*ns));
            return Ok(());
        }
        Call::SetEventWaitTimeout { ns } => {
            st.calls += 1;
            st.rt.limits().set_event_wait_timeout(ns.map(SimTime));
            return Ok(());
        }
        Call::SetCallbackTimeout { ns } => {
            st.calls += 1;
            st.rt
                .set_callback_timeout(std::time::Duration::from_nanos(*ns));
            return Ok(());
        }
        _ => {}
    }
    // The device the call concerns: its stream's or event's, else the current context's.
    let device = match call {
        Call::DestroyStream { stream }
        | Call::SynchronizeStream { stream, .. }
        | Call::RecordEvent { stream, .. }
        | Call::StreamWaitEvent { stream, .. }
        | Call::StreamWaitEventRecord { stream, .. }
        | Call::CopyPeer { stream, .. }
        | Call::RecordStream { stream, .. }
        | Call::CopyHost { stream, .. }
        | Call::CopyDevice { stream, .. }
        | Call::Memset { stream, .. }
        | Call::Launch { stream, .. }
        | Call::HostFunc { stream }
        | Call::LaunchOp { stream, .. }
        | Call::Collective { stream, .. } => st.stream_dev(*stream)?,
        Call::DestroyEvent { event }
        | Call::SynchronizeEvent { event }
        | Call::SynchronizeEventTimeout { event, .. } => *st
            .event_device
            .get(event)
            .ok_or_else(|| unknown("event", *event))?,
        Call::CreateContext { device, .. } => *device,
        Call::DestroyContext { ctx } => st.ctx_device(st.resolve_ctx(*ctx)?)?,
        Call::CommDestroy { comm, rank } => {
            let (devices, _) = st
                .comms
                .get(comm)
                .ok_or_else(|| unknown("communicator", *comm))?;
            devices[*rank as usize]
        }
        _ => st.current_device(thread)?,
    };
    for j in st.replicas_here(device) {
        st.calls += 1;
        if !matches!(call, Call::CreateContext { .. }) {
            st.enter(thread, device, j)?;
        }
        match call {
            Call::CreateContext { device, ctx } => {
                let c = st.rt.contexts().create(st.lane(*device, j))?;
                st.contexts.insert((*ctx, j), c);
                st.ctx_device.insert(*ctx, *device);
                st.applied = Some((CtxRef::Made(*ctx), j));
                if j + 1 == st.replicas_here(*device).end {
                    st.set_top(thread, CtxRef::Made(*ctx));
                }
            }
            Call::DestroyContext { ctx } => {
                let id = match st.resolve_ctx(*ctx)? {
                    CtxRef::Made(id) => id,
                    CtxRef::Primary(_) => *ctx,
                };
                let c = *st
                    .contexts
                    .get(&(id, j))
                    .ok_or_else(|| unknown("context", id))?;
                note(st.rt.contexts().destroy(c));
                st.applied = None;
            }
            Call::CreateStream {
                stream,
                priority,
                kind,
            } => {
                let kind = crate::record::stream_kind(*kind)
                    .ok_or_else(|| NpuError::InvalidParam(format!("trace: stream kind {kind}")))?;
                let s = st.rt.streams().create_with(StreamConfig {
                    priority: *priority,
                    kind,
                })?;
                st.streams.insert((*stream, j), (s, device));
                st.stream_device.insert(*stream, device);
            }
            Call::DefaultStream { stream } => {
                let s = st.rt.contexts().default_stream()?;
                st.streams.insert((*stream, j), (s, device));
                st.stream_device.insert(*stream, device);
            }
            Call::DestroyStream { stream } => note(st.rt.streams().destroy(st.stream(*stream, j)?)),
            Call::SynchronizeStream { stream, timeout_ns } => {
                let s = st.stream(*stream, j)?;
                note(match timeout_ns {
                    Some(t) => st.rt.streams().synchronize_timeout(s, SimTime(*t)),
                    None => st.rt.streams().synchronize(s),
                })
            }
            Call::SynchronizeDevice => note(st.rt.synchronize_device()),
            Call::CreateEvent { event } => {
                let e = st.rt.events().create()?;
                st.events.insert((*event, j), e);
                st.event_device.insert(*event, device);
            }
            Call::DestroyEvent { event } => note(st.rt.events().destroy(st.event(*event, j)?)),
            Call::RecordEvent { event, stream } => note(
                st.rt
                    .events()
                    .record(st.event(*event, j)?, st.stream(*stream, j)?),
            ),
            Call::StreamWaitEvent { stream, event } => note(
                st.rt
                    .events()
                    .stream_wait(st.stream(*stream, j)?, st.event(*event, j)?),
            ),
            Call::SynchronizeEvent { event } => {
                note(st.rt.events().synchronize(st.event(*event, j)?))
            }
            Call::Malloc { size, policy, ptr } => {
                let policy = crate::record::policy(*policy).ok_or_else(|| {
                    NpuError::InvalidParam(format!("trace: allocation policy {policy}"))
                })?;
                match st.rt.memory().malloc_with_policy(*size, policy) {
                    Ok(p) => {
                        st.allocs
                            .entry((device, j))
                            .or_default()
                            .insert(*ptr, (*size, p.0));
                    }
                    Err(e) => note(Err(e)),
                }
            }
            Call::Free { ptr, stream } => {
                let p = DevicePtr(st.ptr(device, j, *ptr));
                if let Some(map) = st.allocs.get_mut(&(device, j)) {
                    map.remove(ptr);
                }
                note(match stream {
                    Some(s) => st.rt.memory().free_async(p, st.stream(*s, j)?),
                    None => st.rt.memory().free(p),
                })
            }
            Call::CopyHost {
                to_device,
                device: addr,
                host,
                offset,
                bytes,
                stream,
                data,
            } => {
                let buffer = match host {
                    HostSide::Pinned(id) => st
                        .hosts
                        .get(id)
                        .cloned()
                        .ok_or_else(|| unknown("host buffer", *id))?,
                    HostSide::Staged(len) => HostBuffer::new(*len as usize, false),
                };
                if let Some(h) = data
                    && let Some(b) = trace.blobs.get(h)
                {
                    buffer.write_at(*offset as usize, b)?;
                }
                let p = DevicePtr(st.ptr(device, j, *addr));
                let s = st.stream(*stream, j)?;
                note(if *to_device {
                    st.rt
                        .memory()
                        .memcpy_htod_async_at(p, &buffer, *offset, *bytes, s)
                } else {
                    st.rt
                        .memory()
                        .memcpy_dtoh_async_at(&buffer, *offset, p, *bytes, s)
                })
            }
            Call::CopyDevice {
                dst,
                src,
                bytes,
                stream,
            } => note(st.rt.memory().memcpy_dtod_async(
                DevicePtr(st.ptr(device, j, *dst)),
                DevicePtr(st.ptr(device, j, *src)),
                *bytes,
                st.stream(*stream, j)?,
            )),
            Call::Memset {
                dst,
                value,
                bytes,
                stream,
            } => note(st.rt.memory().memset_async(
                DevicePtr(st.ptr(device, j, *dst)),
                *value,
                *bytes,
                st.stream(*stream, j)?,
            )),
            Call::LoadBinary { binary, hash } => {
                let bytes = trace.blobs.get(hash).ok_or_else(|| {
                    NpuError::InvalidParam(format!("trace: binary {binary} has no content"))
                })?;
                let b = st.rt.binaries().load(bytes)?;
                st.binaries.insert((*binary, j), b);
            }
            Call::GetFunction {
                binary,
                name,
                function,
            } => {
                let b = *st
                    .binaries
                    .get(&(*binary, j))
                    .ok_or_else(|| unknown("binary", *binary))?;
                let k = st.rt.binaries().get_function(b, name)?;
                st.functions.insert((*function, j), k);
            }
            Call::UnloadBinary { binary } => {
                let b = *st
                    .binaries
                    .get(&(*binary, j))
                    .ok_or_else(|| unknown("binary", *binary))?;
                note(st.rt.binaries().unload(b))
            }
            Call::Launch {
                kernel,
                block_dim,
                args,
                tiling,
                stream,
                timeout_ns,
                cost,
                binary,
            } => {
                let k = match kernel {
                    KernelRef::Native(id) => st.kernel(kernel_name(trace, *id)?)?,
                    KernelRef::Function(f) => *st
                        .functions
                        .get(&(*f, j))
                        .ok_or_else(|| unknown("function", *f))?,
                };
                let args: Vec<Arg> = args.iter().map(|a| st.arg(device, j, *a)).collect();
                if let (KernelRef::Native(id), Some(c)) = (kernel, cost)
                    && st.stand_ins.contains(kernel_name(trace, *id)?)
                {
                    let words = args.iter().map(|a| a.word()).collect();
                    st.stand_in_costs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert((words, *block_dim), *c);
                }
                let s = st.stream(*stream, j)?;
                // The typed launch builder's access set, its addresses in this replica.
                let access = st.declared.get(&thread).map(|(ranges, exact)| {
                    Box::new(declared_access(ranges, *exact, |a| st.ptr(device, j, a)))
                });
                if j + 1 == st.replicas_here(device).end {
                    st.declared.remove(&thread);
                }
                let timeout = timeout_ns.map(SimTime);
                let launched = match (timeout, access) {
                    (Some(SimTime(0)), _) => Err(NpuError::InvalidParam(
                        "trace: a launch timeout of 0".into(),
                    )),
                    (timeout, access) => st
                        .rt
                        .submit(
                            Launch::new(k, *block_dim, &args, s)
                                .tiling(tiling)
                                .timeout(timeout)
                                .declared(access),
                        )
                        .map(drop),
                };
                // Timing-only: the binary launch is priced from what it did when recorded.
                if let (true, Ok(()), Some(b)) = (st.timing_only, &launched, binary) {
                    let run = npusim_components::mode::BinaryRun {
                        block_cycles: b.block_cycles.clone(),
                        hbm_bytes: b.hbm_bytes,
                        access: b
                            .access
                            .iter()
                            .map(|&(a, n)| (st.ptr(device, j, a), n))
                            .collect(),
                    };
                    st.rt.price_next_from(s, run)?;
                }
                note(launched)
            }
            Call::HostFunc { stream } => {
                let s = st.stream(*stream, j)?;
                let cb = st.callbacks.clone();
                let calls = cb.ids.get(&index).and_then(|id| cb.calls.get(id));
                match (calls, &cb.trace) {
                    (Some(calls), Some(trace)) => {
                        // The callback makes the calls the recorded one made, on its thread.
                        let ctx = st.top(thread).unwrap_or(CtxRef::Primary(0));
                        let mut local = st.for_callback(j, ctx, calls);
                        let (calls, trace, shared) = (calls.clone(), trace.clone(), cb.clone());
                        note(
                            st.rt
                                .submit(HostFunc::new(s, move || {
                                    // Gone: nothing to replay into.
                                    let Some(rt) = std::mem::replace(
                                        &mut local.rt,
                                        Rt::Weak(Default::default()),
                                    )
                                    .into_runtime() else {
                                        return;
                                    };
                                    local.rt = Rt::Strong(rt);
                                    let mut errors = Vec::new();
                                    for (i, t, call) in calls.iter() {
                                        if let Err(e) = replay_entry(
                                            &mut local,
                                            &trace,
                                            *t,
                                            call,
                                            *i,
                                            &mut errors,
                                        ) {
                                            errors.push((*i, e));
                                        }
                                    }
                                    shared
                                        .errors
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .extend(errors);
                                }))
                                .map(drop),
                        )
                    }
                    _ => note(st.rt.submit(HostFunc::new(s, || {})).map(drop)),
                }
            }
            Call::CreateShape { shape } => {
                let h = st.rt.ops().create_shape()?;
                st.shapes.insert((*shape, j), h);
            }
            Call::FreeShape { shape } => {
                let h = st
                    .shapes
                    .remove(&(*shape, j))
                    .ok_or_else(|| unknown("shape", *shape))?;
                note(st.rt.ops().free_shape(h))
            }
            Call::LaunchOp {
                op,
                inputs,
                outputs,
                attrs,
                stream,
                published,
            } => {
                let k = st.rt.ops().get(op)?;
                let tensor = |t: &TensorRecord| -> NpuResult<TensorArg> {
                    let p = DevicePtr(st.ptr(device, j, t.ptr));
                    Ok(match &t.shape {
                        ShapeRecord::Static(d) => TensorArg::new(p, d),
                        ShapeRecord::Dynamic(id) => TensorArg::dynamic(
                            p,
                            *st.shapes
                                .get(&(*id, j))
                                .ok_or_else(|| unknown("shape", *id))?,
                        ),
                        ShapeRecord::Inferred => TensorArg::output(p),
                    })
                };
                let ins = inputs.iter().map(tensor).collect::<NpuResult<Vec<_>>>()?;
                let outs = outputs.iter().map(tensor).collect::<NpuResult<Vec<_>>>()?;
                let attrs: Vec<Arg> = attrs.iter().map(|a| st.arg(device, j, *a)).collect();
                let s = st.stream(*stream, j)?;
                let launched = st.rt.submit(LaunchOp::new(k, &ins, &outs, &attrs, s));
                // Timing-only: the data-dependent output's shape is the recorded one.
                if let (true, Ok(_), Some(bytes)) = (st.timing_only, &launched, published) {
                    st.rt.publish_next_from(s, bytes.clone())?;
                }
                note(launched.map(drop))
            }
            Call::CommDestroy { comm, rank } => {
                let (devices, by_device) = st
                    .comms
                    .get(comm)
                    .ok_or_else(|| unknown("communicator", *comm))?;
                let lane = st.lane(devices[*rank as usize], j);
                if let Some(c) = by_device.get(&lane) {
                    note(st.rt.collectives().destroy(*c))
                }
            }
            Call::Collective {
                kind,
                dtype,
                op,
                count,
                peer,
                send,
                recv,
                comm,
                rank,
                stream,
            } => {
                let (devices, by_device) = st
                    .comms
                    .get(comm)
                    .ok_or_else(|| unknown("communicator", *comm))?;
                let lane = st.lane(devices[*rank as usize], j);
                let c = by_device
                    .get(&lane)
                    .cloned()
                    .ok_or_else(|| unknown("communicator", *comm))?;
                let bad = |what: &str, v: u32| NpuError::InvalidParam(format!("trace: {what} {v}"));
                let kind =
                    CollectiveKind::from_u32(*kind).ok_or_else(|| bad("collective", *kind))?;
                // A point-to-point partner is the same replica's; a root is replica 0's (every
                // rank of a collective names the same root).
                let replica = if kind.is_p2p() { j } else { 0 };
                let peer_lane = devices.get(*peer as usize).map_or(0, |&d| {
                    st.lane(d, replica.min(st.replicas(d).saturating_sub(1)))
                });
                let peer = by_device.keys().position(|&d| d == peer_lane).unwrap_or(0) as u32;
                let side = |s: &CommSide| -> NpuResult<Option<CommBuffer>> {
                    Ok(match s {
                        CommSide::None => None,
                        CommSide::Device(a) => {
                            Some(CommBuffer::Device(DevicePtr(st.ptr(device, j, *a))))
                        }
                        CommSide::Host(id) => Some(CommBuffer::Host(
                            st.hosts
                                .get(id)
                                .cloned()
                                .ok_or_else(|| unknown("host buffer", *id))?,
                        )),
                    })
                };
                let dtype = DataType::from_u32(*dtype).ok_or_else(|| bad("data type", *dtype))?;
                let op = ReduceOp::from_u32(*op).ok_or_else(|| bad("reduction", *op))?;
                let (send, recv) = (side(send)?, side(recv)?);
                let s = st.stream(*stream, j)?;
                let what = crate::collective::CollectiveOp {
                    kind,
                    dtype,
                    op,
                    count: *count,
                    peer,
                    send,
                    recv,
                };
                note(st.rt.enqueue_collective(&c, s, what).map(drop))
            }
            Call::StreamWaitEventRecord {
                stream,
                event,
                record,
                timeout_ns,
            } => note(st.rt.events().stream_wait_record(
                st.stream(*stream, j)?,
                st.event(*event, j)?,
                *record,
                timeout_ns.map(SimTime),
            )),
            Call::CopyPeer {
                dst,
                dst_device,
                src,
                src_device,
                bytes,
                stream,
            } => {
                // The peer's replica is this one's (or its last, on fewer devices).
                let lane_of = |d: u32| (d, j.min(st.replicas(d).saturating_sub(1)));
                let (dd, dj) = lane_of(*dst_device);
                let (sd, sj) = lane_of(*src_device);
                note(st.rt.collectives().memcpy_peer_async(
                    DevicePtr(st.ptr(dd, dj, *dst)),
                    st.lane(dd, dj),
                    DevicePtr(st.ptr(sd, sj, *src)),
                    st.lane(sd, sj),
                    *bytes,
                    st.stream(*stream, j)?,
                ))
            }
            Call::RecordStream { ptr, stream } => note(
                st.rt
                    .memory()
                    .record_stream(DevicePtr(st.ptr(device, j, *ptr)), st.stream(*stream, j)?),
            ),
            Call::TrimMemory => note(st.rt.memory().trim().map(drop)),
            Call::SetFailureMode { mode } => {
                let mode = crate::record::failure_mode(*mode)
                    .ok_or_else(|| NpuError::InvalidParam(format!("trace: failure mode {mode}")))?;
                note(st.rt.contexts().set_failure_mode(mode))
            }
            Call::SynchronizeEventTimeout {
                event, timeout_ns, ..
            } => note(
                st.rt
                    .events()
                    .synchronize_timeout(st.event(*event, j)?, SimTime(*timeout_ns)),
            ),
            Call::SynchronizeDeviceTimeout { timeout_ns, .. } => {
                note(st.rt.synchronize_device_timeout(SimTime(*timeout_ns)))
            }
            // Handled above (and, inside callbacks, by the replayed callback).
            Call::InCallback { .. }
            | Call::DeclaredAccess { .. }
            | Call::RegisterOp { .. }
            | Call::RegisterNpuOps { .. }
            | Call::SetCoreLimits { .. }
            | Call::SetKernelTimeout { .. }
            | Call::SetKernelWallLimit { .. }
            | Call::SetEventWaitTimeout { .. }
            | Call::SetCallbackTimeout { .. }
            | Call::SetDevice { .. }
            | Call::CurrentContext { .. }
            | Call::SetCurrentContext { .. }
            | Call::PushContext { .. }
            | Call::PopContext
            | Call::HostWork { .. }
            | Call::ReadShape { .. }
            | Call::RegisterKernel { .. }
            | Call::MallocHost { .. }
            | Call::FreeHost { .. }
            | Call::CommInit { .. } => {}
        }
    }
    Ok(())
}
