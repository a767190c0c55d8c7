//! Benchmark parameters: `key=value,key=value` strings checked strictly
//! against each benchmark's [`ParamSpec`] list. Unknown keys, duplicates and
//! out-of-range values are errors, never silently ignored.

use crate::error::LiveError;
use std::collections::BTreeMap;
use std::fmt;

/// What values a parameter accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A whole number in `min..=max`; `_` separators are allowed (1_000_000).
    Count { min: u64, max: u64 },
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
}

/// One parameter of a benchmark, as shown by `schedlab list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: &'static str,
    /// Default in full mode.
    pub default: &'static str,
    /// Default in quick mode, when it differs.
    pub quick_default: Option<&'static str>,
    /// Unit of the value ("" for words), e.g. "round trips".
    pub unit: &'static str,
    pub help: &'static str,
    pub kind: ParamKind,
    /// A diagnostic switch (tracing, ...): at its default (off) it is left
    /// out of a stored result's parameters, so the result's identity
    /// (`BenchResult::key`) still matches runs made before it existed; when
    /// on it changes the measurement (tracing costs time) and is kept.
    pub diagnostic: bool,
}

impl ParamSpec {
    pub fn default_for(&self, quick: bool) -> &'static str {
        if quick {
            self.quick_default.unwrap_or(self.default)
        } else {
            self.default
        }
    }

    /// Human description of the accepted values, used in error messages.
    pub fn expected(&self) -> String {
        match self.kind {
            ParamKind::Count { min, max } => format!("a whole number from {min} to {max}"),
            ParamKind::Choice(words) => format!("one of {}", words.join(", ")),
        }
    }

    fn check(&self, bench: &'static str, value: &str) -> Result<String, LiveError> {
        let bad = || LiveError::BadParam {
            bench,
            key: self.name.to_string(),
            value: value.to_string(),
            expected: self.expected(),
        };
        match self.kind {
            ParamKind::Count { min, max } => {
                let n = parse_count(value).ok_or_else(bad)?;
                if !(min..=max).contains(&n) {
                    return Err(bad());
                }
                Ok(n.to_string())
            }
            ParamKind::Choice(words) => {
                let v = value.trim().to_ascii_lowercase();
                words.iter().find(|w| **w == v).map(|w| w.to_string()).ok_or_else(bad)
            }
        }
    }
}

/// Digits with optional `_` separators; no sign, no exponent.
fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'_') || s.starts_with('_') {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// Parameter values by name, kept in a stable (sorted) order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    /// Parse "key=value,key=value". An empty or blank string gives no params.
    pub fn parse(input: &str) -> Result<Params, LiveError> {
        let mut p = Params::new();
        if input.trim().is_empty() {
            return Ok(p);
        }
        for part in input.split(',') {
            let (k, v) = part.split_once('=').ok_or_else(|| LiveError::MalformedParams { input: input.to_string() })?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(LiveError::MalformedParams { input: input.to_string() });
            }
            if p.values.insert(k.to_ascii_lowercase(), v.to_string()).is_some() {
                return Err(LiveError::DuplicateParam { key: k.to_string() });
            }
        }
        Ok(p)
    }

    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Params {
        self.set(key, value);
        self
    }

    pub fn set(&mut self, key: &str, value: impl fmt::Display) {
        self.values.insert(key.to_string(), value.to_string());
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Check every key and value against `specs` and fill in defaults (quick
    /// or full). The result holds exactly one normalised value per spec.
    pub fn resolve(&self, bench: &'static str, specs: &[ParamSpec], quick: bool) -> Result<Params, LiveError> {
        for key in self.values.keys() {
            if !specs.iter().any(|s| s.name == key) {
                let valid = specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", ");
                return Err(LiveError::UnknownParam { bench, key: key.clone(), valid });
            }
        }
        let mut out = Params::new();
        for spec in specs {
            let raw = self.get(spec.name).unwrap_or(spec.default_for(quick));
            out.values.insert(spec.name.to_string(), spec.check(bench, raw)?);
        }
        Ok(out)
    }

    /// A count parameter; the value must already be resolved.
    pub fn count(&self, key: &str) -> Result<u64, LiveError> {
        let v = self.get(key).ok_or_else(|| missing(key))?;
        parse_count(v).ok_or_else(|| LiveError::BadParam {
            bench: "params",
            key: key.to_string(),
            value: v.to_string(),
            expected: "a whole number".into(),
        })
    }

    /// A word parameter; the value must already be resolved.
    pub fn word(&self, key: &str) -> Result<&str, LiveError> {
        self.get(key).ok_or_else(|| missing(key))
    }

    /// Values as JSON for `BenchResult::params`: counts become numbers.
    pub fn to_json(&self, specs: &[ParamSpec]) -> BTreeMap<String, serde_json::Value> {
        self.values
            .iter()
            .filter(|(k, v)| !specs.iter().any(|s| s.diagnostic && s.name == k.as_str() && s.default == v.as_str()))
            .map(|(k, v)| {
                let is_count = specs.iter().any(|s| s.name == k && matches!(s.kind, ParamKind::Count { .. }));
                let json = match parse_count(v) {
                    Some(n) if is_count => serde_json::Value::from(n),
                    _ => serde_json::Value::from(v.clone()),
                };
                (k.clone(), json)
            })
            .collect()
    }
}

