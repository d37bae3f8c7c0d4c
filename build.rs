//! Links the `tpusim` binary as a position-dependent executable on x86-64 Linux: a PIE's start-up applies a
//! relocation to every pointer in its read-only data, a copy-on-write page fault per page (about 35 of them
//! and a third of a millisecond of each short command, such as `preprocess --stats`).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os == "linux" && arch == "x86_64" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
