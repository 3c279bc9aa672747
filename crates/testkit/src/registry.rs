//! Test support: the embedded default registry re-signed with the committed test key, and
//! the edits fixture cases apply to it.

use std::path::{Component, Path, PathBuf};

use rimthan_registry::{
    Manifest, RegistryError, RegistryFiles, Sha256Digest, SigningKey, SigningKeyFile,
    VerifiedRegistry, embedded_files, external_policy, to_canonical_bytes, verify_registry,
};
use serde::Deserialize;
use serde_json::Value;

/// The embedded release the fixture cases edit (`@/` paths): the first one published.
pub const RELEASE: &str = "2026.12.0";

/// The repository root, found from whichever crate includes this module (the registry's tests
/// or the fuzz targets under `fuzz/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|p| p.join("crates/registry/Cargo.toml").is_file())
        .expect("built inside the rimthan repository")
        .to_path_buf()
}

/// The registry's fixture folders (`crates/registry/tests/data`).
pub fn data_dir() -> PathBuf {
    repo_root().join("crates/registry/tests/data")
}

fn key_from(path: &Path) -> SigningKey {
    let file: SigningKeyFile = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    SigningKey::from_file(&file).unwrap()
}

/// The committed key that test registries are signed with.
pub fn test_key() -> SigningKey {
    key_from(&data_dir().join("test-signing.key"))
}

/// The repository's development key of the embedded default release.
pub fn default_key() -> SigningKey {
    key_from(&repo_root().join("registry/default-release.key"))
}

/// Recomputes every entry's size and digest from the files, rewrites the manifest canonically
/// and signs it with `key`, adding the key to `keys/`.
pub fn reseal(files: &mut RegistryFiles, release: &str, key: &SigningKey) {
    let base = format!("releases/{release}/");
    let manifest_path = format!("{base}manifest.json");
    let mut manifest: Manifest =
        serde_json::from_slice(files.get(&manifest_path).unwrap()).unwrap();
    for entry in &mut manifest.entries {
        let bytes = files
            .get(&format!("{base}{}", entry.path))
            .expect("entry file")
            .clone();
        entry.bytes = bytes.len() as u64;
        entry.sha256 = Sha256Digest::of(&bytes);
    }
    manifest.entries.sort_by(|a, b| a.path.cmp(&b.path));
    let bytes = to_canonical_bytes(&manifest).unwrap();
    files.insert(
        format!("{base}manifest.sig"),
        to_canonical_bytes(&key.sign(&bytes)).unwrap(),
    );
    files.insert(manifest_path, bytes);
    let public = key.public_key_file();
    files.insert(
        format!("keys/{}.json", public.key_id),
        to_canonical_bytes(&public).unwrap(),
    );
}

/// The default registry, signed by the test key alone, as an operator's registry would be.
pub fn test_registry() -> RegistryFiles {
    let mut files = RegistryFiles::default();
    for path in embedded_files().paths().filter(|p| !p.starts_with("keys/")) {
        files.insert(path, embedded_files().get(path).unwrap().clone());
    }
    let releases: std::collections::BTreeSet<String> = files
        .paths()
        .filter_map(|p| p.strip_prefix("releases/")?.split('/').next())
        .map(str::to_owned)
        .collect();
    for release in &releases {
        reseal(&mut files, release, &test_key());
    }
    files
}

/// `files` (the test registry) with `bytes` as its manifest, correctly signed so that parsing
/// is reached.
pub fn with_signed_manifest(mut files: RegistryFiles, bytes: Vec<u8>) -> RegistryFiles {
    files.insert(
        format!("releases/{RELEASE}/manifest.sig"),
        to_canonical_bytes(&test_key().sign(&bytes)).unwrap(),
    );
    files.insert(format!("releases/{RELEASE}/manifest.json"), bytes);
    files
}

/// Verifies files as an operator's (external) registry.
pub fn verify_external(files: &RegistryFiles) -> Result<VerifiedRegistry, RegistryError> {
    verify_registry(files, &external_policy())
}

/// One fixture: `tests/data/<scenario>/case.json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What the case attacks, in a sentence.
    pub description: String,
    /// The edits applied to the test registry, in order.
    pub edits: Vec<Edit>,
    /// Re-sign after the edits: `test` (default), `none`, or `default-key`.
    #[serde(default = "test_seal")]
    pub seal: String,
    /// The refusal expected; absent for a case that must verify.
    #[serde(default)]
    pub expect: Option<Expect>,
}

fn test_seal() -> String {
    "test".into()
}

/// The refusal a case expects.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The registry error code.
    pub code: String,
    /// The broken rule, for codes that name one.
    #[serde(default)]
    pub rule: Option<String>,
    /// A substring the message must contain (the file or entry it names).
    pub names: String,
    /// Further substrings the message must contain.
    #[serde(default)]
    pub also_names: Vec<String>,
}

