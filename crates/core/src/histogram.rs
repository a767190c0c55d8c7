//! Latency histograms: HDR (log-linear) buckets from 1 ns to 100 s at three
//! significant digits, so relative error stays under 0.1 % over the whole
//! range; values beyond the range are counted as overflow, never dropped.
//! Exact min and max are kept beside the buckets.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Highest value recorded in buckets: 100 s.
pub const HIGHEST_NS: u64 = 100_000_000_000;
pub const SIGFIG: u8 = 3;

#[derive(Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    overflow: u64,
    min_ns: u64,
    max_ns: u64,
}

impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.count())
            .field("overflow", &self.overflow)
            .field("min_ns", &self.min_ns)
            .field("max_ns", &self.max_ns)
            .finish()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.overflow == other.overflow
            && self.min_ns == other.min_ns
            && self.max_ns == other.max_ns
            && self.buckets() == other.buckets()
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram {
            hist: Histogram::new_with_bounds(1, HIGHEST_NS, SIGFIG).expect("static bounds are valid"),
            overflow: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Record one value. Cheap enough for a measurement loop (no allocation).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        if ns > HIGHEST_NS || self.hist.record_n(ns, n).is_err() {
            self.overflow += n;
        }
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.hist.add(&other.hist).expect("same bounds");
        self.overflow += other.overflow;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// All samples, overflow included.
    pub fn count(&self) -> u64 {
        // Saturating: a damaged or hostile stored overflow count must not panic a reader.
        self.hist.len().saturating_add(self.overflow)
    }

    /// Samples above [`HIGHEST_NS`].
    pub fn overflow(&self) -> u64 {
        self.overflow
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Bytes of the bucket array (the same for every histogram: 224 KiB).
    /// An upper bound of its resident size; callers use it to check that
    /// many histograms fit in memory before they record anything.
    pub fn heap_bytes(&self) -> u64 {
        (self.hist.distinct_values() * std::mem::size_of::<u64>()) as u64
    }

    pub fn min(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.min_ns)
    }

    pub fn max(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.max_ns)
    }

    /// Mean of the bucketed samples (overflowed samples counted at the exact
    /// maximum, an underestimate that is flagged by `overflow() > 0`).
    pub fn mean(&self) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let in_range = self.hist.len() as f64;
        let sum = self.hist.mean() * in_range + self.overflow as f64 * self.max_ns as f64;
        Some(sum / self.count() as f64)
    }

    pub fn stdev(&self) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let mean = self.mean()?;
        let mut ss = 0.0;
        for (v, c) in self.buckets() {
            let d = v as f64 - mean;
            ss += d * d * c as f64;
        }
        let d = self.max_ns as f64 - mean;
        ss += d * d * self.overflow as f64;
        Some((ss / self.count() as f64).sqrt())
    }

    /// Value at quantile `q` in 0..=1 (e.g. 0.99). Quantiles that fall in the
    /// overflow return the exact maximum.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        if q >= 1.0 {
            return Some(self.max_ns);
        }
        if q <= 0.0 {
            return Some(self.min_ns);
        }
        let rank = (q * self.count() as f64).ceil() as u64;
        if rank > self.hist.len() {
            return Some(self.max_ns);
        }
        let v = self.hist.value_at_quantile(rank as f64 / self.hist.len() as f64);
        Some(v.clamp(self.min_ns, self.max_ns))
    }

    /// Non-empty buckets as (highest equivalent value in ns, count).
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.hist.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
    }

    /// Number of samples strictly above `ns` (overflow included).
    pub fn count_above(&self, ns: u64) -> u64 {
        let at_or_below = self.hist.count_between(0, ns);
        self.count() - at_or_below.min(self.hist.len())
    }

    fn from_parts(buckets: &[(u64, u64)], overflow: u64, min_ns: u64, max_ns: u64) -> Self {
        let mut h = LatencyHistogram::new();
        for &(v, c) in buckets {
            let _ = h.hist.record_n(v.min(HIGHEST_NS), c);
        }
        h.overflow = overflow;
        if h.count() > 0 {
            h.min_ns = min_ns;
            h.max_ns = max_ns;
        }
        h
    }
}

