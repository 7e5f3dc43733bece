//! Records the compiler's version for the upgrade fingerprint (`fingerprint`
//! in src/lib.rs): two builds lay the socket resource out alike only when the
//! same rustc built them.
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("-vV")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    println!(
        "cargo:rustc-env=NIFSOCK_RUSTC={}",
        version.replace('\n', " ").trim()
    );
    println!("cargo:rerun-if-changed=build.rs");
}
