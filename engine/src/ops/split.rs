//! How the built-in ops cut work over AI cores and into tiles that fit a core's unified buffer:
//! `n` items (elements, boxes, rows) go to `block_dim` cores in contiguous ranges of `per_core`
//! items, and each core walks its range in tiles of `tile` items. The same [`Split`] is written
//! into the tiling words by the tiling function and read back by the kernel, so the kernel
//! really runs the loop the tiling chose.

use npusim_components::shape::{OpTiling, Tiling};
use npusim_device::config::DeviceConfig;

/// Items below which spreading over one more core costs more than it saves.
pub const MIN_ELEMS_PER_CORE: u64 = 2048;

/// Words a [`Split`] takes in the tiling words.
pub const SPLIT_WORDS: usize = 5;

/// A split of `n` items over cores and tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Items.
    pub n: u64,
    /// Cores used.
    pub block_dim: u32,
    /// Items per core (the last core may get fewer).
    pub per_core: u64,
    /// Items per tile (the last tile of a core may be shorter).
    pub tile: u64,
}

impl Split {
    /// Splits `n` items, each needing `ub_per_item` bytes of unified buffer across the
    /// kernel's buffers (doubled here for double buffering), with per-core ranges that are
    /// multiples of `align` items and at least `min_per_core` items where `n` allows.
    /// Fails when one item does not fit the buffer.
    pub fn new(
        n: u64,
        ub_per_item: u64,
        align: u64,
        min_per_core: u64,
        config: &DeviceConfig,
    ) -> Result<Split, String> {
        let per_item = ub_per_item.max(1).saturating_mul(2);
        let align = align.max(1);
        let max_tile = (config.ub_bytes as u64 / per_item) / align * align;
        if max_tile == 0 {
            return Err(format!(
                "one item needs {per_item} bytes of unified buffer (double-buffered); a core has {}",
                config.ub_bytes
            ));
        }
        if n == 0 {
            return Ok(Split {
                n,
                block_dim: 1,
                per_core: 0,
                tile: 0,
            });
        }
        let cores = n
            .div_ceil(min_per_core.max(1))
            .clamp(1, config.ai_cores.max(1) as u64);
        let per_core = n.div_ceil(cores).div_ceil(align).saturating_mul(align);
        let block_dim = n.div_ceil(per_core) as u32;
        Ok(Split {
            n,
            block_dim,
            per_core,
            tile: per_core.min(max_tile),
        })
    }

    /// One core takes everything, in tiles of `tile` items.
    pub fn single_core(n: u64, tile: u64) -> Split {
        Split {
            n,
            block_dim: 1,
            per_core: n,
            tile: tile.min(n),
        }
    }

    /// Tiles each core walks.
    pub fn tiles_per_core(&self) -> u64 {
        if self.tile == 0 {
            0
        } else {
            self.per_core.div_ceil(self.tile)
        }
    }

    /// The usual key: 0 for no items, 1 when each core's range is one tile, 2 when cores loop
    /// over tiles.
    pub fn key(&self) -> u32 {
        match self.tiles_per_core() {
            0 => 0,
            1 => 1,
            _ => 2,
        }
    }

    /// Unified-buffer bytes one core uses with `ub_per_item` bytes per item, double-buffered.
    pub fn ub_bytes(&self, ub_per_item: u64) -> u64 {
        self.tile.saturating_mul(ub_per_item).saturating_mul(2)
    }

    /// Appends the split to a tiling's words ([`SPLIT_WORDS`] of them).
    pub fn encode(&self, t: Tiling) -> Tiling {
        t.push_u64(self.n)
            .push_u64(self.per_core)
            .push(self.tile.min(u32::MAX as u64) as u32)
    }

    /// Reads the split the tiling function wrote at op word `at`, for a launch of `block_dim`
    /// blocks.
    pub fn decode(t: &OpTiling<'_>, at: usize, block_dim: u32) -> Split {
        Split {
            n: t.u64_at(at),
            per_core: t.u64_at(at + 2),
            tile: t.word(at + 4) as u64,
            block_dim,
        }
    }

    /// The tiles block `b` processes: `(first item, items)`, in order.
    pub fn tiles(&self, b: u32) -> impl Iterator<Item = (u64, u64)> + use<> {
        let start = (b as u64).saturating_mul(self.per_core).min(self.n);
        let end = start.saturating_add(self.per_core).min(self.n);
        let tile = self.tile.max(1);
        let count = if self.tile == 0 {
            0
        } else {
            (end - start).div_ceil(tile)
        };
        (0..count).map(move |i| {
            let s = start + i * tile;
            (s, tile.min(end - s))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_every_item_once_within_the_buffer() {
        let cfg = DeviceConfig::default();
        for n in [
            1u64,
            7,
            8,
            2047,
            2048,
            2049,
            24_576,
            24_577,
            1 << 20,
            10_000_019,
        ] {
            let s = Split::new(n, 8, 8, MIN_ELEMS_PER_CORE, &cfg).unwrap();
            assert!(
                s.block_dim >= 1 && s.block_dim <= cfg.ai_cores,
                "{n}: {s:?}"
            );
            assert!(s.ub_bytes(8) <= cfg.ub_bytes as u64, "{n}: {s:?}");
            let mut next = 0;
            for b in 0..s.block_dim {
                for (start, len) in s.tiles(b) {
                    assert_eq!(start, next);
                    assert!(len >= 1 && len <= s.tile);
                    next += len;
                }
            }
            assert_eq!(next, n);
        }
    }

    #[test]
    fn an_item_larger_than_the_buffer_is_refused() {
        let cfg = DeviceConfig::default();
        assert!(Split::new(4, cfg.ub_bytes as u64, 1, 1, &cfg).is_err());
    }
}
