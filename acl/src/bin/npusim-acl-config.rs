//! `npusim-acl-config`: the compiler and linker flags of npusim's C API, for the target
//! directory it was built in (`target/<profile>/`, wherever `CARGO_TARGET_DIR` puts it), in the
//! manner of `pkg-config`:
//!
//! ```sh
//! cc prog.c $(cargo run -q --release -p npusim-acl --bin npusim-acl-config -- --cflags --libs)
//! ```
//!
//! Options (any order, several at once): `--cflags` (the include directory), `--libs` (link
//! `libnpusim_acl.so`, with an rpath), `--static` (link `libnpusim_acl.a` and the system
//! libraries it needs), `--libdir`, `--includedir`, `--pc` (a `npusim_acl.pc` file for
//! `pkg-config`). Without options it prints `--cflags --libs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: npusim-acl-config [--cflags] [--libs] [--static] [--libdir] \
                     [--includedir] [--pc]";

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The directory of this executable: cargo puts the libraries beside it.
fn lib_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    let dir = exe
        .parent()
        .ok_or("the executable has no directory")?
        .to_path_buf();
    Ok(dir.canonicalize().unwrap_or(dir))
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        args = vec!["--cflags".into(), "--libs".into()];
    }
    let lib = match lib_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("npusim-acl-config: {e}");
            return ExitCode::FAILURE;
        }
    };
    let so = lib.join(format!(
        "{}npusim_acl{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    if !so.exists() {
        eprintln!(
            "npusim-acl-config: {} is missing: build it with `cargo build --release -p npusim-acl` \
             (the same profile and target directory as this tool)",
            so.display()
        );
        return ExitCode::FAILURE;
    }
    let inc = include_dir();
    let system_libs = if cfg!(target_os = "linux") {
        "-lpthread -ldl -lm -lrt"
    } else {
        "-lpthread -lm"
    };
    let mut out = Vec::new();
    for a in &args {
        match a.as_str() {
            "--cflags" => out.push(format!("-I{}", inc.display())),
            "--libs" => out.push(format!("-L{0} -lnpusim_acl -Wl,-rpath,{0}", lib.display())),
            "--static" => out.push(format!(
                "{} {system_libs}",
                lib.join("libnpusim_acl.a").display()
            )),
            "--libdir" => out.push(lib.display().to_string()),
            "--includedir" => out.push(inc.display().to_string()),
            "--pc" => {
                println!(
                    "libdir={}\nincludedir={}\n\nName: npusim_acl\nDescription: ACL-compatible C \
                     API over npusim, a simulated NPU\nVersion: {}\nCflags: -I${{includedir}}\n\
                     Libs: -L${{libdir}} -lnpusim_acl -Wl,-rpath,${{libdir}}\nLibs.private: {}",
                    lib.display(),
                    inc.display(),
                    env!("CARGO_PKG_VERSION"),
                    system_libs
                );
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("npusim-acl-config: unknown option {other}\n{USAGE}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{}", out.join(" "));
    ExitCode::SUCCESS
}
