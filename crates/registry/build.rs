//! Embeds the committed default registry (`registry/default/` at the workspace root) as a list
//! of `(path, bytes)` pairs, so the binary serves it with no files on disk.

use std::{env, fs, path::Path};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/default");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    if root.exists() {
        collect(&root, &root, &mut files);
    }
    files.sort();
    let mut out = String::from(
        "/// The embedded default registry's files.\npub(crate) static EMBEDDED_FILES: &[(&str, &[u8])] = &[\n",
    );
    for (rel, abs) in &files {
        println!("cargo::rerun-if-changed={abs}");
        out.push_str(&format!("    ({rel:?}, include_bytes!({abs:?})),\n"));
    }
    out.push_str("];\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("embedded_files.rs");
    fs::write(dest, out).expect("write embedded_files.rs");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).expect("read registry/default") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            println!("cargo::rerun-if-changed={}", path.display());
            collect(root, &path, files);
        } else {
            let rel = path.strip_prefix(root).expect("under root");
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let abs = path.canonicalize().expect("canonical path");
            files.push((rel, abs.display().to_string()));
        }
    }
}
