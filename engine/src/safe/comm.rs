//! [`NpuComm`]: one rank of a communicator as a value that knows its stream, with the
//! collectives as methods on typed buffers (cudarc's `nccl::Comm`). Counts come from the
//! buffers' lengths and the element type picks the data type, so a collective cannot mix
//! `f32` and `f16` or overrun a buffer. The rules of the collectives themselves (rendezvous,
//! timing, data movement) live in `crate::collective` and the frame's collective system.

use crate::{Collective, HostFunc};
use std::sync::Arc;

use npusim_components::{NpuError, NpuResult};

use super::stream::same_context;
use super::{DeviceSlice, DeviceSliceMut, NpuStream, PinnedBuffer};
use crate::{CommConfig, Communicator, DataType, ReduceOp};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for half::f16 {}
}

/// An element type the collectives reduce and move (`HcclDataType`): `f32`, [`half::f16`] and
/// `i32`. Sealed.
pub trait CommElement: bytemuck::Pod + sealed::Sealed {
    /// Its data type.
    const DTYPE: DataType;
}

impl CommElement for f32 {
    const DTYPE: DataType = DataType::F32;
}

impl CommElement for half::f16 {
    const DTYPE: DataType = DataType::F16;
}

impl CommElement for i32 {
    const DTYPE: DataType = DataType::I32;
}

struct CommInner {
    stream: NpuStream,
    raw: Communicator,
}

impl Drop for CommInner {
    fn drop(&mut self) {
        if self.stream.context().epoch().is_none() {
            return; // the context went; the rank's handle is only a handle
        }
        // In stream order: the rank's handle goes once its stream has run the collectives
        // enqueued on it, which need the communicator (the last rank's destroy removes it).
        // The callback holds the runtime weakly: queued work must not keep its own world alive.
        let (weak, raw) = (self.stream.context().runtime().weak(), self.raw);
        let destroy = move || {
            if let Some(shared) = weak.upgrade() {
                let rt = crate::Runtime::from_shared(shared);
                if let Err(e) = rt.collectives().destroy(raw) {
                    rt.keep_drop_error(e);
                }
            }
        };
        let rt = self.stream.context().runtime();
        let s = self.stream.raw();
        if self.stream.query().unwrap_or(false) {
            destroy(); // nothing queued on the rank's stream
        } else if self
            .stream
            .context()
            .with(|rt| rt.submit(HostFunc::new(s, destroy)))
            .is_err()
        {
            // A stream that takes no more work (its context faulted): nothing queued on it
            // will run either, so the handle can go now.
            if let Err(e) = rt.collectives().destroy(raw) {
                rt.keep_drop_error(e);
            }
        }
    }
}

/// One rank of a communicator, with the stream its collectives are enqueued on
/// ([`NpuComm::from_streams`]). Cheap to clone (clones share the rank), `Send + Sync`. The
/// last clone's drop destroys the rank's handle (`HcclCommDestroy`) in stream order, once the
/// rank's stream has run what was enqueued on it (a host callback on the stream does it; at
/// once when nothing is queued there), so collectives already enqueued still run; the buffers
/// they use stay allocated until they have (a buffer's drop frees in stream order). The
/// communicator goes with its last rank.
///
/// ```
/// use npusim_engine::prelude::*;
/// use npusim_engine::ReduceOp;
///
/// let rt = Runtime::new(RuntimeConfig { devices: 2, ..RuntimeConfig::default() })?;
/// let streams = vec![rt.device_context(0)?.stream()?, rt.device_context(1)?.stream()?];
/// let comms = NpuComm::from_streams(&streams)?;
/// let mut sums = Vec::new();
/// for comm in &comms {
///     let rank = comm.rank() as f32;
///     let send = comm.stream().clone_htod(&[rank + 1.0; 4])?;
///     let mut recv = comm.stream().context().alloc::<f32>(4)?;
///     comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
///     sums.push(recv);
/// }
/// for (comm, recv) in comms.iter().zip(&sums) {
///     assert_eq!(comm.stream().clone_dtoh(recv)?, [3.0; 4]); // 1 + 2 on every rank
/// }
/// # Ok::<(), NpuError>(())
/// ```
///
/// The element type is checked at compile time:
///
/// ```compile_fail
/// use npusim_engine::prelude::*;
/// use npusim_engine::{ReduceOp, half::f16};
/// fn f(c: &NpuComm, xs: &DeviceBuffer<f32>, ys: &mut DeviceBuffer<f16>) -> NpuResult<()> {
///     c.all_reduce(xs, ys, ReduceOp::Sum) // f32 where f16 is expected
/// }
/// ```
///
/// and so is what can be reduced at all (`u16` is not a collective's data type):
///
/// ```compile_fail
/// use npusim_engine::prelude::*;
/// use npusim_engine::ReduceOp;
/// fn f(comm: &NpuComm, a: &DeviceBuffer<u16>, b: &mut DeviceBuffer<u16>) -> NpuResult<()> {
///     comm.all_reduce(a, b, ReduceOp::Sum)
/// }
/// ```
#[derive(Clone)]
pub struct NpuComm {
    inner: Arc<CommInner>,
}

