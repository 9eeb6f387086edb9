//! The AI core's pipes and the flags between them. Every NPU instruction is queued on one pipe;
//! a pipe runs its instructions in order, each starting when the pipe is free, the pipe's last
//! wait has been released, and the scalar unit has issued it. The scalar unit does not wait
//! for anything it has not been told to: synchronization is explicit.
//!
//! Time is the scalar unit's cycle count. For each pipe this module tracks when it is next
//! free, when everything issued to it has completed, and the gate set by the last
//! `wait_flag` / `pipe_barrier` on it. A flag `(src, dst, event)` is a queue of release times:
//! `set_flag` pushes the time at which everything issued to `src` so far has completed,
//! `wait_flag` pops the oldest and holds `dst` (or stalls the scalar unit, for `dst = S`)
//! until then.

use super::fault::NpuFault;

/// One of the AI core's pipes. The numbers are the instruction encoding (and Ascend's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Pipe {
    /// The scalar unit itself.
    S = 0,
    /// The vector unit.
    V = 1,
    /// The cube (matrix) unit.
    M = 2,
    /// The L1 → L0A/L0B data mover.
    Mte1 = 3,
    /// The global memory → L1/UB data mover.
    Mte2 = 4,
    /// The UB/L0C → global memory data mover.
    Mte3 = 5,
}

/// The `pipe_barrier` operand meaning every pipe (and the scalar unit waits too).
pub const PIPE_ALL: u8 = 6;
/// Number of pipes.
pub const PIPES: usize = 6;
/// Event ids per (source, destination) pipe pair.
pub const EVENTS: usize = 8;
/// Unconsumed `set_flag`s one flag can hold.
pub const FLAG_DEPTH: usize = 8;
/// The largest queue depth [`NpuTiming::queue_depth`](super::NpuTiming) may ask for.
pub const MAX_QUEUE_DEPTH: usize = 64;

impl Pipe {
    /// All pipes, by number.
    pub const ALL: [Pipe; PIPES] = [
        Pipe::S,
        Pipe::V,
        Pipe::M,
        Pipe::Mte1,
        Pipe::Mte2,
        Pipe::Mte3,
    ];

    /// The pipe numbered `n`.
    pub fn from_number(n: u64) -> Option<Pipe> {
        Pipe::ALL.get(usize::try_from(n).ok()?).copied()
    }

    /// The name used in docs and messages.
    pub const fn name(self) -> &'static str {
        match self {
            Pipe::S => "S",
            Pipe::V => "V",
            Pipe::M => "M",
            Pipe::Mte1 => "MTE1",
            Pipe::Mte2 => "MTE2",
            Pipe::Mte3 => "MTE3",
        }
    }
}

impl std::fmt::Display for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Cycles per pipe: how long each unit was busy during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PipeCycles {
    /// Scalar unit: instruction cycles, stalls excluded.
    pub scalar: u64,
    /// Vector unit.
    pub vector: u64,
    /// Cube unit.
    pub cube: u64,
    /// L1 → L0 mover.
    pub mte1: u64,
    /// GM → local mover.
    pub mte2: u64,
    /// Local → GM mover.
    pub mte3: u64,
}

impl PipeCycles {
    /// The cycles of `pipe`.
    pub fn get(&self, pipe: Pipe) -> u64 {
        match pipe {
            Pipe::S => self.scalar,
            Pipe::V => self.vector,
            Pipe::M => self.cube,
            Pipe::Mte1 => self.mte1,
            Pipe::Mte2 => self.mte2,
            Pipe::Mte3 => self.mte3,
        }
    }

    fn slot(&mut self, pipe: Pipe) -> &mut u64 {
        match pipe {
            Pipe::S => &mut self.scalar,
            Pipe::V => &mut self.vector,
            Pipe::M => &mut self.cube,
            Pipe::Mte1 => &mut self.mte1,
            Pipe::Mte2 => &mut self.mte2,
            Pipe::Mte3 => &mut self.mte3,
        }
    }

    /// Adds `other` pipe by pipe.
    pub fn add(&mut self, other: &PipeCycles) {
        for p in Pipe::ALL {
            *self.slot(p) += other.get(p);
        }
    }
}

#[derive(Clone, Copy)]
struct PipeState {
    /// The next instruction starts no earlier than this.
    free_at: u64,
    /// Everything issued so far has completed by this.
    done_at: u64,
    /// Released by the last wait or barrier on this pipe.
    gate: u64,
    /// Instructions issued.
    issued: u64,
    /// Start times of the last `MAX_QUEUE_DEPTH` instructions, by issue number.
    starts: [u64; MAX_QUEUE_DEPTH],
}

const IDLE: PipeState = PipeState {
    free_at: 0,
    done_at: 0,
    gate: 0,
    issued: 0,
    starts: [0; MAX_QUEUE_DEPTH],
};

