//! `name[key=value,...]` strings, shared by policies and workloads.
//!
//! A segment without `=` continues the previous value, so list values read
//! naturally: `hogs[nice=0,5,10]` is one key `nice` with value `0,5,10`.

use crate::SimError;
use std::ops::RangeInclusive;

/// A parsed spec: lower-case name and `(key, value)` pairs sorted by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub params: Vec<(String, String)>,
}

impl Spec {
    /// Parse strictly; `what` is "policy" or "workload" for error messages.
    pub fn parse(s: &str, what: &'static str) -> Result<Spec, SimError> {
        let bad = |why: String| SimError::BadSpec { what, spec: s.to_string(), why };
        let s = s.trim();
        // One grammar with the live benchmarks and loads, `name:key=value,...`;
        // `name[key=value,...]` stays accepted as the older spelling.
        let colon = s.find(':').filter(|&c| s.find('[').is_none_or(|b| c < b));
        let (name, rest) = match (colon, s.find('[')) {
            (Some(c), _) => {
                if s.contains(['[', ']']) {
                    return Err(bad("write either name:key=value,... or name[key=value,...], not both".into()));
                }
                (&s[..c], Some(&s[c + 1..]))
            }
            (None, Some(i)) => {
                let inner = s[i + 1..]
                    .strip_suffix(']')
                    .ok_or_else(|| bad("missing closing ']' (write name[key=value,...])".into()))?;
                (&s[..i], Some(inner))
            }
            (None, None) => {
                if s.contains(']') {
                    return Err(bad("']' without '['".into()));
                }
                (s, None)
            }
        };
        let name = name.trim().to_ascii_lowercase();
        if name.is_empty() {
            return Err(bad(format!("empty {what} name")));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad(format!("'{name}' is not a valid {what} name (letters, digits, '_' and '-' only)")));
        }
        let mut params: Vec<(String, String)> = Vec::new();
        if let Some(inner) = rest {
            if inner.contains('[') || inner.contains(']') {
                return Err(bad("nested brackets are not allowed".into()));
            }
            for seg in inner.split(',') {
                let seg = seg.trim();
                match seg.split_once('=') {
                    Some((k, v)) => {
                        let k = k.trim().to_ascii_lowercase();
                        if k.is_empty() {
                            return Err(bad(format!("empty key in '{seg}'")));
                        }
                        if params.iter().any(|(pk, _)| *pk == k) {
                            return Err(bad(format!("key '{k}' given twice")));
                        }
                        params.push((k, v.trim().to_string()));
                    }
                    None if seg.is_empty() && inner.trim().is_empty() => {}
                    None => match params.last_mut() {
                        Some((_, v)) if !seg.is_empty() => {
                            v.push(',');
                            v.push_str(seg);
                        }
                        _ => return Err(bad(format!("'{seg}' is not key=value"))),
                    },
                }
            }
        }
        params.sort();
        Ok(Spec { name, params })
    }

    /// Canonical form: lower-case name, keys sorted, no spaces.
    pub fn canonical(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let kv: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}[{}]", self.name, kv.join(","))
    }

    /// Error if a key is not among `valid`.
    pub fn check_keys(&self, what: &'static str, valid: &[&str]) -> Result<(), SimError> {
        for (k, _) in &self.params {
            if !valid.contains(&k.as_str()) {
                return Err(SimError::UnknownKey {
                    what,
                    name: self.name.clone(),
                    key: k.clone(),
                    valid: if valid.is_empty() {
                        "(none: this one takes no parameters)".into()
                    } else {
                        valid.join(", ")
                    },
                });
            }
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Unsigned integer; accepts `_` separators and ns/us/ms/s suffixes
    /// (which convert to ns) for keys whose unit is ns.
    pub fn u64_or(&self, key: &str, default: u64) -> Result<u64, SimError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => {
                parse_u64(v).ok_or_else(|| self.bad_value(key, v, "a non-negative integer (e.g. 6000000 or 6ms)"))
            }
        }
    }

    /// A whole number (a count, a percentage, ticks: no time unit) in
    /// `range` (`default` when absent, which must be in it). Out of range is
    /// an error naming the key and the range, never a silent clamp.
    pub fn u64_in(&self, key: &str, default: u64, range: RangeInclusive<u64>) -> Result<u64, SimError> {
        let Some(raw) = self.get(key) else { return Ok(default) };
        match parse_digits(raw) {
            Some(v) if range.contains(&v) => Ok(v),
            _ => Err(self.bad_value(key, raw, &format!("a whole number from {} to {}", range.start(), range.end()))),
        }
    }

    /// A duration in ns (a number, or with a unit: `6ms`) in `range`.
    pub fn ns_in(&self, key: &str, default: u64, range: RangeInclusive<u64>) -> Result<u64, SimError> {
        let v = self.u64_or(key, default)?;
        if !range.contains(&v) {
            let raw = self.get(key).unwrap_or_default();
            let why = format!(
                "a duration from {} to {} (ns, or with a unit: 6ms)",
                fmt_ns(*range.start()),
                fmt_ns(*range.end())
            );
            return Err(self.bad_value(key, raw, &why));
        }
        Ok(v)
    }

    pub fn i64_or(&self, key: &str, default: i64) -> Result<i64, SimError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.replace('_', "").parse().map_err(|_| self.bad_value(key, v, "an integer")),
        }
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, SimError> {
        match self.get(key) {
            None => Ok(default),
            Some("1" | "true" | "on" | "yes") => Ok(true),
            Some("0" | "false" | "off" | "no") => Ok(false),
            Some(v) => Err(self.bad_value(key, v, "a boolean: 1/0, true/false, on/off")),
        }
    }

    /// A list of integers separated by ',' or ':'.
    pub fn i64_list_or(&self, key: &str, default: &[i64]) -> Result<Vec<i64>, SimError> {
        match self.get(key) {
            None => Ok(default.to_vec()),
            Some(v) => v
                .split([',', ':'])
                .map(|x| x.trim().parse::<i64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| self.bad_value(key, v, "a list of integers, e.g. 0,5,10")),
        }
    }

    pub fn bad_value(&self, key: &str, value: &str, expected: &str) -> SimError {
        SimError::BadValue {
            name: self.name.clone(),
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        }
    }
}

