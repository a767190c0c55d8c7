//! Benchmark parameters: `key=value,key=value` strings checked strictly
//! against each benchmark's [`ParamSpec`] list. Unknown keys, duplicates and
//! out-of-range values are errors, never silently ignored.

use crate::error::LiveError;
use std::collections::BTreeMap;
use std::fmt;

use schedlab_core::param::parse_count;
/// What values a parameter accepts: the one kind shared with the simulator
/// (`schedlab_core::param::Kind`), so units, ranges and messages agree.
pub use schedlab_core::param::Kind as ParamKind;
pub use schedlab_core::param::{SizeUnit, TimeUnit};

/// One parameter of a benchmark, as shown by `schedlab list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: &'static str,
    /// Default in full mode, as the parser takes it (`1000`, `5ms`).
    pub default: &'static str,
    /// Default in quick mode, when it differs.
    pub quick_default: Option<&'static str>,
    /// What a count counts ("round trips"); "" for words, and for durations
    /// and sizes, whose values carry their unit.
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

    /// The default as `schedlab list` writes it: durations and sizes in
    /// the largest unit that keeps them whole (`5ms`, `256MiB`), else as is.
    pub fn shown_default(&self) -> String {
        self.shown(self.default)
    }

    /// A value (as given or canonical) as `list` and headings write it.
    pub fn shown(&self, value: &str) -> String {
        match self.kind.parse(value) {
            Ok(canonical) => self.kind.show(&canonical),
            Err(_) => value.to_string(),
        }
    }

    /// Whether the value carries the unit (a duration or a size), so that
    /// `list` need not repeat it.
    pub fn unit_in_value(&self) -> bool {
        self.kind.unit_in_value()
    }

    /// Human description of the accepted values, used in error messages.
    pub fn expected(&self) -> String {
        self.kind.expected()
    }

    fn check(&self, bench: &'static str, value: &str) -> Result<String, LiveError> {
        self.kind.parse(value).map_err(|expected| LiveError::BadParam {
            bench,
            key: self.name.to_string(),
            value: value.to_string(),
            expected,
        })
    }
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
    /// A part without `=` continues the previous value, so a list can be
    /// written as is: "copies=1,8,duration=300" gives copies "1,8".
    pub fn parse(input: &str) -> Result<Params, LiveError> {
        let mut p = Params::new();
        if input.trim().is_empty() {
            return Ok(p);
        }
        let mut last: Option<String> = None;
        // Keys whose value was quoted whole: it takes no continuation.
        let mut quoted_keys: Vec<String> = Vec::new();
        let parts = split_params(input).ok_or_else(|| LiveError::MalformedParams { input: input.to_string() })?;
        for (part, quoted) in &parts {
            let malformed = || LiveError::MalformedParams { input: input.to_string() };
            if !part.contains('=') {
                let (key, more) = (last.as_ref().ok_or_else(malformed)?, part.trim());
                if more.is_empty() || quoted_keys.contains(key) {
                    return Err(malformed());
                }
                p.values.get_mut(key).ok_or_else(malformed)?.push_str(&format!(",{more}"));
                continue;
            }
            let (k, v) = part.split_once('=').ok_or_else(malformed)?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(LiveError::MalformedParams { input: input.to_string() });
            }
            if p.values.insert(k.to_ascii_lowercase(), v.to_string()).is_some() {
                return Err(LiveError::DuplicateParam { key: k.to_string() });
            }
            last = Some(k.to_ascii_lowercase());
            if *quoted {
                quoted_keys.push(k.to_ascii_lowercase());
            }
        }
        // Found by tests/fuzz_params.rs, values whose normalised form could
        // not be read back: an unquoted value that opens a quote must close
        // it within itself (`a="x',b'"=1` was closed by the next parameter's
        // text), and a quoted one is whole (`a=",",'"` continued it).
        for (k, v) in &p.values {
            if let Some(q) = v.chars().next().filter(|c| matches!(c, '\'' | '"') && !quoted_keys.contains(k)) {
                if !v[1..].contains(q) {
                    return Err(LiveError::MalformedParams { input: input.to_string() });
                }
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

    /// Drop a value, e.g. one that means nothing in an expanded case (so
    /// it is neither stored nor part of the case's identity).
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.values.remove(key)
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

    /// A list-of-counts parameter ([`ParamKind::CountList`]); the value must
    /// already be resolved.
    pub fn counts(&self, key: &str) -> Result<Vec<u64>, LiveError> {
        let v = self.get(key).ok_or_else(|| missing(key))?;
        v.split(',')
            .map(|part| {
                parse_count(part).ok_or_else(|| LiveError::BadParam {
                    bench: "params",
                    key: key.to_string(),
                    value: v.to_string(),
                    expected: "whole numbers separated by commas".into(),
                })
            })
            .collect()
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
                // A one-element count list ("copies=8", as each expanded case holds it) is a number too.
                let is_count = specs.iter().any(|s| s.name == k && s.kind.is_number());
                let json = match parse_count(v) {
                    Some(n) if is_count => serde_json::Value::from(n),
                    _ => serde_json::Value::from(v.clone()),
                };
                (k.clone(), json)
            })
            .collect()
    }
}

