//! Print this machine's environment fingerprint as JSON.
fn main() {
    let env = schedlab_live::fingerprint::capture();
    println!("{}", serde_json::to_string_pretty(&env).expect("Environment serializes"));
}