#[derive(Clone, Copy, Default)]
struct Flag {
    times: [u64; FLAG_DEPTH],
    head: u8,
    len: u8,
}

/// When an issued instruction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// It reads its operands at this cycle.
    pub start: u64,
    /// Its results are visible from this cycle.
    pub done: u64,
}

/// The timing state of all pipes and flags of one core.
pub(crate) struct Pipes {
    pipes: [PipeState; PIPES],
    flags: Box<[Flag; PIPES * PIPES * EVENTS]>,
    depth: u64,
    busy: PipeCycles,
}

impl Pipes {
    pub fn new(queue_depth: u32) -> Pipes {
        Pipes {
            pipes: [IDLE; PIPES],
            flags: Box::new([Flag::default(); PIPES * PIPES * EVENTS]),
            depth: queue_depth.clamp(1, MAX_QUEUE_DEPTH as u32) as u64,
            busy: PipeCycles::default(),
        }
    }

    pub fn reset(&mut self) {
        self.pipes = [IDLE; PIPES];
        for f in self.flags.iter_mut() {
            f.len = 0;
            f.head = 0;
        }
        self.busy = PipeCycles::default();
    }

    /// The earliest cycle at or after `now` when the scalar unit can put one more instruction
    /// in `pipe`'s queue: the instruction `depth` places ahead must have started.
    pub fn issue_time(&self, pipe: Pipe, now: u64) -> u64 {
        let p = &self.pipes[pipe as usize];
        if p.issued >= self.depth {
            let i = ((p.issued - self.depth) % MAX_QUEUE_DEPTH as u64) as usize;
            now.max(p.starts[i])
        } else {
            now
        }
    }

    /// Queues an instruction issued at `issue` that occupies `pipe` for `occupancy` cycles
    /// and completes `extra` cycles after that.
    pub fn schedule(&mut self, pipe: Pipe, issue: u64, occupancy: u64, extra: u64) -> Slot {
        let occupancy = occupancy.max(1);
        let p = &mut self.pipes[pipe as usize];
        let start = issue.max(p.free_at).max(p.gate);
        p.free_at = start + occupancy;
        let done = start + occupancy + extra;
        p.done_at = p.done_at.max(done);
        p.starts[(p.issued % MAX_QUEUE_DEPTH as u64) as usize] = start;
        p.issued += 1;
        *self.busy.slot(pipe) += occupancy;
        Slot { start, done }
    }

    fn flag_index(src: Pipe, dst: Pipe, event: u8) -> usize {
        (src as usize * PIPES + dst as usize) * EVENTS + event as usize
    }

    /// Decodes a packed flag operand: `src | dst << 8 | event << 16`.
    pub fn flag_operand(what: &'static str, v: u64) -> Result<(Pipe, Pipe, u8), NpuFault> {
        let bad = || NpuFault::BadPipe { what, value: v };
        let src = Pipe::from_number(v & 0xff).ok_or_else(bad)?;
        let dst = Pipe::from_number((v >> 8) & 0xff).ok_or_else(bad)?;
        if src == dst {
            return Err(bad());
        }
        let event = v >> 16;
        if event >= EVENTS as u64 {
            return Err(NpuFault::BadEvent { event, max: EVENTS });
        }
        Ok((src, dst, event as u8))
    }

    /// When a signal from `src` issued at `now` is released: once everything issued to `src`
    /// has completed (at once for `src = S`).
    pub fn released_at(&self, src: Pipe, now: u64) -> u64 {
        if src == Pipe::S {
            now
        } else {
            let p = &self.pipes[src as usize];
            now.max(p.done_at).max(p.gate)
        }
    }

    /// `set_flag(src, dst, event)` issued at `now`: the flag is released when everything
    /// issued to `src` has completed (at once for `src = S`).
    pub fn set_flag(&mut self, src: Pipe, dst: Pipe, event: u8, now: u64) -> Result<(), NpuFault> {
        let at = self.released_at(src, now);
        let f = &mut self.flags[Self::flag_index(src, dst, event)];
        if f.len as usize == FLAG_DEPTH {
            return Err(NpuFault::FlagOverflow {
                src,
                dst,
                event,
                depth: FLAG_DEPTH,
            });
        }
        f.times[(f.head as usize + f.len as usize) % FLAG_DEPTH] = at;
        f.len += 1;
        Ok(())
    }

    /// `wait_flag(src, dst, event)`: consumes the oldest set. For `dst = S` returns the cycle
    /// the scalar unit must wait for; otherwise gates `dst`.
    pub fn wait_flag(&mut self, src: Pipe, dst: Pipe, event: u8) -> Result<Option<u64>, NpuFault> {
        let f = &mut self.flags[Self::flag_index(src, dst, event)];
        if f.len == 0 {
            return Err(NpuFault::WaitWithoutSet { src, dst, event });
        }
        let at = f.times[f.head as usize];
        f.head = ((f.head as usize + 1) % FLAG_DEPTH) as u8;
        f.len -= 1;
        if dst == Pipe::S {
            return Ok(Some(at));
        }
        let p = &mut self.pipes[dst as usize];
        p.gate = p.gate.max(at);
        Ok(None)
    }

