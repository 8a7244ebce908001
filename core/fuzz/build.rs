//! The core's pyo3 is built with `extension-module` (no libpython: the interpreter that imports the module has
//! it). This executable embeds an interpreter for the few Python strings the record writer takes, so it links
//! libpython itself: the one python3 found on PYO3_PYTHON or PATH, with an rpath so it runs without
//! LD_LIBRARY_PATH.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    let python = std::env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = "import sysconfig as s; print(s.get_config_var('LIBDIR')); print(s.get_config_var('LDVERSION'))";
    let out = Command::new(&python).args(["-c", script]).output().expect("python3 runs (set PYO3_PYTHON)");
    assert!(out.status.success(), "{python} could not tell its LIBDIR");
    let text = String::from_utf8(out.stdout).expect("UTF-8 paths");
    let mut lines = text.lines();
    let (libdir, version) = (lines.next().unwrap_or_default(), lines.next().unwrap_or_default());
    println!("cargo:rustc-link-search=native={libdir}");
    println!("cargo:rustc-link-lib=dylib=python{version}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
}
