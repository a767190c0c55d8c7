//! Statistics over raw data: location, spread, percentiles, confidence
//! intervals, outliers and the explicit k-sigma filter.
//!
//! Choices, and why:
//! - Percentiles of scalar samples use linear interpolation between order
//!   statistics (type 7, the R/NumPy default), so small repetition counts
//!   still give sensible values.
//! - The mean of a few repetitions gets Student's t interval: a percentile
//!   bootstrap of 3 to 5 values is far too narrow (it cannot see beyond the
//!   values it has). The median's interval is a percentile bootstrap with
//!   2,000 resamples and a fixed seed (same data, same interval). For
//!   histograms (large n) the mean CI is the normal approximation and quantile
//!   CIs are the distribution-free order-statistic interval.
//! - Outliers are flagged with Tukey's fences (mild beyond 1.5 IQR, severe
//!   beyond 3 IQR) and counted; they are never removed from the statistics.
//! - The seeds' "drop samples beyond k sigma" (E3 used k = 6) is available as
//!   an explicit filter whose result is reported beside the raw summary.

use crate::histogram::LatencyHistogram;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Confidence level of every interval schedlab prints.
pub const CONFIDENCE: f64 = 0.95;
const Z95: f64 = 1.959_963_984_540_054;
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
const BOOTSTRAP_SEED: u64 = 0x5CED_1AB5;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    pub fn contains(&self, v: f64) -> bool {
        self.lo <= v && v <= self.hi
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Outliers {
    /// Beyond 1.5 IQR but within 3 IQR of the quartiles.
    pub mild: usize,
    /// Beyond 3 IQR.
    pub severe: usize,
}

impl Outliers {
    pub fn total(&self) -> usize {
        self.mild + self.severe
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: u64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    pub sd: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    /// sd / mean; `None` when the mean is 0.
    pub cv: Option<f64>,
    /// 95 % interval for the mean; `None` with fewer than 2 values.
    pub mean_ci: Option<Interval>,
    pub median_ci: Option<Interval>,
    pub outliers: Outliers,
    /// Histogram samples above its range (0 for scalar samples).
    pub overflow: u64,
}

/// A summary of the data left after the k-sigma filter, with what it removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filtered {
    pub k: f64,
    pub dropped: u64,
    pub summary: Option<Summary>,
}

impl Summary {
    /// The same figures without confidence intervals (for values that are
    /// not replicates, such as one value per task).
    pub fn without_intervals(mut self) -> Summary {
        self.mean_ci = None;
        self.median_ci = None;
        self
    }

    pub fn of_samples(values: &[f64]) -> Option<Summary> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let sd = sample_sd(&sorted, mean);
        let mean_ci = t_interval(mean, sd, n);
        let median_ci = bootstrap(&sorted, |s| {
            let mut v = s.to_vec();
            v.sort_by(f64::total_cmp);
            quantile_sorted(&v, 0.5)
        });
        Some(Summary {
            n: n as u64,
            min: sorted[0],
            max: sorted[n - 1],
            mean,
            sd,
            median: quantile_sorted(&sorted, 0.5),
            p90: quantile_sorted(&sorted, 0.9),
            p99: quantile_sorted(&sorted, 0.99),
            p999: quantile_sorted(&sorted, 0.999),
            cv: (mean != 0.0).then(|| sd / mean.abs()),
            mean_ci,
            median_ci,
            outliers: tukey_outliers(&sorted),
            overflow: 0,
        })
    }

    pub fn of_histogram(h: &LatencyHistogram) -> Option<Summary> {
        let n = h.count();
        if n == 0 {
            return None;
        }
        let mean = h.mean()?;
        let sd_pop = h.stdev()?;
        let sd = if n > 1 { sd_pop * (n as f64 / (n as f64 - 1.0)).sqrt() } else { 0.0 };
        let q = |p: f64| h.quantile(p).unwrap_or(0) as f64;
        let mean_ci = (n > 1).then(|| {
            let half = Z95 * sd / (n as f64).sqrt();
            Interval { lo: mean - half, hi: mean + half }
        });
        let (q1, q3) = (q(0.25), q(0.75));
        let iqr = q3 - q1;
        let count_outside = |k: f64| h.count_above((q3 + k * iqr) as u64) + count_below(h, q1 - k * iqr);
        let beyond_mild = count_outside(1.5);
        let severe = count_outside(3.0);
        Some(Summary {
            n,
            min: h.min()? as f64,
            max: h.max()? as f64,
            mean,
            sd,
            median: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            cv: (mean != 0.0).then(|| sd / mean),
            mean_ci,
            median_ci: histogram_quantile_ci(h, 0.5),
            outliers: Outliers { mild: (beyond_mild - severe) as usize, severe: severe as usize },
            overflow: h.overflow(),
        })
    }
}

