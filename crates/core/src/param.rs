//! Parameters, one typed description for everything a user tunes with
//! `name:key=value,...`: live benchmarks, simulator policies and
//! workloads. A [`Kind`] says what values a key takes; it alone parses,
//! validates, names what it expects in an error, and writes the value back
//! for `list`, `--help` and the stored record. Each side's table (the live
//! `ParamSpec`, the simulator's `Tunable` and workload [`Param`]s) wraps a
//! `Kind` with its own extras (quick defaults, scaling with the machine).
//!
//! Durations and sizes are typed: `interval=2ms`, `interval=2000us` and a
//! bare `interval=2000` (in the key's unit, which `list` states) are the
//! same value, which is stored as a whole number of that unit. A unit on a
//! plain count is an error, as is a value that is not a whole number of the
//! key's unit (`1500ns` for a key in us).

use crate::units::{exact_duration, exact_size, parse_duration_ns, parse_size_bytes};

/// The unit a duration key is kept in; a bare number is read in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    pub const fn ns(self) -> u64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }

    pub const fn suffix(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
}

/// The unit a size key is kept in; a bare number is read in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeUnit {
    Bytes,
    KiB,
    MiB,
}

impl SizeUnit {
    pub const fn bytes(self) -> u64 {
        match self {
            SizeUnit::Bytes => 1,
            SizeUnit::KiB => 1 << 10,
            SizeUnit::MiB => 1 << 20,
        }
    }

    pub const fn suffix(self) -> &'static str {
        match self {
            SizeUnit::Bytes => "bytes",
            SizeUnit::KiB => "KiB",
            SizeUnit::MiB => "MiB",
        }
    }
}

/// What values a parameter takes. Bounds are inclusive and, for durations
/// and sizes, in the key's own unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number; `_` separators are allowed (1_000_000).
    Count { min: u64, max: u64 },
    /// A duration kept as a whole number of `unit`.
    Duration { unit: TimeUnit, min: u64, max: u64 },
    /// A size kept as a whole number of `unit`.
    Size { unit: SizeUnit, min: u64, max: u64 },
    /// One of a fixed set of lower-case words.
    Choice(&'static [&'static str]),
    /// Whole numbers, comma-separated, each once (`copies=1,8`): a
    /// benchmark expands them into one case each.
    CountList { min: u64, max: u64 },
    /// Signed whole numbers, comma-separated, repeats allowed (`nice=0,0,5`).
    IntList { min: i64, max: i64 },
    /// On or off: 1/0, true/false, on/off, yes/no.
    Flag,
    /// Free text, e.g. a path or a command; kept as given (trimmed).
    Text,
}

impl Kind {
    /// The value's canonical text (what is stored and compared), or what
    /// was expected instead, for the caller's error message.
    pub fn parse(&self, raw: &str) -> Result<String, String> {
        let v = raw.trim();
        let bad = || Err(self.expected());
        match *self {
            Kind::Count { min, max } => match parse_count(v) {
                Some(n) if (min..=max).contains(&n) => Ok(n.to_string()),
                _ => bad(),
            },
            Kind::Duration { unit, min, max } => {
                let n = match parse_count(v) {
                    Some(n) => n,
                    None => {
                        let ns = parse_duration_ns(v).map_err(|_| self.expected())?;
                        if ns % unit.ns() != 0 {
                            return Err(format!("{}; {v} gives no whole number of {}", self.expected(), unit.suffix()));
                        }
                        ns / unit.ns()
                    }
                };
                if (min..=max).contains(&n) {
                    Ok(n.to_string())
                } else {
                    bad()
                }
            }
            Kind::Size { unit, min, max } => {
                let n = match parse_count(v) {
                    Some(n) => n,
                    None => {
                        let b = parse_size_bytes(v).map_err(|_| self.expected())?;
                        if b % unit.bytes() != 0 {
                            return Err(format!("{}; {v} gives no whole number of {}", self.expected(), unit.suffix()));
                        }
                        b / unit.bytes()
                    }
                };
                if (min..=max).contains(&n) {
                    Ok(n.to_string())
                } else {
                    bad()
                }
            }
            Kind::Choice(words) => {
                let w = v.to_ascii_lowercase();
                words.iter().find(|x| **x == w).map(|x| x.to_string()).ok_or_else(|| self.expected())
            }
            Kind::CountList { min, max } => {
                let mut seen: Vec<u64> = Vec::new();
                for part in v.split(',') {
                    match parse_count(part) {
                        Some(n) if (min..=max).contains(&n) && !seen.contains(&n) => seen.push(n),
                        _ => return bad(),
                    }
                }
                Ok(join(&seen))
            }
            Kind::IntList { min, max } => {
                let mut out: Vec<i64> = Vec::new();
                for part in v.split(',') {
                    match parse_int(part) {
                        Some(n) if (min..=max).contains(&n) => out.push(n),
                        _ => return bad(),
                    }
                }
                Ok(join(&out))
            }
            Kind::Flag => match parse_flag(v) {
                Some(on) => Ok(if on { "on" } else { "off" }.into()),
                None => bad(),
            },
            Kind::Text => {
                if v.is_empty() {
                    bad()
                } else {
                    Ok(v.to_string())
                }
            }
        }
    }

