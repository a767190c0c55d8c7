//! Cheap latency recording for the engine's per-switch histograms.
//!
//! [`LatencyHistogram::record`] costs tens of instructions (HDR bounds
//! checks, min/max/total upkeep), paid twice per context switch. A
//! [`BucketCounts`] only counts values in HDR's own log-linear buckets (three
//! significant digits: 2048 exact values, then 1024 sub-buckets per power of
//! two) and turns the counts into a [`LatencyHistogram`] once, at the end of
//! the run. The result is the same histogram: every value of a bucket falls
//! in the same HDR bucket, each bucket is recorded at a value inside it, and
//! the exact minimum and maximum are recorded as themselves.

use schedlab_core::LatencyHistogram;

/// Values below 2^SUB_BITS+1 have buckets of width 1.
const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;
/// Values from 2^FAST_BITS (4.3 s) up go straight to the histogram (rare).
const FAST_BITS: u32 = 32;
const BUCKETS: usize = ((FAST_BITS - SUB_BITS + 1) as usize) << SUB_BITS;

/// HDR's bucket index of `v < 2^FAST_BITS`.
#[inline]
fn index(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    // Shift that brings v into [SUB, 2·SUB): the bucket's width is 1 << shift.
    let shift = 63 - v.leading_zeros() - SUB_BITS;
    ((shift as u64) * SUB + (v >> shift)) as usize
}

/// The lowest value of bucket `i`.
fn lowest(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        return i;
    }
    let shift = i / SUB - 1;
    (i - shift * SUB) << shift
}

/// Counts per HDR bucket, plus the exact extremes; see the module documentation.
pub(super) struct BucketCounts {
    /// Empty until the first value (most runs leave most histograms unused).
    counts: Vec<u64>,
    min: u64,
    max: u64,
    /// Values too large for `counts`, recorded as they come.
    big: LatencyHistogram,
}

impl BucketCounts {
    pub(super) fn new() -> Self {
        BucketCounts { counts: Vec::new(), min: u64::MAX, max: 0, big: LatencyHistogram::new() }
    }

    #[inline(always)]
    pub(super) fn record(&mut self, v: u64) {
        if v >> FAST_BITS != 0 {
            self.big.record(v);
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.counts[index(v)] += 1;
    }

    /// Add everything recorded to `h`, which must be empty.
    pub(super) fn drain_into(&mut self, h: &mut LatencyHistogram) {
        let mut counts = std::mem::take(&mut self.counts);
        if self.min <= self.max {
            // The extremes as themselves (LatencyHistogram keeps them exactly),
            // the rest at a value of their bucket within [min, max].
            counts[index(self.min)] -= 1;
            h.record(self.min);
            if self.max != self.min {
                counts[index(self.max)] -= 1;
                h.record(self.max);
            }
            for (i, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
                h.record_n(lowest(i).clamp(self.min, self.max), n);
            }
        }
        if !self.big.is_empty() {
            // Only then: merging even an empty histogram would allocate h's buckets.
            h.merge(&std::mem::replace(&mut self.big, LatencyHistogram::new()));
        }
        self.min = u64::MAX;
        self.max = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_start_at_their_lowest_value() {
        let mut prev = 0;
        for v in 1..(1u64 << 20) {
            let i = index(v);
            assert!(i == prev || i == prev + 1, "v={v}");
            if i != prev {
                assert_eq!(lowest(i), v, "bucket {i} starts at {v}");
            }
            prev = i;
        }
        assert_eq!(index((1 << FAST_BITS) - 1), BUCKETS - 1);
    }

    #[test]
    fn a_single_value_keeps_its_exact_figures() {
        let mut b = BucketCounts::new();
        b.record(123_457);
        let mut h = LatencyHistogram::new();
        b.drain_into(&mut h);
        let mut want = LatencyHistogram::new();
        want.record(123_457);
        // One value is both extremes: recorded twice, it would count 2.
        assert_eq!(h.count(), 1);
        assert_eq!(h, want);
    }

    proptest::proptest! {
        /// Same histogram as recording each value directly: buckets, exact
        /// extremes, overflow, and so every summary.
        #[test]
        fn drained_counts_equal_direct_recording(
            values in proptest::collection::vec(
                proptest::prop_oneof![0u64..5000, 0u64..10_000_000, 0u64..u64::MAX >> 20, 0u64..u64::MAX],
                0..300,
            )
        ) {
            let (mut b, mut direct) = (BucketCounts::new(), LatencyHistogram::new());
            for &v in &values {
                b.record(v);
                direct.record(v);
            }
            let mut h = LatencyHistogram::new();
            b.drain_into(&mut h);
            proptest::prop_assert_eq!(&h, &direct);
            proptest::prop_assert_eq!(h.count(), direct.count());
            proptest::prop_assert_eq!(h.mean().map(f64::to_bits), direct.mean().map(f64::to_bits));
            proptest::prop_assert_eq!(h.stdev().map(f64::to_bits), direct.stdev().map(f64::to_bits));
            for q in [0.5, 0.9, 0.99, 0.999] {
                proptest::prop_assert_eq!(h.quantile(q), direct.quantile(q));
            }
        }
    }
}
