//! What the host is and does, read from /proc and /sys: its fingerprint
//! (`fingerprint`), what distorts measurements on it (`readiness`, for
//! `schedlab check`) and the kernel's counters around a measurement
//! (`kstat`: run delay, steal).

pub mod fingerprint;
pub(crate) mod kstat;
pub mod readiness;