    /// What the kind accepts, for error messages and `list`.
    pub fn expected(&self) -> String {
        match *self {
            Kind::Count { min, max } => format!("a whole number from {min} to {max}, without a unit"),
            Kind::Duration { unit, min, max } => format!(
                "a duration from {} to {}: a bare number is in {}, or give a unit (e.g. 2ms, 500us)",
                self.show(&min.to_string()),
                self.show(&max.to_string()),
                unit.suffix()
            ),
            Kind::Size { unit, min, max } => format!(
                "a size from {} to {}: a bare number is in {}, or give a unit (e.g. 4KiB, 16MiB)",
                self.show(&min.to_string()),
                self.show(&max.to_string()),
                unit.suffix()
            ),
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::CountList { min, max } => {
                format!("one or more whole numbers from {min} to {max}, comma-separated, each once (e.g. {min},{max})")
            }
            Kind::IntList { min, max } => {
                format!("one or more whole numbers from {min} to {max}, comma-separated (e.g. {min},0,{max})")
            }
            Kind::Flag => "on or off (also 1/0, true/false, yes/no)".into(),
            Kind::Text => "a non-empty value".into(),
        }
    }

    /// A canonical value as a person reads it and the parser takes it back:
    /// durations and sizes in the largest unit that keeps them whole
    /// (`5ms`, `256MiB`), everything else as is.
    pub fn show(&self, canonical: &str) -> String {
        match (*self, parse_count(canonical)) {
            (Kind::Duration { unit, .. }, Some(n)) => exact_duration(n.saturating_mul(unit.ns())),
            (Kind::Size { unit, .. }, Some(n)) => exact_size(n.saturating_mul(unit.bytes())),
            _ => canonical.to_string(),
        }
    }

    /// The accepted range as `list` states it ("1 to 64", "50us to 10s",
    /// "-20 to 19"); None for words, flags and text.
    pub fn range_text(&self) -> Option<String> {
        let (lo, hi) = match *self {
            Kind::Count { min, max } | Kind::CountList { min, max } => (min.to_string(), max.to_string()),
            Kind::Duration { min, max, .. } | Kind::Size { min, max, .. } => {
                (self.show(&min.to_string()), self.show(&max.to_string()))
            }
            Kind::IntList { min, max } => (min.to_string(), max.to_string()),
            Kind::Choice(_) | Kind::Flag | Kind::Text => return None,
        };
        Some(format!("{lo} to {hi}"))
    }

    /// Whether the shown value carries its unit (a duration or a size).
    pub fn unit_in_value(&self) -> bool {
        matches!(self, Kind::Duration { .. } | Kind::Size { .. })
    }

    /// Whether a stored value is a number (JSON number, not text).
    pub fn is_number(&self) -> bool {
        matches!(self, Kind::Count { .. } | Kind::Duration { .. } | Kind::Size { .. } | Kind::CountList { .. })
    }
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// Digits with `_` between them ("6_000_000"): no sign, unit or fraction.
pub fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit() || b == b'_')
        && !s.starts_with('_')
        && !s.ends_with('_')
        && !s.contains("__");
    if !ok {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// A whole number with an optional sign ("-20", "+5", "0").
pub fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let n = i64::try_from(parse_count(digits)?).ok()?;
    Some(if neg { -n } else { n })
}