/// Split "k=v,k=v" at commas, except inside a value quoted whole, from
/// just after `=` to just before a comma or the end, with '...' or "...":
/// `cmd='make -C a,b -j{j}'`; those quotes are dropped. Any other quote is
/// an ordinary character (`cmd=make 'x'` keeps it for the shell). None: a
/// value opens a quote that never closes. Each part says if it was quoted.
fn split_params(input: &str) -> Option<Vec<(String, bool)>> {
    let mut parts = Vec::new();
    let mut rest = input;
    loop {
        if let Some((part, after)) = quoted_value(rest)? {
            parts.push((part, true));
            match after {
                Some(r) => rest = r,
                None => return Some(parts),
            }
            continue;
        }
        match rest.split_once(',') {
            Some((part, r)) => {
                parts.push((part.to_string(), false));
                rest = r;
            }
            None => {
                parts.push((rest.to_string(), false));
                return Some(parts);
            }
        }
    }
}

/// `key='value'` at the start of `rest` as "key=value", and the text after
/// its comma (None: it ends the input). Some(None): no quoted value here.
#[allow(clippy::type_complexity)]
fn quoted_value(rest: &str) -> Option<Option<(String, Option<&str>)>> {
    let Some(eq) = rest.find('=').filter(|&eq| !rest[..eq].contains(',')) else { return Some(None) };
    let value = rest[eq + 1..].trim_start();
    let Some(q) = value.chars().next().filter(|c| matches!(c, '\'' | '"')) else { return Some(None) };
    let inner = &value[1..];
    let close = inner.find(q)?;
    let part = format!("{}={}", &rest[..eq], &inner[..close]);
    let after = inner[close + 1..].trim_start();
    if after.is_empty() {
        return Some(Some((part, None)));
    }
    Some(after.strip_prefix(',').map(|r| (part, Some(r))))
}