impl Summary {
    /// Like [`Summary::of_histogram`], but with two or more repetitions the
    /// intervals of the mean and median come from a bootstrap over the
    /// repetitions' own means and medians: they then cover run-to-run
    /// variation, which the sampling interval of one merged histogram cannot.
    pub fn of_histogram_with_repetitions(h: &LatencyHistogram, reps: &[LatencyHistogram]) -> Option<Summary> {
        let mut s = Summary::of_histogram(h)?;
        if reps.len() >= 2 {
            let means: Vec<f64> = reps.iter().filter_map(LatencyHistogram::mean).collect();
            let medians: Vec<f64> = reps.iter().filter_map(|r| r.quantile(0.5).map(|v| v as f64)).collect();
            s.mean_ci = t_interval(mean_of(&means), sample_sd(&means, mean_of(&means)), means.len())
                .map(|ci| widen_to(ci, s.mean));
            s.median_ci = t_interval(mean_of(&medians), sample_sd(&medians, mean_of(&medians)), medians.len())
                .map(|ci| widen_to(ci, s.median));
        }
        Some(s)
    }
}

fn mean_of(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The pooled estimate can sit just outside the interval of per-repetition
/// estimates (a median of medians is not the merged median); keep it inside.
fn widen_to(ci: Interval, v: f64) -> Interval {
    Interval { lo: ci.lo.min(v), hi: ci.hi.max(v) }
}

/// Number of histogram samples strictly below `limit`.
fn count_below(h: &LatencyHistogram, limit: f64) -> u64 {
    if limit <= 0.0 {
        return 0;
    }
    h.buckets().iter().filter(|(v, _)| (*v as f64) < limit).map(|(_, c)| c).sum()
}

fn sample_sd(values: &[f64], mean: f64) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    (ss / (values.len() - 1) as f64).sqrt()
}

/// Type-7 quantile of sorted data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty());
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Two-sided 95 % quantile of Student's t with `df` degrees of freedom
/// (fractional df allowed, as Welch's approximation gives).
pub fn t_quantile(df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(t) => t.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0),
        Err(_) => Z95,
    }
}

/// Student's t interval of a mean from n values with sample sd.
pub fn t_interval(mean: f64, sd: f64, n: usize) -> Option<Interval> {
    if n < 2 {
        return None;
    }
    let half = t_quantile((n - 1) as f64) * sd / (n as f64).sqrt();
    Some(Interval { lo: mean - half, hi: mean + half })
}

/// 95 % interval of mean(b) / mean(a) - 1 from two independent samples:
/// Welch's degrees of freedom and the delta method for the ratio. Used for
/// repetitions, where n is small and a bootstrap would be too narrow.
pub fn welch_ratio_interval(a: &[f64], b: &[f64]) -> Option<Interval> {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if na < 2.0 || nb < 2.0 {
        return None;
    }
    let ma = a.iter().sum::<f64>() / na;
    let mb = b.iter().sum::<f64>() / nb;
    if ma == 0.0 || mb == 0.0 {
        return None;
    }
    let va = sample_sd(a, ma).powi(2) / na;
    let vb = sample_sd(b, mb).powi(2) / nb;
    let r = mb / ma;
    // var(r) ~ r^2 (va/ma^2 + vb/mb^2)
    let rel_a = va / (ma * ma);
    let rel_b = vb / (mb * mb);
    let se = r * (rel_a + rel_b).sqrt();
    let df = if rel_a + rel_b > 0.0 {
        (rel_a + rel_b).powi(2) / (rel_a.powi(2) / (na - 1.0) + rel_b.powi(2) / (nb - 1.0))
    } else {
        na + nb - 2.0
    };
    let half = t_quantile(df) * se;
    Some(Interval { lo: r - half - 1.0, hi: r + half - 1.0 })
}

/// Percentile bootstrap interval of `stat`, deterministic for given data.
pub fn bootstrap(values: &[f64], stat: impl Fn(&[f64]) -> f64) -> Option<Interval> {
    if values.len() < 2 {
        return None;
    }
    let mut rng = rand_pcg::Pcg64::seed_from_u64(BOOTSTRAP_SEED);
    let mut estimates = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut buf = vec![0.0; values.len()];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for slot in buf.iter_mut() {
            *slot = values[rng.gen_range(0..values.len())];
        }
        estimates.push(stat(&buf));
    }
    estimates.sort_by(f64::total_cmp);
    let alpha = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval { lo: quantile_sorted(&estimates, alpha), hi: quantile_sorted(&estimates, 1.0 - alpha) })
}