/// What a tunable holds and the values it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunableKind {
    /// A duration in ns, written as a number or with a unit (`6ms`).
    Duration { min_ns: u64, max_ns: u64 },
    /// A whole number without a unit (a count, a percentage, ticks).
    Count { min: u64, max: u64 },
    /// 1/0, true/false, on/off, yes/no; the default is 1 or 0.
    Bool,
}

/// How a default follows the machine a policy is built for. The table's
/// default is the value at [`BuildFor::LISTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Times `1 + ilog2(min(cpus, 8))`, Linux's sysctl_sched_tunable_scaling.
    LinuxCpus,
    /// `stathz / 10`, at least 1 (FreeBSD's realstathz/10).
    StathzTenth,
    /// `stathz` ticks: one second of the statistics clock.
    Stathz,
    /// `max(1, hz / 1000)` ticks.
    HzPerMs,
    /// At least 16 ticks, which is also the least accepted.
    SixteenTicks,
}

/// What a scaled default depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildFor {
    pub ncpus: usize,
    pub hz: u32,
    /// The policy's statistics clock (4BSD and ULE); unused elsewhere.
    pub stathz: u64,
}

impl BuildFor {
    /// Where the listed defaults hold: 1 CPU, HZ=1000, stathz 127.
    pub const LISTED: BuildFor = BuildFor { ncpus: 1, hz: 1000, stathz: 127 };

    fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.hz as u64
    }
}

