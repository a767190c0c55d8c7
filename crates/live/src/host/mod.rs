//! What the host is and does, read from /proc and /sys: its fingerprint
//! (`fingerprint`), what distorts measurements on it (`readiness`, for
//! `schedlab check`) and the kernel's counters around a measurement
//! (`kstat`: run delay, steal) and the measured tasks' counters at each
//! repetition's start and end (`counters`).

pub(crate) mod counters;
pub mod fingerprint;
pub(crate) mod kstat;
pub mod readiness;
