//! Write the `shell` benchmark's script, input and copy directories into an
//! existing, empty directory, so a plain shell loop can run the very same
//! workload (bench/shell-vs-sh.sh).
//!
//! Usage: cargo run --release -p schedlab-live --example shell_workload -- DIR [COPIES]

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), copies) = (args.next(), args.next()) else {
        eprintln!("usage: shell_workload DIR [COPIES]");
        std::process::exit(2);
    };
    let copies: u64 = copies.map_or(Ok(1), |c| c.parse()).unwrap_or_else(|_| {
        eprintln!("COPIES must be a whole number");
        std::process::exit(2);
    });
    match schedlab_live::benchmarks::shell::write_workload(std::path::Path::new(&dir), copies) {
        Ok(script) => println!("{}", script.display()),
        Err(e) => {
            eprintln!("writing the workload into {dir}: {e}");
            std::process::exit(1);
        }
    }
}