impl std::fmt::Debug for NpuComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuComm({}, {:?})", self.inner.raw, self.inner.stream)
    }
}

fn at_least(what: &str, have: usize, need: usize) -> NpuResult<()> {
    if have < need {
        return Err(NpuError::InvalidParam(format!(
            "the {what} has {have} elements; the collective needs {need}"
        )));
    }
    Ok(())
}

impl NpuComm {
    /// A communicator with one rank per stream (rank `r` on `streams[r]`'s device), as
    /// `HcclCommInitAll`; each rank's collectives are enqueued on its stream. The streams must
    /// be on distinct devices of one runtime (usually
    /// [`StreamKind::Communication`](crate::StreamKind) streams).
    #[track_caller]
    pub fn from_streams(streams: &[NpuStream]) -> NpuResult<Vec<NpuComm>> {
        let _site = crate::sanitizer::SiteGuard::here();
        Self::from_streams_with(streams, CommConfig::default())
    }

    /// As [`NpuComm::from_streams`], with an algorithm and a rendezvous timeout.
    #[track_caller]
    pub fn from_streams_with(streams: &[NpuStream], config: CommConfig) -> NpuResult<Vec<NpuComm>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let Some(first) = streams.first() else {
            return Err(NpuError::InvalidParam(
                "a communicator needs at least one stream".into(),
            ));
        };
        let rt = first.context().runtime();
        if let Some(s) = streams
            .iter()
            .find(|s| s.context().runtime().id() != rt.id())
        {
            return Err(NpuError::ForeignHandle(format!("{s:?}")));
        }
        let devices: Vec<u32> = streams.iter().map(|s| s.context().device()).collect();
        let ranks = rt.collectives().init_all_with(&devices, config)?;
        Ok(ranks
            .into_iter()
            .zip(streams)
            .map(|(raw, stream)| NpuComm {
                inner: Arc::new(CommInner {
                    stream: stream.clone(),
                    raw,
                }),
            })
            .collect())
    }

    /// A communicator with one rank per device (rank `r` on `devices[r]`), each on a new
    /// [`StreamKind::Communication`](crate::StreamKind) stream of the device's primary context
    /// (so its collectives overlap that context's compute streams when events allow).
    #[track_caller]
    pub fn from_devices(devices: &[super::NpuDevice]) -> NpuResult<Vec<NpuComm>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let streams = devices
            .iter()
            .map(|d| {
                d.context()?.stream_with(crate::StreamConfig {
                    kind: crate::StreamKind::Communication,
                    ..crate::StreamConfig::default()
                })
            })
            .collect::<NpuResult<Vec<_>>>()?;
        Self::from_streams(&streams)
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.inner.raw.rank()
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u32 {
        self.inner.raw.size()
    }

    /// The stream this rank's collectives are enqueued on.
    pub fn stream(&self) -> &NpuStream {
        &self.inner.stream
    }

    /// The raw handle, for the ACL-style methods (do not destroy it through them: the value
    /// owns it).
    pub fn raw(&self) -> &Communicator {
        &self.inner.raw
    }

    /// The error that broke the communicator (a rank that timed out at a rendezvous), if any.
    pub fn error(&self) -> NpuResult<Option<NpuError>> {
        self.inner
            .stream
            .context()
            .runtime()
            .collectives()
            .error(&self.inner.raw)
    }

    fn enqueue(
        &self,
        f: impl FnOnce(&crate::Runtime, &Communicator, npusim_components::Stream) -> NpuResult<()>,
    ) -> NpuResult<()> {
        let raw = self.inner.stream.raw();
        self.inner
            .stream
            .context()
            .with(|rt| f(rt, &self.inner.raw, raw))
    }

    /// Enqueues this rank's part of an all-reduce (`HcclAllReduce`): every rank's `recv` gets
    /// the element-wise `op` of every rank's `send`, all `send.len()` elements (`recv` must
    /// hold as many).
    #[track_caller]
    pub fn all_reduce<T: CommElement>(
        &self,
        send: &(impl DeviceSlice<T> + ?Sized),
        recv: &mut (impl DeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), send)?;
        same_context(self.stream().context(), recv)?;
        at_least("receive buffer", recv.len(), send.len())?;
        let (s, r, n) = (send.device_ptr(), recv.device_ptr(), send.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::all_reduce(s, r, n, T::DTYPE, op).on(c, st))
                .map(drop)
        })
    }

    /// As [`NpuComm::all_reduce`], in place: `buf` is both sent and received.
    #[track_caller]
    pub fn all_reduce_in_place<T: CommElement>(
        &self,
        buf: &mut (impl DeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), buf)?;
        let (p, n) = (buf.device_ptr(), buf.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::all_reduce(p, p, n, T::DTYPE, op).on(c, st))
                .map(drop)
        })
    }

    /// Enqueues this rank's part of an all-gather (`HcclAllGather`): every rank's `recv` gets
    /// every rank's `send` (all `send.len()` elements) in rank order; `recv` must hold
    /// `send.len() × world_size()`.
    #[track_caller]
    pub fn all_gather<T: CommElement>(
        &self,
        send: &(impl DeviceSlice<T> + ?Sized),
        recv: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), send)?;
        same_context(self.stream().context(), recv)?;
        let need = send.len().saturating_mul(self.world_size() as usize);
        at_least("receive buffer", recv.len(), need)?;
        let (s, r, n) = (send.device_ptr(), recv.device_ptr(), send.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::all_gather(s, r, n, T::DTYPE).on(c, st))
                .map(drop)
        })
    }

    /// Enqueues this rank's part of a reduce-scatter (`HcclReduceScatter`): rank `r`'s `recv`
    /// (all `recv.len()` elements) gets block `r` of the element-wise `op` of every rank's
    /// `send`, which must hold `recv.len() × world_size()`.
    #[track_caller]
    pub fn reduce_scatter<T: CommElement>(
        &self,
        send: &(impl DeviceSlice<T> + ?Sized),
        recv: &mut (impl DeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), send)?;
        same_context(self.stream().context(), recv)?;
        let need = recv.len().saturating_mul(self.world_size() as usize);
        at_least("send buffer", send.len(), need)?;
        let (s, r, n) = (send.device_ptr(), recv.device_ptr(), recv.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::reduce_scatter(s, r, n, T::DTYPE, op).on(c, st))
                .map(drop)
        })
    }

    /// Enqueues this rank's part of a broadcast (`HcclBroadcast`): every rank's `buf` (all
    /// `buf.len()` elements) gets rank `root`'s.
    #[track_caller]
    pub fn broadcast<T: CommElement>(
        &self,
        buf: &mut (impl DeviceSliceMut<T> + ?Sized),
        root: u32,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), buf)?;
        let (p, n) = (buf.device_ptr(), buf.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::broadcast(p, n, T::DTYPE, root).on(c, st))
                .map(drop)
        })
    }

    /// Enqueues sending all of `buf` to rank `peer` (`HcclSend`); it pairs with the peer's
    /// matching [`NpuComm::recv`] (the k-th send to a peer with its k-th receive from this
    /// rank), which must receive as many elements.
    #[track_caller]
    pub fn send<T: CommElement>(
        &self,
        buf: &(impl DeviceSlice<T> + ?Sized),
        peer: u32,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), buf)?;
        let (p, n) = (buf.device_ptr(), buf.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::send(p, n, T::DTYPE, peer).on(c, st))
                .map(drop)
        })
    }

    /// As [`NpuComm::send`], from pinned host memory: the interconnect reads it directly (as
    /// RDMA does) when the send runs.
    #[track_caller]
    pub fn send_pinned<T: CommElement>(&self, buf: &PinnedBuffer<T>, peer: u32) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        let (h, n) = (buf.as_raw().clone(), buf.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::send(h, n, T::DTYPE, peer).on(c, st))
                .map(drop)
        })
    }

    /// As [`NpuComm::recv`], into pinned host memory (read it once the stream, or an event
    /// recorded after the receive, has been synchronized).
    #[track_caller]
    pub fn recv_pinned<T: CommElement>(&self, buf: &PinnedBuffer<T>, peer: u32) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        let (h, n) = (buf.as_raw().clone(), buf.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::recv(h, n, T::DTYPE, peer).on(c, st))
                .map(drop)
        })
    }

    /// Enqueues receiving `buf.len()` elements from rank `peer` into `buf` (`HcclRecv`).
    #[track_caller]
    pub fn recv<T: CommElement>(
        &self,
        buf: &mut (impl DeviceSliceMut<T> + ?Sized),
        peer: u32,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(self.stream().context(), buf)?;
        let (p, n) = (buf.device_ptr(), buf.len() as u64);
        self.enqueue(|rt, c, st| {
            rt.submit(Collective::recv(p, n, T::DTYPE, peer).on(c, st))
                .map(drop)
        })
    }
}