/// Distribution-free CI of a quantile from order statistics: ranks
/// n*q -/+ z*sqrt(n*q*(1-q)), read off the histogram.
pub fn histogram_quantile_ci(h: &LatencyHistogram, q: f64) -> Option<Interval> {
    let n = h.count() as f64;
    if n < 2.0 {
        return None;
    }
    let half = Z95 * (n * q * (1.0 - q)).sqrt();
    let lo_rank = ((n * q - half).floor()).max(1.0);
    let hi_rank = ((n * q + half).ceil()).min(n);
    Some(Interval { lo: h.quantile(lo_rank / n)? as f64, hi: h.quantile(hi_rank / n)? as f64 })
}

fn tukey_outliers(sorted: &[f64]) -> Outliers {
    if sorted.len() < 4 {
        return Outliers::default();
    }
    let q1 = quantile_sorted(sorted, 0.25);
    let q3 = quantile_sorted(sorted, 0.75);
    let iqr = q3 - q1;
    let mut o = Outliers::default();
    for &v in sorted {
        if v < q1 - 3.0 * iqr || v > q3 + 3.0 * iqr {
            o.severe += 1;
        } else if v < q1 - 1.5 * iqr || v > q3 + 1.5 * iqr {
            o.mild += 1;
        }
    }
    o
}

/// E3's filter: drop every value farther than `k` standard deviations from
/// the mean of the raw data (one pass), and summarise what is left.
pub fn ksigma_samples(values: &[f64], k: f64) -> Filtered {
    let Some(raw) = Summary::of_samples(values) else {
        return Filtered { k, dropped: 0, summary: None };
    };
    let kept: Vec<f64> = values.iter().copied().filter(|v| (v - raw.mean).abs() <= k * raw.sd).collect();
    Filtered { k, dropped: (values.len() - kept.len()) as u64, summary: Summary::of_samples(&kept) }
}

