//! `name[key=value,...]` strings, shared by policies and workloads.
//!
//! A segment without `=` continues the previous value, so list values read
//! naturally: `hogs[nice=0,5,10]` is one key `nice` with value `0,5,10`.

use crate::SimError;

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
        let (name, rest) = match s.find('[') {
            Some(i) => {
                let inner = s[i + 1..]
                    .strip_suffix(']')
                    .ok_or_else(|| bad("missing closing ']' (write name[key=value,...])".into()))?;
                (&s[..i], Some(inner))
            }
            None => {
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

/// "6000000", "6_000_000", "6ms", "500us", "2s", "100ns".
pub fn parse_u64(v: &str) -> Option<u64> {
    let v = v.trim().replace('_', "");
    let (num, mult) = if let Some(n) = v.strip_suffix("ns") {
        (n, 1)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 1_000)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        (v.as_str(), 1)
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult);
    }
    // Fractions only with a unit ("1.5ms").
    if mult > 1 {
        let f: f64 = num.parse().ok()?;
        if f.is_finite() && f >= 0.0 && f * (mult as f64) < 1.8e19 {
            return Some((f * mult as f64).round() as u64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
