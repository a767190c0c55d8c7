//! Helpers shared by the live integration tests.

/// ftrace's settings that a breaktrace session changes.
/// The buffer size is in 8 KiB steps (the kernel rounds to pages): an
/// unused buffer ("7 (expanded: 1408)") comes back allocated at its
/// expanded size, which may read 1410.
pub fn ftrace_settings(dir: &std::path::Path) -> Vec<String> {
    ["tracing_on", "tracing_cpumask", "buffer_size_kb", "trace_clock", "set_event", "current_tracer"]
        .iter()
        .map(|f| {
            let v = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            let v = match *f {
                "buffer_size_kb" => {
                    let kb = v.split_once("(expanded:").map_or(v.as_str(), |(_, e)| e.trim_end().trim_end_matches(')'));
                    format!("{}", kb.trim().parse::<u64>().unwrap_or(0) / 8)
                }
                _ => v,
            };
            format!("{f}={v}")
        })
        .collect()
}