fn missing(key: &str) -> LiveError {
    LiveError::BadParam {
        bench: "params",
        key: key.to_string(),
        value: String::new(),
        expected: "a value (resolve the params against the benchmark's specs first)".into(),
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            name: "loops",
            default: "1000000",
            quick_default: Some("1000"),
            unit: "round trips",
            help: "round trips per repetition",
            kind: ParamKind::Count { min: 1, max: 1_000_000_000 },
            diagnostic: false,
        },
        ParamSpec {
            name: "mode",
            default: "process",
            quick_default: None,
            unit: "",
            help: "tasks",
            kind: ParamKind::Choice(&["process", "thread"]),
            diagnostic: false,
        },
    ];

    #[test]
    fn a_diagnostic_switch_is_stored_only_when_on() {
        let specs = [
            SPECS[0],
            ParamSpec {
                name: "breaktrace",
                default: "0",
                kind: ParamKind::Count { min: 0, max: 10 },
                diagnostic: true,
                ..SPECS[0]
            },
        ];
        let off = Params::parse("").unwrap().resolve("cyclic", &specs, false).unwrap().to_json(&specs);
        assert_eq!(
            off.keys().collect::<Vec<_>>(),
            ["loops"],
            "results keep comparing with runs made before the switch"
        );
        let on = Params::parse("breaktrace=5").unwrap().resolve("cyclic", &specs, false).unwrap().to_json(&specs);
        assert_eq!(on["breaktrace"], serde_json::json!(5));
    }

    #[test]
    fn parses_pairs_and_fills_defaults() {
        let p = Params::parse(" loops = 1_000 , MODE=Thread").unwrap();
        let r = p.resolve("pipe", SPECS, false).unwrap();
        assert_eq!(r.count("loops").unwrap(), 1000);
        assert_eq!(r.word("mode").unwrap(), "thread");
        assert_eq!(r.to_string(), "loops=1000,mode=thread");
        let d = Params::parse("").unwrap().resolve("pipe", SPECS, true).unwrap();
        assert_eq!(d.count("loops").unwrap(), 1000);
        let full = Params::new().resolve("pipe", SPECS, false).unwrap();
        assert_eq!(full.count("loops").unwrap(), 1_000_000);
        let json = full.to_json(SPECS);
        assert_eq!(json["loops"], serde_json::json!(1_000_000));
        assert_eq!(json["mode"], serde_json::json!("process"));
    }

    #[test]
    fn malformed_and_duplicate_input_is_rejected() {
        assert!(matches!(Params::parse("loops"), Err(LiveError::MalformedParams { .. })));
        assert!(matches!(Params::parse("loops=1,,mode=x"), Err(LiveError::MalformedParams { .. })));
        assert!(matches!(Params::parse("=3"), Err(LiveError::MalformedParams { .. })));
        assert!(matches!(Params::parse("loops=1,loops=2"), Err(LiveError::DuplicateParam { .. })));
    }

    #[test]
    fn values_are_checked_strictly() {
        for bad in ["0", "-5", "1000000001", "1e6", "10k", "_1", "", "12.5"] {
            let p = Params::new().with("loops", bad);
            let e = p.resolve("pipe", SPECS, false).unwrap_err();
            assert!(matches!(e, LiveError::BadParam { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("from 1 to 1000000000"), "{e}");
        }
        let e = Params::parse("mode=fiber").unwrap().resolve("pipe", SPECS, false).unwrap_err();
        assert!(e.to_string().contains("one of process, thread"), "{e}");
        let e = Params::parse("lops=5").unwrap().resolve("pipe", SPECS, false).unwrap_err();
        assert!(matches!(e, LiveError::UnknownParam { .. }));
        assert!(e.to_string().contains("loops, mode"), "{e}");
    }
}
