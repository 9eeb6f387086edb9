//! The worker threads of a frame: the tick executes independent devices' work side by side on
//! them, and collectives split their reductions into fixed chunks over them.

use bevy_ecs::prelude::*;

/// The worker threads that execute independent devices' work side by side (a rayon pool), or
/// none: everything on the frame's thread. Results are the same either way: work is split
/// by device and into fixed chunks, never by thread.
#[derive(Resource, Clone, Default)]
pub struct Workers {
    pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workers({})", self.threads())
    }
}

impl Workers {
    /// `threads` worker threads (0: one per available core); 1 means none.
    pub fn new(threads: usize) -> Result<Self, String> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        if threads <= 1 {
            return Ok(Self { pool: None });
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("npusim-worker-{i}"))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            pool: Some(std::sync::Arc::new(pool)),
        })
    }

    /// Threads that run work (1 without a pool).
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.current_num_threads())
    }

    /// Whether work is split over several threads.
    pub fn is_parallel(&self) -> bool {
        self.pool.is_some()
    }

    /// Runs `f` inside the pool (so its rayon iterators use the pool's threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}
