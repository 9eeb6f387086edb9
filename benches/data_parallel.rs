//! `data_parallel` (being written).
fn main() {}
