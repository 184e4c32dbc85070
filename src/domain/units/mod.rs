//! Value types with upstream's text forms: quantities, CPU sets, Go durations, timestamps.
pub mod cpuset;
pub mod duration;
pub mod quantity;
pub mod time;