/// An edit of a registry-relative file (`releases/…` paths may start with `@/` for the release).
/// The fields say what their names say: the file, the text or JSON pointer, the new value.
#[allow(missing_docs)]
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Edit {
    /// Replace the first occurrence of `find` with `with` in a text file.
    Replace {
        path: String,
        find: String,
        with: String,
    },
    /// Delete a file.
    Remove { path: String },
    /// Write a text file.
    Write { path: String, text: String },
    /// Write a file of `bytes` zero bytes.
    WriteZeros { path: String, bytes: usize },
    /// Set a JSON pointer in a JSON file (rewritten canonically); the last segment may name a
    /// new key of an existing object.
    Set {
        path: String,
        pointer: String,
        value: Value,
    },
    /// Set a JSON pointer in the manifest entry whose `path` is `entry`.
    SetEntry {
        entry: String,
        pointer: String,
        value: Value,
    },
    /// Add a manifest entry (its `bytes` and `sha256` are filled in when the case is sealed).
    AddEntry { entry: Value },
}

fn resolve(path: &str) -> String {
    match path.strip_prefix("@/") {
        Some(rest) => format!("releases/{RELEASE}/{rest}"),
        None => path.to_owned(),
    }
}

fn set_pointer(doc: &mut Value, pointer: &str, value: Value) {
    if let Some(slot) = doc.pointer_mut(pointer) {
        *slot = value;
        return;
    }
    let (parent, key) = pointer
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("no JSON pointer {pointer}"));
    let object = doc
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no JSON object at {parent} to add {key} to"));
    object.insert(key.replace("~1", "/").replace("~0", "~"), value);
}

impl Case {
    /// Reads `tests/data/<scenario>/case.json`.
    pub fn load(scenario: &str) -> Case {
        let path = data_dir().join(scenario).join("case.json");
        serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The test registry with this case's edits applied and sealed as it says.
    pub fn apply(&self) -> RegistryFiles {
        let mut files = test_registry();
        let manifest_path = format!("releases/{RELEASE}/manifest.json");
        for edit in &self.edits {
            match edit {
                Edit::Replace { path, find, with } => {
                    let path = resolve(path);
                    let text = std::str::from_utf8(files.get(&path).expect(&path))
                        .unwrap()
                        .to_owned();
                    assert!(text.contains(find.as_str()), "{path} lacks {find:?}");
                    files.insert(path, text.replacen(find.as_str(), with, 1).into_bytes());
                }
                Edit::Remove { path } => {
                    let mut kept = RegistryFiles::default();
                    let path = resolve(path);
                    for p in files.paths().filter(|p| *p != path) {
                        kept.insert(p, files.get(p).unwrap().clone());
                    }
                    files = kept;
                }
                Edit::Write { path, text } => {
                    files.insert(resolve(path), text.clone().into_bytes())
                }
                Edit::WriteZeros { path, bytes } => files.insert(resolve(path), vec![0u8; *bytes]),
                Edit::Set {
                    path,
                    pointer,
                    value,
                } => {
                    let path = resolve(path);
                    let mut doc: Value =
                        serde_json::from_slice(files.get(&path).expect(&path)).unwrap();
                    set_pointer(&mut doc, pointer, value.clone());
                    files.insert(path, to_canonical_bytes(&doc).unwrap());
                }
                Edit::SetEntry {
                    entry,
                    pointer,
                    value,
                } => {
                    let mut doc: Value =
                        serde_json::from_slice(files.get(&manifest_path).unwrap()).unwrap();
                    let entries = doc["entries"].as_array_mut().unwrap();
                    let target = entries
                        .iter_mut()
                        .find(|e| e["path"] == entry.as_str())
                        .unwrap_or_else(|| panic!("no entry {entry}"));
                    set_pointer(target, pointer, value.clone());
                    files.insert(manifest_path.clone(), to_canonical_bytes(&doc).unwrap());
                }
                Edit::AddEntry { entry } => {
                    let mut doc: Value =
                        serde_json::from_slice(files.get(&manifest_path).unwrap()).unwrap();
                    let mut entry = entry.clone();
                    entry["bytes"] = 0.into();
                    entry["sha256"] = Sha256Digest::of(b"").to_string().into();
                    doc["entries"].as_array_mut().unwrap().push(entry);
                    files.insert(manifest_path.clone(), to_canonical_bytes(&doc).unwrap());
                }
            }
        }
        match self.seal.as_str() {
            "test" => reseal(&mut files, RELEASE, &test_key()),
            "default-key" => reseal(&mut files, RELEASE, &default_key()),
            "none" => {}
            other => panic!("unknown seal {other}"),
        }
        files
    }
}

/// Reserved roots, compared after folding case and trailing dots and spaces.
const RESERVED: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", ".rimthan", "git~1"];
/// Windows device names, compared on the folded stem.
const DEVICES: &[&str] = &[
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9", "conin$",
    "conout$",
];

/// Whether a path the checks accepted really stays inside the project: at least one plain
/// segment, none of them a reserved root or a device name. The error says which rule broke.
pub fn contained(path: &str) -> Result<(), String> {
    let mut depth = 0;
    for component in Path::new(path).components() {
        let Component::Normal(part) = component else {
            return Err(format!("{path} has {component:?}"));
        };
        let folded = part
            .to_string_lossy()
            .trim_end_matches(['.', ' '])
            .to_ascii_lowercase();
        if RESERVED.contains(&folded.as_str()) {
            return Err(format!("{path} reaches {folded}"));
        }
        let stem = folded
            .split('.')
            .next()
            .unwrap_or_default()
            .trim_end_matches(' ');
        if DEVICES.contains(&stem) {
            return Err(format!("{path} names device {stem}"));
        }
        depth += 1;
    }
    if depth == 0 {
        return Err(format!("{path:?} names no file"));
    }
    Ok(())
}
