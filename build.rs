//! One link option for the release binary on Linux with glibc: packed relative relocations
//! (`-z pack-relative-relocs`, DT_RELR). A position-independent executable carries one
//! relocation entry (24 bytes on x86_64) per pointer in its data, about 1.4 MB in capvault's;
//! packed, they take a few kilobytes, and the loader applies them faster. The binary then needs
//! glibc 2.36 or later (the linker records the need, so an older glibc refuses it with a clear
//! error instead of misloading it), so the option is given only when the build machine's glibc
//! has it and the build is for this same machine; any other build links as before.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let linux_gnu = target.contains("-linux-gnu");
    if release && linux_gnu && target == host && host_glibc_has_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc (from `getconf GNU_LIBC_VERSION`) is 2.36 or later.
fn host_glibc_has_relr() -> bool {
    let Ok(out) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
