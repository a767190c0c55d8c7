//! Units of measurement and their human formatting.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The unit a metric's values are stored in. Values are stored in exactly this
/// unit; formatting may rescale (e.g. ns shown as us) but storage never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    /// Operations (round trips, processes, threads, messages...) per second.
    PerSecond,
    /// Operations per minute (UnixBench's scripts per minute).
    PerMinute,
    Bytes,
    BytesPerSecond,
    /// KiB per second (UnixBench's and E1's file figures); shown in the
    /// largest binary unit.
    KibPerSecond,
    Count,
    Percent,
    /// A dimensionless ratio (1.0 = equal).
    Ratio,
}

impl Unit {
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "ns",
            Unit::Microseconds => "us",
            Unit::Milliseconds => "ms",
            Unit::Seconds => "s",
            Unit::PerSecond => "/s",
            Unit::PerMinute => "/min",
            Unit::Bytes => "B",
            Unit::BytesPerSecond => "B/s",
            Unit::KibPerSecond => "KiB/s",
            Unit::Count => "",
            Unit::Percent => "%",
            Unit::Ratio => "x",
        }
    }

    /// Nanoseconds per unit for time units, `None` otherwise.
    pub fn ns_per_unit(self) -> Option<f64> {
        match self {
            Unit::Nanoseconds => Some(1.0),
            Unit::Microseconds => Some(1e3),
            Unit::Milliseconds => Some(1e6),
            Unit::Seconds => Some(1e9),
            _ => None,
        }
    }

    /// Format a value of this unit with a sensible precision and, for times,
    /// the largest unit that keeps the number readable.
    pub fn format(self, value: f64) -> String {
        if !value.is_finite() {
            return format!("{value}");
        }
        if let Some(scale) = self.ns_per_unit() {
            return format_duration_ns(value * scale);
        }
        match self {
            Unit::PerSecond => format!("{}/s", group_thousands(value)),
            Unit::PerMinute => format!("{}/min", group_thousands(value)),
            Unit::Bytes => format_bytes(value),
            Unit::BytesPerSecond => format!("{}/s", format_bytes(value)),
            Unit::KibPerSecond => format!("{}/s", format_bytes(value * 1024.0)),
            Unit::Count => group_thousands(value),
            Unit::Percent => format!("{value:.2}%"),
            Unit::Ratio => format!("{value:.3}x"),
            _ => unreachable!("time units handled above"),
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

/// "12.3 us", "1.500 s", "850 ns".
pub fn format_duration_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

fn format_bytes(b: f64) -> String {
    const K: f64 = 1024.0;
    let a = b.abs();
    if a < K {
        format!("{b:.0} B")
    } else if a < K * K {
        format!("{:.1} KiB", b / K)
    } else if a < K * K * K {
        format!("{:.1} MiB", b / (K * K))
    } else {
        format!("{:.2} GiB", b / (K * K * K))
    }
}

/// Thousands separators for large values, one decimal for small ones.
pub fn group_thousands(v: f64) -> String {
    if v.abs() < 100.0 && v.fract() != 0.0 {
        return format!("{v:.2}");
    }
    let neg = v < 0.0;
    let digits = format!("{:.0}", v.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}

/// Parse a duration such as "500ns", "100us", "1.5ms", "2s", "5m" into
/// nanoseconds. A bare number is refused: units are never guessed.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("duration '{s}' is negative: give a positive one, e.g. 500us, 2ms, 10s"));
    }
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .ok_or_else(|| format!("duration '{s}' has no unit: write it with one, e.g. 500us, 2ms, 10s"))?;
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("duration '{s}' does not start with a number: write e.g. 500us, 2ms, 10s"))?;
    let scale: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other => return Err(format!("unknown time unit '{other}' in '{s}': use ns, us, ms, s, m or h")),
    };
    let out_of_range = || format!("duration '{s}' is out of range: give a positive duration below 30 years");
    // Whole numbers exactly: through f64, "9007199254740993ns" lost its last digit.
    if let Ok(n) = num.trim().parse::<u64>() {
        return n.checked_mul(scale).filter(|&ns| ns <= 1_000_000_000_000_000_000).ok_or_else(out_of_range);
    }
    let ns = value * scale as f64;
    if !ns.is_finite() || !(0.0..=1e18).contains(&ns) {
        return Err(out_of_range());
    }
    Ok(ns.round() as u64)
}

