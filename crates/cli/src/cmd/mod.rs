pub mod compare;
pub mod history;
pub mod import;
pub mod list;
pub mod report;
pub mod run;
pub mod show;
pub mod sim;

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