/// The same filter over a histogram: buckets beyond mean +/- k sd are dropped
/// (overflowed samples always are, when the bound is below the range).
pub fn ksigma_histogram(h: &LatencyHistogram, k: f64) -> Filtered {
    let (Some(mean), Some(sd)) = (h.mean(), h.stdev()) else {
        return Filtered { k, dropped: 0, summary: None };
    };
    let lo = mean - k * sd;
    let hi = mean + k * sd;
    let mut kept = LatencyHistogram::new();
    for (v, c) in h.buckets() {
        let vf = v as f64;
        if vf >= lo && vf <= hi {
            kept.record_n(v, c);
        }
    }
    if h.overflow() > 0 && h.max().unwrap_or(0) as f64 <= hi {
        kept.record_n(h.max().unwrap_or(0), h.overflow());
    }
    Filtered { k, dropped: h.count() - kept.count(), summary: Summary::of_histogram(&kept) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn basic_statistics() {
        let s = Summary::of_samples(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.median, 3.0);
        assert!((s.sd - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert!((s.p90 - 4.6).abs() < 1e-12);
        assert!((s.cv.unwrap() - 2.5f64.sqrt() / 3.0).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_interval_brackets_the_mean_and_is_deterministic() {
        let v: Vec<f64> = (0..30).map(|i| 100.0 + (i % 7) as f64).collect();
        let a = Summary::of_samples(&v).unwrap();
        let b = Summary::of_samples(&v).unwrap();
        assert_eq!(a.mean_ci, b.mean_ci);
        let ci = a.mean_ci.unwrap();
        assert!(ci.contains(a.mean));
        assert!(ci.hi - ci.lo < 3.0, "{ci:?}");
    }

    #[test]
    fn t_quantiles_match_tables() {
        assert!((t_quantile(2.0) - 4.303).abs() < 1e-3);
        assert!((t_quantile(4.0) - 2.776).abs() < 1e-3);
        assert!((t_quantile(1e6) - 1.960).abs() < 1e-3);
    }

    #[test]
    fn three_repetitions_get_a_wide_honest_interval() {
        // mean 100, sd 10, n 3: t(2) = 4.303, half-width 24.8
        let s = Summary::of_samples(&[90.0, 100.0, 110.0]).unwrap();
        let ci = s.mean_ci.unwrap();
        assert!((ci.hi - ci.lo - 2.0 * 4.303 * 10.0 / 3f64.sqrt()).abs() < 0.1, "{ci:?}");
    }

    #[test]
    fn welch_ratio_brackets_the_true_change() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let b = [120.0, 122.0, 118.0, 121.0, 119.0];
        let ci = welch_ratio_interval(&a, &b).unwrap();
        assert!(ci.lo > 0.15 && ci.hi < 0.25 && ci.contains(0.2), "{ci:?}");
        // Same spread, tiny shift, 3 values each: cannot be told apart.
        let ci = welch_ratio_interval(&[90.0, 100.0, 110.0], &[95.0, 105.0, 115.0]).unwrap();
        assert!(ci.contains(0.0), "{ci:?}");
    }

    #[test]
    fn constant_data_has_zero_width_interval() {
        let s = Summary::of_samples(&[5.0; 10]).unwrap();
        assert_eq!(s.mean_ci, Some(Interval { lo: 5.0, hi: 5.0 }));
        assert_eq!(s.outliers.total(), 0);
    }

    #[test]
    fn outliers_are_flagged_but_kept() {
        let mut v = vec![10.0, 11.0, 10.5, 10.2, 10.8, 10.1, 10.9, 10.4];
        v.push(30.0);
        let s = Summary::of_samples(&v).unwrap();
        assert_eq!(s.outliers.severe, 1);
        assert_eq!(s.max, 30.0);
        assert_eq!(s.n, 9);
    }

    #[test]
    fn ksigma_drops_the_spike_like_e3() {
        // 999 ordinary wake-ups and one 448 ms spike, as in E3's ingosched RT row.
        let mut v: Vec<f64> = (0..999).map(|i| 100.0 + (i % 50) as f64).collect();
        v.push(448_262.0);
        let f = ksigma_samples(&v, 6.0);
        assert_eq!(f.dropped, 1);
        let s = f.summary.unwrap();
        assert!(s.max < 200.0);
        let raw = Summary::of_samples(&v).unwrap();
        assert!(raw.mean > 500.0 && s.mean < 130.0);
    }

    #[test]
    fn ksigma_on_histogram_matches_samples() {
        let mut h = LatencyHistogram::new();
        let mut v = Vec::new();
        for i in 0..999u64 {
            h.record(100_000 + (i % 50) * 1000);
            v.push((100_000 + (i % 50) * 1000) as f64);
        }
        h.record(448_262_000);
        v.push(448_262_000.0);
        let fh = ksigma_histogram(&h, 6.0);
        let fs = ksigma_samples(&v, 6.0);
        assert_eq!(fh.dropped, fs.dropped);
        let (a, b) = (fh.summary.unwrap().mean, fs.summary.unwrap().mean);
        assert!((a - b).abs() / b < 0.002, "{a} vs {b}");
    }

    #[test]
    fn histogram_summary_matches_samples() {
        let mut h = LatencyHistogram::new();
        let mut v = Vec::new();
        for i in 1..=1000u64 {
            h.record(i * 1000);
            v.push((i * 1000) as f64);
        }
        let hs = Summary::of_histogram(&h).unwrap();
        let ss = Summary::of_samples(&v).unwrap();
        assert!((hs.mean - ss.mean).abs() / ss.mean < 0.001);
        assert!((hs.sd - ss.sd).abs() / ss.sd < 0.002);
        assert!((hs.p99 - ss.p99).abs() / ss.p99 < 0.002);
        let ci = hs.median_ci.unwrap();
        assert!(ci.lo < hs.median && hs.median < ci.hi);
    }

    #[test]
    fn repetitions_widen_the_interval_to_run_to_run_variation() {
        // Two repetitions whose medians differ by 2 us: the merged histogram's
        // sampling interval is tight, the repetition interval is not.
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for i in 0..5000u64 {
            a.record(10_000 + i % 4000);
            b.record(12_000 + i % 4000);
        }
        let mut merged = a.clone();
        merged.merge(&b);
        let sampling = Summary::of_histogram(&merged).unwrap().median_ci.unwrap();
        let reps = Summary::of_histogram_with_repetitions(&merged, &[a, b]).unwrap().median_ci.unwrap();
        assert!(sampling.hi - sampling.lo < 500.0, "{sampling:?}");
        assert!(reps.hi - reps.lo > 1_500.0, "{reps:?}");
    }

    proptest! {
        #[test]
        fn order_of_statistics_holds(v in proptest::collection::vec(-1e6f64..1e6, 1..60)) {
            let s = Summary::of_samples(&v).unwrap();
            prop_assert!(s.min <= s.median && s.median <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max);
            prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            prop_assert!(s.sd >= 0.0);
        }
    }
}
