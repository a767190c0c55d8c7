//! `schedlab`: the only crate that knows clap. It turns arguments into
//! validated plans, then calls `live`, `sim`, `store` and `report`.

#![forbid(unsafe_code)]

mod args;
mod cmd;
mod context;
mod term;

use clap::Parser;
use std::process::ExitCode;

/// Exit status of a run stopped by Ctrl-C, SIGTERM or --timeout (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    // A server must not die of a browser that closes a connection early.
    if !matches!(cli.command, args::Command::Run(_) | args::Command::Calibrate(_) | args::Command::Serve(_)) {
        schedlab_live::hygiene::restore_default_sigpipe();
    }
    let result = match cli.command {
        args::Command::Run(a) => cmd::run::run(cli.db.as_deref(), a),
        args::Command::Show(a) => cmd::show::show(cli.db.as_deref(), a),
        args::Command::Runs(a) => cmd::show::runs(cli.db.as_deref(), a),
        args::Command::Rm(a) => cmd::rm::run(cli.db.as_deref(), a),
        args::Command::Compare(a) => cmd::compare::run(cli.db.as_deref(), a),
        args::Command::History(a) => cmd::history::run(cli.db.as_deref(), a),
        args::Command::Report(a) => cmd::report::report(cli.db.as_deref(), a),
        args::Command::Plot(a) => cmd::report::plot(cli.db.as_deref(), a),
        args::Command::Import(a) => cmd::import::run(cli.db.as_deref(), a),
        args::Command::Sim(a) => cmd::sim::run(cli.db.as_deref(), a),
        args::Command::List => cmd::list::list(),
        args::Command::Check(a) => cmd::check::check(cli.db.as_deref(), a.restore),
        args::Command::Calibrate(a) => cmd::calibrate::run(cli.db.as_deref(), a),
        args::Command::Completions(a) => cmd::completions::completions(a),
        args::Command::Manpage(a) => cmd::completions::manpage(a),
        args::Command::Push(a) => cmd::sync::push(cli.db.as_deref(), a),
        args::Command::Pull(a) => cmd::sync::pull(cli.db.as_deref(), a),
        args::Command::Serve(a) => cmd::serve::serve(cli.db.as_deref(), a),
        args::Command::Export(a) => cmd::export::run(cli.db.as_deref(), a),
    };
    match result {
        Ok(cmd::Outcome::Done) => ExitCode::SUCCESS,
        Ok(cmd::Outcome::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Ok(cmd::Outcome::SomeFailed) => ExitCode::from(1),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}