/// A value as `key=value` shows it so that [`Params::parse`] reads it back:
/// quoted when it holds a comma (other than a count list's) or starts with a quote.
fn display_value(v: &str) -> String {
    // Numbers between the commas: "1,8" but not "," or "1,,8" (fuzz_params).
    let list =
        v.split(',').all(|n| !n.trim().is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b"_ ".contains(&b)));
    if (v.contains(',') && !list) || v.starts_with(['\'', '"']) {
        if !v.contains('\'') {
            return format!("'{v}'");
        }
        if !v.contains('"') {
            return format!("\"{v}\"");
        }
    }
    v.to_string()
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
        let parts: Vec<String> = self.values.iter().map(|(k, v)| format!("{k}={}", display_value(v))).collect();
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
    fn durations_and_sizes_take_units_and_counts_do_not() {
        let spec = |name, kind| ParamSpec {
            name,
            default: "5000",
            quick_default: None,
            unit: "",
            help: "",
            kind,
            diagnostic: false,
        };
        let specs = [
            spec("interval", ParamKind::Duration { unit: TimeUnit::Us, min: 1, max: 10_000_000 }),
            spec("size", ParamKind::Size { unit: SizeUnit::KiB, min: 1, max: 10_000_000 }),
            spec("loops", ParamKind::Count { min: 1, max: 10_000_000 }),
        ];
        let resolve = |s: &str| Params::parse(s).unwrap().resolve("t", &specs, false);
        let p = resolve("interval=2ms,size=16MiB").unwrap();
        assert_eq!((p.count("interval").unwrap(), p.count("size").unwrap()), (2000, 16384));
        assert_eq!(resolve("interval=1000us").unwrap().count("interval").unwrap(), 1000);
        assert_eq!(resolve("interval=1000").unwrap().count("interval").unwrap(), 1000, "bare: the stated unit");
        let e = resolve("interval=1500ns").unwrap_err().to_string();
        assert!(e.contains("whole number of us") && e.contains("2ms"), "{e}");
        let e = resolve("loops=5ms").unwrap_err().to_string();
        assert!(e.contains("a whole number from 1"), "a count takes no unit: {e}");
        assert!(resolve("size=3ms").is_err(), "a size takes no time unit");
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
    fn count_lists_parse_with_commas_and_are_checked() {
        let specs = [ParamSpec {
            name: "copies",
            default: "1,8",
            quick_default: None,
            kind: ParamKind::CountList { min: 1, max: 64 },
            ..SPECS[0]
        }];
        let p = Params::parse("copies=1, 8,16").unwrap().resolve("shell", &specs, false).unwrap();
        assert_eq!(p.counts("copies").unwrap(), vec![1, 8, 16]);
        assert_eq!(p.to_string(), "copies=1,8,16");
        // The normalised form parses back to itself.
        assert_eq!(Params::parse(&p.to_string()).unwrap().resolve("shell", &specs, false).unwrap(), p);
        let d = Params::new().resolve("shell", &specs, true).unwrap();
        assert_eq!(d.counts("copies").unwrap(), vec![1, 8]);
        assert_eq!(d.to_json(&specs)["copies"], serde_json::json!("1,8"));
        let one = Params::parse("copies=8").unwrap().resolve("shell", &specs, false).unwrap();
        assert_eq!(one.to_json(&specs)["copies"], serde_json::json!(8), "one case's value stays a number");
        for bad in ["0", "1,0", "1,65", "1,1", "x", "1,-2"] {
            let e = Params::new().with("copies", bad).resolve("shell", &specs, false).unwrap_err();
            assert!(e.to_string().contains("from 1 to 64, comma-separated"), "{bad}: {e}");
        }
        // A continuation needs a key before it and no empty part.
        assert!(matches!(Params::parse("8,copies=1"), Err(LiveError::MalformedParams { .. })));
        assert!(matches!(Params::parse("copies=1, ,8"), Err(LiveError::MalformedParams { .. })));
        let two = Params::parse("copies=1,8,mode=Thread").unwrap();
        assert_eq!((two.get("copies"), two.get("mode")), (Some("1,8"), Some("Thread")));
    }

    #[test]
    fn quoted_values_keep_commas_and_spaces() {
        let p = Params::parse("cmd='make -C ~/src/a,b -j{j}', clean = \"rm -f 'x'\",jobs=1,2,4").unwrap();
        assert_eq!(p.get("cmd"), Some("make -C ~/src/a,b -j{j}"));
        assert_eq!(p.get("clean"), Some("rm -f 'x'"), "inner quotes are the shell's");
        assert_eq!(p.get("jobs"), Some("1,2,4"));
        // A quote that does not enclose the whole value is an ordinary character.
        let p = Params::parse("cmd='a' && 'b',x=1").unwrap();
        assert_eq!((p.get("cmd"), p.get("x")), (Some("'a' && 'b'"), Some("1")));
        assert_eq!(Params::parse("cmd=make 'x'").unwrap().get("cmd"), Some("make 'x'"));
        assert_eq!(Params::parse("cmd=\"it's\"").unwrap().get("cmd"), Some("it's"));
        // Display quotes what needs it, so the text parses back to the same values.
        let p = Params::new().with("cmd", "make -C a,b").with("jobs", "1,2").with("q", "it's, ok").with("n", "3");
        assert_eq!(p.to_string(), "cmd='make -C a,b',jobs=1,2,n=3,q=\"it's, ok\"");
        assert_eq!(Params::parse(&p.to_string()).unwrap(), p);
        for bad in ["cmd='make -j4", "cmd=\"a,b", "cmd=''", "cmd='a',"] {
            assert!(matches!(Params::parse(bad), Err(LiveError::MalformedParams { .. })), "{bad}");
        }
        // Found by tests/fuzz_params.rs: accepted, but their text did not parse back.
        for bad in ["0=\"','\"=_", "a=\",\",'\""] {
            assert!(matches!(Params::parse(bad), Err(LiveError::MalformedParams { .. })), "{bad}");
        }
        let p = Params::parse("_=','").unwrap();
        assert_eq!((p.get("_"), Params::parse(&p.to_string()).unwrap()), (Some(","), p.clone()));
        // A quoted value may start with the other quote, unclosed.
        let p = Params::parse("cmd='\"x'").unwrap();
        assert_eq!((p.get("cmd"), Params::parse(&p.to_string()).unwrap()), (Some("\"x"), p.clone()));
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