#[derive(Serialize, Deserialize)]
struct HistogramRepr {
    sigfig: u8,
    highest_ns: u64,
    count: u64,
    overflow: u64,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
    /// [value_ns, count] for each non-empty bucket.
    buckets: Vec<(u64, u64)>,
}

impl Serialize for LatencyHistogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HistogramRepr {
            sigfig: SIGFIG,
            highest_ns: HIGHEST_NS,
            count: self.count(),
            overflow: self.overflow,
            min_ns: self.min(),
            max_ns: self.max(),
            buckets: self.buckets(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = HistogramRepr::deserialize(d)?;
        let h = LatencyHistogram::from_parts(&r.buckets, r.overflow, r.min_ns.unwrap_or(0), r.max_ns.unwrap_or(0));
        if h.count() != r.count {
            return Err(serde::de::Error::custom(format!(
                "histogram count {} does not match its buckets ({})",
                r.count,
                h.count()
            )));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_precision() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap() as f64;
        assert!((p50 - 5_000_000.0).abs() / 5_000_000.0 < 0.001, "p50 {p50}");
        let p99 = h.quantile(0.99).unwrap() as f64;
        assert!((p99 - 9_900_000.0).abs() / 9_900_000.0 < 0.001, "p99 {p99}");
        assert_eq!(h.min(), Some(1000));
        assert_eq!(h.max(), Some(10_000_000));
        let mean = h.mean().unwrap();
        assert!((mean - 5_000_500.0).abs() / 5_000_500.0 < 0.001);
    }

    #[test]
    fn overflow_is_counted_not_dropped() {
        let mut h = LatencyHistogram::new();
        h.record(10);
        h.record(HIGHEST_NS * 2);
        assert_eq!(h.count(), 2);
        assert_eq!(h.overflow(), 1);
        assert_eq!(h.max(), Some(HIGHEST_NS * 2));
        assert_eq!(h.quantile(0.99), Some(HIGHEST_NS * 2));
        assert_eq!(h.count_above(1000), 1);
    }

    #[test]
    fn json_round_trip_preserves_everything() {
        let mut h = LatencyHistogram::new();
        for v in [0u64, 5, 1234, 98_765, 1_000_000_000, HIGHEST_NS + 1] {
            h.record_n(v, 3);
        }
        let json = serde_json::to_string(&h).unwrap();
        let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.quantile(0.5), h.quantile(0.5));
    }

    #[test]
    fn tampered_counts_are_rejected() {
        let mut h = LatencyHistogram::new();
        h.record(42);
        let json = serde_json::to_string(&h).unwrap().replace("\"count\":1", "\"count\":7");
        assert!(serde_json::from_str::<LatencyHistogram>(&json).is_err());
    }

    #[test]
    fn heap_bytes_is_the_fixed_bucket_array() {
        let empty = LatencyHistogram::new();
        let mut full = LatencyHistogram::new();
        for v in [1, 1_000, 1_000_000, HIGHEST_NS, HIGHEST_NS + 1] {
            full.record(v);
        }
        assert_eq!(empty.heap_bytes(), full.heap_bytes(), "recording never grows it");
        // 1 ns..100 s at 3 significant digits: 28 half-buckets of 1024 counters.
        assert_eq!(empty.heap_bytes(), 28 * 1024 * 8);
    }

    #[test]
    fn merge_adds_counts_and_extremes() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record(100);
        b.record(5);
        b.record(HIGHEST_NS + 5);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.min(), Some(5));
        assert_eq!(a.overflow(), 1);
    }

    #[test]
    fn empty_histogram_has_no_statistics() {
        let h = LatencyHistogram::new();
        assert_eq!(h.quantile(0.5), None);
        assert_eq!(h.mean(), None);
        assert_eq!(h.min(), None);
    }
}