impl Scale {
    /// For `schedlab list`: what the default scales with.
    pub fn describe(self) -> &'static str {
        match self {
            Scale::LinuxCpus => "CPUs: x 1+ilog2(min(cpus,8))",
            Scale::StathzTenth => "stathz: realstathz/10, at least 1",
            Scale::Stathz => "stathz: one second of stathz ticks",
            Scale::HzPerMs => "HZ: max(1, hz/1000)",
            Scale::SixteenTicks => "HZ: at least 16 ticks",
        }
    }

    /// The default for `at`, from the table's `listed` one.
    pub fn default_for(self, listed: u64, at: &BuildFor) -> u64 {
        match self {
            Scale::LinuxCpus => listed * crate::policy::linux_cpu_factor(at.ncpus),
            Scale::StathzTenth => (at.stathz / 10).max(1),
            Scale::Stathz => at.stathz,
            Scale::HzPerMs => (at.hz as u64 / 1000).max(1),
            Scale::SixteenTicks => (16 * at.tick_ns()).max(listed),
        }
    }

    /// The least accepted value for `at`, where it depends on it.
    fn min_for(self, at: &BuildFor) -> Option<u64> {
        match self {
            Scale::SixteenTicks => Some(16 * at.tick_ns()),
            _ => None,
        }
    }
}

/// The one description of a tunable: parsing, validation and `list` all
/// read it, so its default and range are stated once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunable {
    pub key: &'static str,
    pub kind: TunableKind,
    /// The default (ns for durations, 0/1 for booleans); where `scales` is
    /// set, the value at [`BuildFor::LISTED`].
    pub default: u64,
    /// How the default follows the CPUs, HZ or stathz.
    pub scales: Option<Scale>,
    pub help: &'static str,
}

impl Tunable {
    pub const fn duration(key: &'static str, default_ns: u64, min_ns: u64, max_ns: u64, help: &'static str) -> Self {
        Tunable { key, kind: TunableKind::Duration { min_ns, max_ns }, default: default_ns, scales: None, help }
    }

    pub const fn count(key: &'static str, default: u64, min: u64, max: u64, help: &'static str) -> Self {
        Tunable { key, kind: TunableKind::Count { min, max }, default, scales: None, help }
    }

    pub const fn boolean(key: &'static str, default: bool, help: &'static str) -> Self {
        Tunable { key, kind: TunableKind::Bool, default: default as u64, scales: None, help }
    }

    pub const fn scales_with(self, scale: Scale) -> Self {
        Tunable { scales: Some(scale), ..self }
    }

    /// The default when built for `at`.
    pub fn default_for(&self, at: &BuildFor) -> u64 {
        self.scales.map_or(self.default, |s| s.default_for(self.default, at))
    }

    /// `v` as the spec grammar reads it back ("6ms", "16", "1").
    pub fn fmt_value(&self, v: u64) -> String {
        match self.kind {
            TunableKind::Duration { .. } => fmt_ns(v),
            TunableKind::Count { .. } | TunableKind::Bool => v.to_string(),
        }
    }

    /// The accepted range as numbers, (0, 1) for a boolean.
    pub fn range(&self) -> RangeInclusive<u64> {
        match self.kind {
            TunableKind::Duration { min_ns, max_ns } => min_ns..=max_ns,
            TunableKind::Count { min, max } => min..=max,
            TunableKind::Bool => 0..=1,
        }
    }
}

impl Spec {
    /// The value of `t` (its table default when absent), checked against its range.
    pub fn tunable(&self, t: &Tunable) -> Result<u64, SimError> {
        debug_assert!(t.scales.is_none(), "{}: a scaled default needs tunable_for", t.key);
        self.tunable_read(t, t.default, t.range())
    }

    /// The value of `t` where its default (or least value) scales with `at`.
    pub fn tunable_for(&self, t: &Tunable, at: &BuildFor) -> Result<u64, SimError> {
        let r = t.range();
        let min = t.scales.and_then(|s| s.min_for(at)).map_or(*r.start(), |m| m.max(*r.start()));
        self.tunable_read(t, t.default_for(at), min..=*r.end())
    }

    /// A boolean tunable.
    pub fn flag(&self, t: &Tunable) -> Result<bool, SimError> {
        debug_assert!(t.kind == TunableKind::Bool, "{} is not a boolean", t.key);
        self.bool_or(t.key, t.default != 0)
    }

    fn tunable_read(&self, t: &Tunable, default: u64, range: RangeInclusive<u64>) -> Result<u64, SimError> {
        match t.kind {
            TunableKind::Duration { .. } => self.ns_in(t.key, default, range),
            TunableKind::Count { .. } => self.u64_in(t.key, default, range),
            TunableKind::Bool => self.bool_or(t.key, default != 0).map(u64::from),
        }
    }
}

