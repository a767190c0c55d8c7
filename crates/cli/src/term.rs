//! The terminal, known only here: its width is read once and passed down to
//! the report crate, which lays text out for whatever width it is given.

use std::io::IsTerminal;

/// Width tables are laid out for when stdout is not a terminal (a pipe or a file).
const NOT_A_TERMINAL: usize = 100;

fn columns() -> Option<usize> {
    std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&c| c > 0)
}

/// `$COLUMNS` when set, else the width of the terminal on stdout, else 100.
pub fn width() -> usize {
    columns().or_else(|| terminal_size::terminal_size().map(|(w, _)| w.0 as usize)).unwrap_or(NOT_A_TERMINAL)
}

/// Width prose is wrapped to: `$COLUMNS`, else the terminal's when the
/// stream is one; None (one line per message, for grep and logs) otherwise.
fn prose_width(is_terminal: bool) -> Option<usize> {
    columns().or_else(|| is_terminal.then(width))
}

fn wrapped(text: &str, width: Option<usize>) -> String {
    match width {
        Some(w) => schedlab_report::text::wrap(text, w, 2),
        None => text.to_string(),
    }
}

/// Print a line of prose on stdout, wrapped at word boundaries on a terminal.
pub fn say(text: impl AsRef<str>) {
    println!("{}", wrapped(text.as_ref(), prose_width(std::io::stdout().is_terminal())));
}

/// Print a note on stderr (an older spelling still accepted, ...), wrapped like [`say`].
pub fn note(text: impl AsRef<str>) {
    let text = format!("note: {}", text.as_ref());
    eprintln!("{}", wrapped(&text, prose_width(std::io::stderr().is_terminal())));
}

/// Print a warning on stderr, wrapped like [`say`].
pub fn warn(text: impl AsRef<str>) {
    let text = format!("warning: {}", text.as_ref());
    eprintln!("{}", wrapped(&text, prose_width(std::io::stderr().is_terminal())));
}
