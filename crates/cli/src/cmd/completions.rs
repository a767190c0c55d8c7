//! `schedlab completions SHELL` and `schedlab manpage DIR`: shell completion
//! scripts and man pages generated from the clap definition in `args.rs` by the
//! binary itself, so what is installed always matches the binary that wrote it.

use super::Outcome;
use crate::args::{Cli, CompletionsArgs, ManpageArgs};
use anyhow::{Context, Result};
use clap::CommandFactory;

pub fn completions(a: CompletionsArgs) -> Result<Outcome> {
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_string();
    clap_complete::generate(a.shell, &mut cmd, name, &mut std::io::stdout());
    Ok(Outcome::Done)
}

pub fn manpage(a: ManpageArgs) -> Result<Outcome> {
    let dir = &a.dir;
    let hint = || {
        format!(
            "cannot write man pages to {}: choose a directory you can write (e.g. ~/.local/share/man/man1) \
             or run as root for /usr/local/share/man/man1",
            dir.display()
        )
    };
    std::fs::create_dir_all(dir).with_context(hint)?;
    let cmd = Cli::command();
    // The names clap_mangen gives: the command's page, then one per visible subcommand.
    let pages: Vec<String> = std::iter::once(format!("{}.1", cmd.get_name()))
        .chain(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| format!("{}-{}.1", cmd.get_name(), s.get_name())),
        )
        .collect();
    clap_mangen::generate_to(cmd, dir).with_context(hint)?;
    crate::term::say(format!("wrote {} man pages to {}: {}", pages.len(), dir.display(), pages.join(" ")));
    Ok(Outcome::Done)
}
