pub mod calibrate;
pub mod check;
pub mod compare;
pub mod completions;
pub mod export;
pub mod history;
pub mod import;
pub mod list;
pub mod report;
pub mod rm;
pub mod run;
pub mod serve;
pub mod show;
pub mod sim;
pub mod sim_calibrate;
pub mod sync;

/// How a command ended, mapped to the exit status in `main`.
pub enum Outcome {
    Done,
    Interrupted,
    SomeFailed,
}

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Write `text` to FILE, or stdout for `-`.
pub fn write_output(path: &Path, text: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        std::io::stdout().write_all(text.as_bytes())?;
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}: choose a writable path", path.display()))
}

/// Write whichever of `--export-json/--export-csv/--export-markdown` were
/// given, rendering each only when asked; true if one went to stdout (then the
/// terminal table is not printed, so the output stays machine-readable).
pub fn write_exports(
    a: &crate::args::ExportArgs,
    json: impl FnOnce() -> Result<String>,
    csv: impl FnOnce() -> String,
    markdown: impl FnOnce() -> String,
) -> Result<bool> {
    let mut to_stdout = false;
    if let Some(p) = &a.export_json {
        write_output(p, &json()?)?;
        to_stdout |= p.as_os_str() == "-";
    }
    if let Some(p) = &a.export_csv {
        write_output(p, &csv())?;
        to_stdout |= p.as_os_str() == "-";
    }
    if let Some(p) = &a.export_markdown {
        write_output(p, &markdown())?;
        to_stdout |= p.as_os_str() == "-";
    }
    Ok(to_stdout)
}