/// 1/0, true/false, on/off, yes/no (any case).
pub fn parse_flag(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// One parameter of a table whose defaults do not depend on the run (the
/// simulator's workloads); the live and simulator policy tables add what
/// theirs need around a [`Kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    /// The default as the parser takes it (`10ms`, `0,5`, `on`).
    pub default: &'static str,
    pub help: &'static str,
    /// The key's name before units left key names (`interval_ns`), still
    /// accepted with a note for a release.
    pub old_name: Option<&'static str>,
}

impl Param {
    pub const fn new(name: &'static str, kind: Kind, default: &'static str, help: &'static str) -> Param {
        Param { name, kind, default, help, old_name: None }
    }

    pub const fn was(self, old_name: &'static str) -> Param {
        Param { old_name: Some(old_name), ..self }
    }
}

/// Given `key=value` pairs checked against `table`, every key resolved to
/// its canonical value (defaults filled in), in the table's order; old key
/// names are taken as their new ones, and the second list says which were.
/// Errors name the key, the value and what was expected.
pub fn resolve(given: &[(String, String)], table: &[Param]) -> Result<Resolved, ParamError> {
    let mut renamed = Vec::new();
    let mut values: Vec<(&'static str, String)> = Vec::new();
    for (k, _) in given {
        let known = table.iter().any(|p| p.name == k || p.old_name == Some(k.as_str()));
        if !known {
            return Err(ParamError::Unknown { key: k.clone(), valid: table.iter().map(|p| p.name).collect() });
        }
    }
    for p in table {
        let by_new = given.iter().find(|(k, _)| k == p.name);
        let by_old = p.old_name.and_then(|o| given.iter().find(|(k, _)| k == o));
        let raw = match (by_new, by_old) {
            (Some(_), Some(_)) => {
                return Err(ParamError::Twice { key: p.name.to_string(), old: p.old_name.unwrap_or_default().into() });
            }
            (Some((_, v)), None) => v.as_str(),
            (None, Some((old, v))) => {
                renamed.push((old.clone(), p.name));
                v.as_str()
            }
            (None, None) => p.default,
        };
        let value = p.kind.parse(raw).map_err(|expected| ParamError::Bad {
            key: p.name.to_string(),
            value: raw.to_string(),
            expected,
        })?;
        values.push((p.name, value));
    }
    Ok(Resolved { values, renamed })
}

/// A table's values after [`resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub values: Vec<(&'static str, String)>,
    /// (old key as given, its new name).
    pub renamed: Vec<(String, &'static str)>,
}

impl Resolved {
    /// The canonical value of `key`; the key must be in the table.
    pub fn get(&self, key: &str) -> &str {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{key} is not in this parameter table"))
    }

    /// A count, duration (in its unit) or size (in its unit).
    pub fn u64(&self, key: &str) -> u64 {
        parse_count(self.get(key)).unwrap_or_else(|| panic!("{key} is not a number"))
    }

    pub fn ints(&self, key: &str) -> Vec<i64> {
        self.get(key).split(',').map(|p| parse_int(p).unwrap_or_else(|| panic!("{key} is not a list"))).collect()
    }

    pub fn flag(&self, key: &str) -> bool {
        self.get(key) == "on"
    }
}

/// Why a parameter list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamError {
    Unknown { key: String, valid: Vec<&'static str> },
    Bad { key: String, value: String, expected: String },
    Twice { key: String, old: String },
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamError::Unknown { key, valid } if valid.is_empty() => {
                write!(f, "unknown key '{key}': this one takes no parameters")
            }
            ParamError::Unknown { key, valid } => write!(f, "unknown key '{key}' (valid: {})", valid.join(", ")),
            ParamError::Bad { key, value, expected } => write!(f, "{key}={value} is not valid: expected {expected}"),
            ParamError::Twice { key, old } => {
                write!(f, "{key} is given twice, also as its old name {old}: give it once, as {key}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Kind = Kind::Duration { unit: TimeUnit::Us, min: 1, max: 1_000_000 };
    const KIB: Kind = Kind::Size { unit: SizeUnit::KiB, min: 1, max: 1 << 20 };

    #[test]
    fn durations_take_units_and_bare_numbers_in_the_keys_unit() {
        for (raw, canonical) in
            [("2000", "2000"), ("2ms", "2000"), ("2000us", "2000"), ("1.5ms", "1500"), ("1s", "1000000")]
        {
            assert_eq!(US.parse(raw).as_deref(), Ok(canonical), "{raw}");
        }
        let e = US.parse("1500ns").unwrap_err();
        assert!(e.contains("no whole number of us"), "{e}");
        for bad in ["0", "2x", "-1ms", "1e3ms", "2 ms ms", "", "2001s"] {
            assert!(US.parse(bad).is_err(), "{bad}");
        }
        assert_eq!(US.show("5000"), "5ms");
        assert_eq!(US.range_text().as_deref(), Some("1us to 1s"));
        assert!(US.expected().contains("from 1us to 1s"), "{}", US.expected());
    }

    #[test]
    fn sizes_take_units_and_counts_refuse_them() {
        assert_eq!(KIB.parse("16MiB").as_deref(), Ok("16384"));
        assert_eq!(KIB.parse("4").as_deref(), Ok("4"));
        assert!(KIB.parse("1000B").unwrap_err().contains("no whole number of KiB"));
        assert_eq!(KIB.show("262144"), "256MiB");
        let count = Kind::Count { min: 1, max: 100 };
        assert!(count.parse("6ms").unwrap_err().contains("without a unit"));
        assert_eq!(count.parse("1_0").as_deref(), Ok("10"));
    }

    #[test]
    fn lists_flags_and_words() {
        let nice = Kind::IntList { min: -20, max: 19 };
        assert_eq!(nice.parse("0, -20,+5,0").as_deref(), Ok("0,-20,5,0"));
        assert!(nice.parse("20").is_err() && nice.parse("").is_err() && nice.parse("1,,2").is_err());
        let copies = Kind::CountList { min: 1, max: 64 };
        assert_eq!(copies.parse("1,8").as_deref(), Ok("1,8"));
        assert!(copies.parse("1,1").is_err());
        assert_eq!(Kind::Flag.parse("Yes").as_deref(), Ok("on"));
        assert_eq!(Kind::Flag.parse("0").as_deref(), Ok("off"));
        assert!(Kind::Flag.parse("maybe").is_err());
        assert_eq!(Kind::Choice(&["a", "b"]).parse(" B ").as_deref(), Ok("b"));
    }

    #[test]
    fn resolve_fills_defaults_takes_old_names_and_names_bad_keys() {
        let table = [
            Param::new("interval", Kind::Duration { unit: TimeUnit::Ns, min: 1, max: u64::MAX }, "10ms", "h")
                .was("interval_ns"),
            Param::new("groups", Kind::Count { min: 0, max: 10 }, "10", "h"),
        ];
        let r = resolve(&[], &table).unwrap();
        assert_eq!((r.u64("interval"), r.u64("groups")), (10_000_000, 10));
        let r = resolve(&[("interval_ns".into(), "5ms".into())], &table).unwrap();
        assert_eq!(r.u64("interval"), 5_000_000);
        assert_eq!(r.renamed, vec![("interval_ns".to_string(), "interval")]);
        let twice = [("interval_ns".into(), "5ms".into()), ("interval".into(), "1ms".into())];
        assert!(matches!(resolve(&twice, &table), Err(ParamError::Twice { .. })));
        let e = resolve(&[("group".into(), "1".into())], &table).unwrap_err().to_string();
        assert!(e.contains("unknown key 'group'") && e.contains("interval, groups"), "{e}");
        let e = resolve(&[("groups".into(), "11".into())], &table).unwrap_err().to_string();
        assert!(e.contains("groups=11") && e.contains("from 0 to 10"), "{e}");
    }
}
