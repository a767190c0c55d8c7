//! `name[key=value,...]` strings, shared by policies and workloads.
//!
//! A segment without `=` continues the previous value, so list values read
//! naturally: `hogs[nice=0,5,10]` is one key `nice` with value `0,5,10`.

use crate::SimError;
use schedlab_core::param::{parse_count, Kind, TimeUnit};
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

    /// The current spelling, `name:key=value,...` (canonical stays the
    /// bracket form that stored runs are keyed by).
    pub fn colon_form(&self) -> String {
        let kv: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if kv.is_empty() {
            self.name.clone()
        } else {
            format!("{}:{}", self.name, kv.join(","))
        }
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

    /// A value that cannot be used, and why (a sentence, not a form).
    pub fn bad_value_why(&self, key: &str, value: &str, why: &str) -> SimError {
        SimError::BadValueWhy {
            name: self.name.clone(),
            key: key.to_string(),
            value: value.to_string(),
            why: why.to_string(),
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
/// read it, so its default and range are stated once. Its kind is the one
/// every parameter uses (`schedlab_core::param::Kind`): durations are kept
/// in ns (a bare number is ns, `6ms` works), counts take no unit, flags
/// are on/off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunable {
    pub key: &'static str,
    pub kind: Kind,
    /// The default (ns for durations, 0/1 for flags); where `scales` is
    /// set, the value at [`BuildFor::LISTED`].
    pub default: u64,
    /// How the default follows the CPUs, HZ or stathz.
    pub scales: Option<Scale>,
    pub help: &'static str,
    /// The key's name when key names carried units (`sched_latency_ns`),
    /// still accepted, with a note, for a release.
    pub old_key: Option<&'static str>,
}

impl Tunable {
    pub const fn duration(key: &'static str, default_ns: u64, min_ns: u64, max_ns: u64, help: &'static str) -> Self {
        let kind = Kind::Duration { unit: TimeUnit::Ns, min: min_ns, max: max_ns };
        Tunable { key, kind, default: default_ns, scales: None, help, old_key: None }
    }

    pub const fn count(key: &'static str, default: u64, min: u64, max: u64, help: &'static str) -> Self {
        Tunable { key, kind: Kind::Count { min, max }, default, scales: None, help, old_key: None }
    }

    pub const fn boolean(key: &'static str, default: bool, help: &'static str) -> Self {
        Tunable { key, kind: Kind::Flag, default: default as u64, scales: None, help, old_key: None }
    }

    pub const fn scales_with(self, scale: Scale) -> Self {
        Tunable { scales: Some(scale), ..self }
    }

    /// Its name before units left key names.
    pub const fn was(self, old_key: &'static str) -> Self {
        Tunable { old_key: Some(old_key), ..self }
    }

    /// The default when built for `at`.
    pub fn default_for(&self, at: &BuildFor) -> u64 {
        self.scales.map_or(self.default, |s| s.default_for(self.default, at))
    }

    /// `v` as the spec grammar reads it back ("6ms", "16", "on").
    pub fn fmt_value(&self, v: u64) -> String {
        match self.kind {
            Kind::Flag => if v != 0 { "on" } else { "off" }.to_string(),
            kind => kind.show(&v.to_string()),
        }
    }

    /// The accepted range as numbers, (0, 1) for a flag.
    pub fn range(&self) -> RangeInclusive<u64> {
        match self.kind {
            Kind::Duration { min, max, .. } | Kind::Count { min, max } => min..=max,
            _ => 0..=1,
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

    /// A flag tunable.
    pub fn flag(&self, t: &Tunable) -> Result<bool, SimError> {
        debug_assert!(t.kind == Kind::Flag, "{} is not a flag", t.key);
        self.tunable_read(t, t.default, 0..=1).map(|v| v != 0)
    }

    fn tunable_read(&self, t: &Tunable, default: u64, range: RangeInclusive<u64>) -> Result<u64, SimError> {
        let Some(raw) = self.get(t.key) else { return Ok(default) };
        let (min, max) = (*range.start(), *range.end());
        let kind = match t.kind {
            Kind::Duration { unit, .. } => Kind::Duration { unit, min, max },
            Kind::Count { .. } => Kind::Count { min, max },
            other => other,
        };
        let value = kind.parse(raw).map_err(|expected| self.bad_value(t.key, raw, &expected))?;
        Ok(match kind {
            Kind::Flag => u64::from(value == "on"),
            _ => parse_count(&value).expect("a count or duration parses to digits"),
        })
    }

    /// Take old key names (`table`'s `old_key`s) as their new ones; the pairs
    /// renamed, as given, for a note. Both names given is an error.
    pub fn rename_old_keys<'a>(
        &mut self,
        table: impl IntoIterator<Item = &'a Tunable>,
    ) -> Result<Vec<(String, &'static str)>, SimError> {
        let mut renamed = Vec::new();
        for t in table {
            let Some(old) = t.old_key else { continue };
            let Some(i) = self.params.iter().position(|(k, _)| k == old) else { continue };
            if self.get(t.key).is_some() {
                return Err(self.bad_value(
                    old,
                    &self.params[i].1.clone(),
                    &format!("{} once: {old} is its old name", t.key),
                ));
            }
            self.params[i].0 = t.key.to_string();
            renamed.push((old.to_string(), t.key));
        }
        self.params.sort();
        Ok(renamed)
    }

    /// Old key names taken as their new ones (see [`Spec::rename_old_keys`])
    /// and every valid value written one way (`5000000` and `5ms` are both
    /// `5ms`), so a stored condition names a setting once.
    pub fn normalize<'a>(
        &mut self,
        table: impl IntoIterator<Item = &'a Tunable> + Clone,
    ) -> Result<Vec<(String, &'static str)>, SimError> {
        let renamed = self.rename_old_keys(table.clone())?;
        for t in table {
            if let Some((_, v)) = self.params.iter_mut().find(|(k, _)| k == t.key) {
                if let Ok(canonical) = t.kind.parse(v) {
                    *v = t.kind.show(&canonical);
                }
            }
        }
        Ok(renamed)
    }
}

/// `ns` in the largest unit that divides it ("1ms", "100us", "750ns", "0s"),
/// as [`parse_ns`] reads it back.
pub use schedlab_core::units::exact_duration as fmt_ns;

/// A duration in ns: a bare number of ns ("6_000_000") or with a unit
/// ("6ms", "1.5ms"), as every duration parameter reads it.
pub fn parse_ns(v: &str) -> Option<u64> {
    let kind = Kind::Duration { unit: TimeUnit::Ns, min: 0, max: u64::MAX };
    parse_count(&kind.parse(v).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_colon_grammar_reads_like_the_bracket_one() {
        for (colon, bracket) in [
            ("hogs:nice=0,5,10", "hogs[nice=0,5,10]"),
            ("cfs:sched_latency=24ms,min_granularity=3ms", "cfs[min_granularity=3ms,sched_latency=24ms]"),
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
        let s = Spec::parse(" CFS[sched_latency=6000000, min_granularity=750000]", "policy").unwrap();
        assert_eq!(s.name, "cfs");
        assert_eq!(s.canonical(), "cfs[min_granularity=750000,sched_latency=6000000]");
        let h = Spec::parse("hogs[nice=0,5,10]", "workload").unwrap();
        assert_eq!(h.get("nice"), Some("0,5,10"));
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
        assert_eq!(parse_ns("6ms"), Some(6_000_000));
        assert_eq!(parse_ns("1.5ms"), Some(1_500_000));
        assert_eq!(parse_ns("750_000"), Some(750_000));
        assert_eq!(parse_ns("2s"), Some(2_000_000_000));
        assert_eq!(parse_ns("-1"), None);
        assert_eq!(parse_ns("1.5"), None);
        // Found by tests/fuzz_spec.rs: stray separators and exponents were read as numbers.
        for bad in ["_1", "1_", "1__0", "1e3ms", "infs", "nans", "-0s", ".ms", "1._5ms"] {
            assert_eq!(parse_ns(bad), None, "{bad}");
        }
        assert_eq!(parse_ns(".5ms"), Some(500_000));
    }
}