    /// `pipe_barrier(pipe)`: later instructions of `pipe` wait for all earlier ones. For
    /// [`PIPE_ALL`] every pipe drains and the returned cycle is when the scalar unit resumes.
    pub fn barrier(&mut self, pipe: u64) -> Result<Option<u64>, NpuFault> {
        if pipe == PIPE_ALL as u64 {
            let t = self.finish_time();
            for p in &mut self.pipes {
                p.gate = p.gate.max(t);
            }
            return Ok(Some(t));
        }
        let pipe = Pipe::from_number(pipe).ok_or(NpuFault::BadPipe {
            what: "pipe_barrier",
            value: pipe,
        })?;
        let p = &mut self.pipes[pipe as usize];
        p.gate = p.gate.max(p.done_at);
        Ok(None)
    }

    /// When everything issued so far has completed.
    pub fn finish_time(&self) -> u64 {
        self.pipes.iter().map(|p| p.done_at).max().unwrap_or(0)
    }

    /// Busy cycles of the asynchronous pipes (the scalar entry is left 0).
    pub fn busy(&self) -> PipeCycles {
        self.busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_runs_in_order_and_overlaps_with_others() {
        let mut p = Pipes::new(32);
        let a = p.schedule(Pipe::Mte2, 0, 100, 50);
        let b = p.schedule(Pipe::Mte2, 1, 100, 50);
        let v = p.schedule(Pipe::V, 2, 10, 0);
        assert_eq!(
            a,
            Slot {
                start: 0,
                done: 150
            }
        );
        assert_eq!(
            b,
            Slot {
                start: 100,
                done: 250
            }
        );
        assert_eq!(v, Slot { start: 2, done: 12 });
        assert_eq!(p.finish_time(), 250);
        assert_eq!(p.busy().mte2, 200);
    }

    #[test]
    fn a_wait_holds_the_destination_until_the_source_completes() {
        let mut p = Pipes::new(32);
        p.schedule(Pipe::Mte2, 0, 100, 50);
        p.set_flag(Pipe::Mte2, Pipe::V, 3, 5).unwrap();
        assert_eq!(p.wait_flag(Pipe::Mte2, Pipe::V, 3), Ok(None));
        assert_eq!(p.schedule(Pipe::V, 6, 10, 0).start, 150);
        p.set_flag(Pipe::V, Pipe::S, 0, 7).unwrap();
        assert_eq!(p.wait_flag(Pipe::V, Pipe::S, 0), Ok(Some(160)));
    }

    #[test]
    fn waits_need_an_earlier_set_and_sets_are_bounded() {
        let mut p = Pipes::new(32);
        assert!(matches!(
            p.wait_flag(Pipe::V, Pipe::Mte2, 1),
            Err(NpuFault::WaitWithoutSet { .. })
        ));
        for _ in 0..FLAG_DEPTH {
            p.set_flag(Pipe::V, Pipe::Mte2, 1, 0).unwrap();
        }
        assert!(matches!(
            p.set_flag(Pipe::V, Pipe::Mte2, 1, 0),
            Err(NpuFault::FlagOverflow { .. })
        ));
        assert!(Pipes::flag_operand("set_flag", 0x0001_0101).is_err());
        assert!(Pipes::flag_operand("set_flag", 0x0008_0104).is_err());
        assert_eq!(
            Pipes::flag_operand("set_flag", 0x0007_0104),
            Ok((Pipe::Mte2, Pipe::V, 7))
        );
    }

    #[test]
    fn a_full_queue_stalls_the_issuer_until_an_entry_starts() {
        let mut p = Pipes::new(2);
        p.schedule(Pipe::V, 0, 100, 0);
        p.schedule(Pipe::V, 0, 100, 0);
        // The third must wait until the first has started (0); the fourth until the second
        // has (100).
        assert_eq!(p.issue_time(Pipe::V, 1), 1);
        p.schedule(Pipe::V, 1, 100, 0);
        assert_eq!(p.issue_time(Pipe::V, 2), 100);
    }

    #[test]
    fn barrier_all_drains_every_pipe() {
        let mut p = Pipes::new(32);
        p.schedule(Pipe::M, 0, 500, 0);
        p.schedule(Pipe::Mte3, 0, 10, 200);
        assert_eq!(p.barrier(PIPE_ALL as u64), Ok(Some(500)));
        assert_eq!(p.schedule(Pipe::V, 0, 1, 0).start, 500);
        assert!(p.barrier(9).is_err());
    }
}
