//! Randomized model test of page tables: random map/unmap sequences checked, page by page,
//! against a plain map from virtual page to physical page. Deterministic (a fixed xorshift
//! seed), so a failure reproduces.

use std::collections::BTreeMap;

use npusim_device::memory::{AddressSpace, PageSize};

const BASE: u64 = 0x10_0000_0000;
const SPAN_PAGES: u64 = 4096; // 16 MiB of VA, 8 huge pages.

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_map_unmap_matches_a_page_by_page_model() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut space = AddressSpace::new();
    // virtual 4 KiB page index -> (physical address of that 4 KiB piece, page size)
    let mut model: BTreeMap<u64, (u64, PageSize)> = BTreeMap::new();
    for step in 0..4000 {
        let page = if rng.below(3) == 0 {
            PageSize::Huge2M
        } else {
            PageSize::Normal4K
        };
        let per = page.bytes() / 4096;
        let first = rng.below(SPAN_PAGES / per) * per;
        let count = (1 + rng.below(4)) * per;
        let va = BASE + first * 4096;
        let len = count * 4096;
        if rng.below(2) == 0 {
            let pa = rng.below(1 << 20) * page.bytes();
            let free = (first..first + count).all(|p| !model.contains_key(&p));
            let fits = first + count <= SPAN_PAGES + 4 * 512;
            let result = space.map(va, pa, len, page);
            assert_eq!(result.is_ok(), free && fits, "step {step}: map {result:?}");
            if result.is_ok() {
                for i in 0..count {
                    model.insert(first + i, (pa + i * 4096, page));
                }
            }
        } else {
            // Unmap succeeds when every page is mapped and both ends fall on page boundaries
            // of the mappings they cut, which here means: not inside a huge page.
            let all = (first..first + count).all(|p| model.contains_key(&p));
            let huge_cut = |p: u64| {
                model
                    .get(&p)
                    .is_some_and(|&(_, s)| s == PageSize::Huge2M && !p.is_multiple_of(512))
            };
            let ok = all && !huge_cut(first) && !huge_cut(first + count);
            let result = space.unmap(va, len);
            assert_eq!(result.is_ok(), ok, "step {step}: unmap {result:?}");
            if ok {
                for p in first..first + count {
                    model.remove(&p);
                }
            }
        }
        assert_eq!(space.mapped_bytes(), model.len() as u64 * 4096);
        // Probe a few random pages against the model.
        for _ in 0..8 {
            let p = rng.below(SPAN_PAGES + 4 * 512);
            let off = rng.below(4096);
            let got = space.translate(BASE + p * 4096 + off);
            match model.get(&p) {
                Some(&(pa, size)) => {
                    let t = got.expect("mapped page translates");
                    assert_eq!(t.pa, pa + off);
                    assert_eq!(t.page_size, size);
                }
                None => assert!(got.is_err(), "step {step}: page {p} should fault"),
            }
        }
    }
}