/// `ns` in the largest unit that divides it exactly ("6ms", "500us", "0s"),
/// as [`parse_duration_ns`] reads it back.
pub fn exact_duration(ns: u64) -> String {
    match ns {
        0 => "0s".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// `bytes` in the largest binary unit that divides it exactly ("256MiB",
/// "1KiB", "100B"), as [`parse_size_bytes`] reads it back.
pub fn exact_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// "4096", "4096B", "4KiB", "64k", "1MiB", "2G" as bytes: binary multiples
/// (k, K, KiB = 1024), whole results only. A bare number is bytes.
pub fn parse_size_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "KiB" | "KB" | "kB" => 1 << 10,
        "m" | "M" | "MiB" | "MB" => 1 << 20,
        "g" | "G" | "GiB" | "GB" => 1 << 30,
        "t" | "T" | "TiB" | "TB" => 1 << 40,
        other => return Err(format!("unknown size unit '{other}' in '{s}': use B, KiB, MiB, GiB or TiB")),
    };
    let num = num.trim();
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'_') || num.starts_with('_') {
        return Err(format!("size '{s}' does not start with a whole number: write e.g. 4096, 4KiB, 16MiB"));
    }
    num.replace('_', "")
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("size '{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_multiples() {
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert_eq!(parse_size_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_size_bytes("64k"), Ok(65536));
        assert_eq!(parse_size_bytes("1MiB"), Ok(1 << 20));
        assert!(parse_size_bytes("1.5MiB").is_err());
        assert!(parse_size_bytes("-1").is_err());
        assert!(parse_size_bytes("4 parsecs").unwrap_err().contains("unknown size unit"));
        assert!(parse_size_bytes("99999999999999T").unwrap_err().contains("too large"));
        for b in [0, 100, 1024, 262_144 << 10, 3 << 30] {
            assert_eq!(parse_size_bytes(&exact_size(b)), Ok(b));
        }
        for ns in [0, 750, 5_000_000, 12_000_000_000] {
            assert_eq!(parse_duration_ns(&exact_duration(ns)), Ok(ns));
        }
        assert_eq!((exact_size(262_144 << 10), exact_duration(5_000_000)), ("256MiB".into(), "5ms".into()));
    }

    #[test]
    fn durations_parse_with_units_only() {
        assert_eq!(parse_duration_ns("100us"), Ok(100_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration_ns("5m"), Ok(300_000_000_000));
        assert!(parse_duration_ns("100").unwrap_err().contains("no unit"));
        assert!(parse_duration_ns("3 days").is_err());
        assert!(parse_duration_ns("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration_ns("-1").unwrap_err().contains("negative"));
        // Found by tests/fuzz_parsers.rs: whole numbers above 2^53 were rounded.
        assert_eq!(parse_duration_ns("9007199254740993ns"), Ok(9_007_199_254_740_993));
        assert!(parse_duration_ns("1000000000000000001ns").unwrap_err().contains("out of range"));
    }

    #[test]
    fn durations_pick_readable_units() {
        assert_eq!(format_duration_ns(850.0), "850 ns");
        assert_eq!(format_duration_ns(12_345.0), "12.35 us");
        assert_eq!(format_duration_ns(2_500_000.0), "2.500 ms");
        assert_eq!(Unit::Seconds.format(1.5), "1.500 s");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(66057.8), "66,058");
        assert_eq!(group_thousands(1234567.0), "1,234,567");
        assert_eq!(group_thousands(-1000.0), "-1,000");
        assert_eq!(group_thousands(12.5), "12.50");
    }
}