/// `ns` in the largest unit that divides it ("1ms", "100us", "750ns", "0s"),
/// as [`parse_u64`] reads it back.
pub use schedlab_core::units::exact_duration as fmt_ns;

/// Digits with `_` between them ("6_000_000"): no sign, unit or fraction.
fn parse_digits(v: &str) -> Option<u64> {
    let v = v.trim();
    let ok = v.bytes().all(|b| b.is_ascii_digit() || b == b'_')
        && !v.starts_with('_')
        && !v.ends_with('_')
        && !v.contains("__");
    if !ok {
        return None;
    }
    v.replace('_', "").parse().ok()
}

/// "6000000", "6_000_000", "6ms", "500us", "2s", "100ns", "1.5ms".
pub fn parse_u64(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = [("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)]
        .into_iter()
        .find_map(|(unit, mult)| v.strip_suffix(unit).map(|n| (n, mult)))
        .unwrap_or((v, 1));
    let num = num.trim_end();
    if let Some(n) = parse_digits(num) {
        return n.checked_mul(mult);
    }
    // Plain decimal fractions, only with a unit ("1.5ms").
    let decimal = num.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && num.bytes().filter(|&b| b == b'.').count() == 1
        && num.len() > 1;
    if mult > 1 && decimal {
        let f: f64 = num.parse().ok()?;
        if f * (mult as f64) < 1.8e19 {
            return Some((f * mult as f64).round() as u64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_colon_grammar_reads_like_the_bracket_one() {
        for (colon, bracket) in [
            ("hogs:nice=0,5,10", "hogs[nice=0,5,10]"),
            ("cfs:sched_latency_ns=24ms,min_granularity_ns=3ms", "cfs[min_granularity_ns=3ms,sched_latency_ns=24ms]"),
            ("o1", "o1"),
            ("hackbench:", "hackbench[]"),
        ] {
            assert_eq!(Spec::parse(colon, "policy").unwrap(), Spec::parse(bracket, "policy").unwrap(), "{colon}");
        }
        assert!(Spec::parse("cfs:a=1[b=2]", "policy").is_err());
        assert!(Spec::parse("cfs:a", "policy").is_err());
    }

    #[test]
    fn parses_names_params_and_lists() {
        let s = Spec::parse(" CFS[sched_latency_ns=6000000, min_granularity_ns=750000]", "policy").unwrap();
        assert_eq!(s.name, "cfs");
        assert_eq!(s.canonical(), "cfs[min_granularity_ns=750000,sched_latency_ns=6000000]");
        let h = Spec::parse("hogs[nice=0,5,10]", "workload").unwrap();
        assert_eq!(h.i64_list_or("nice", &[]).unwrap(), vec![0, 5, 10]);
        assert_eq!(Spec::parse("o1", "policy").unwrap().canonical(), "o1");
        assert_eq!(Spec::parse("o1[]", "policy").unwrap().canonical(), "o1");
    }

    #[test]
    fn rejects_malformed_specs() {
        for bad in ["", "cfs[", "cfs]", "cfs[a=1,a=2]", "cfs[=3]", "cfs[x]", "c f s", "cfs[a=[1]]"] {
            assert!(Spec::parse(bad, "policy").is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn durations_convert_to_ns() {
        assert_eq!(parse_u64("6ms"), Some(6_000_000));
        assert_eq!(parse_u64("1.5ms"), Some(1_500_000));
        assert_eq!(parse_u64("750_000"), Some(750_000));
        assert_eq!(parse_u64("2s"), Some(2_000_000_000));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("1.5"), None);
        // Found by tests/fuzz_spec.rs: stray separators and exponents were read as numbers.
        for bad in ["_1", "1_", "1__0", "1e3ms", "infs", "nans", "-0s", ".ms", "1._5ms"] {
            assert_eq!(parse_u64(bad), None, "{bad}");
        }
        assert_eq!(parse_u64(".5ms"), Some(500_000));
    }
}
