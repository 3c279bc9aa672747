//! A registry as an in-memory map of relative path → bytes, read from a folder or embedded.
//!
//! Verification runs on this map, so the embedded default and an operator's folder go through
//! the same checks. Reading refuses symlinks, FIFOs, devices and sockets, and caps every file's
//! size before reading it.

use std::{
    collections::BTreeMap,
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::{error::RegistryError, regular::read_regular};

/// Largest file a registry may hold.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The files of a registry, by `/`-separated path relative to its root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryFiles {
    files: BTreeMap<String, Arc<[u8]>>,
}

impl RegistryFiles {
    /// Reads every file under `root`.
    pub fn from_dir(root: &Path) -> Result<Self, RegistryError> {
        let mut files = Self::default();
        files.read_dir(root, root)?;
        Ok(files)
    }

    fn read_dir(&mut self, root: &Path, dir: &Path) -> Result<(), RegistryError> {
        let mut children: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(RegistryError::io(dir))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(RegistryError::io(dir))?;
        children.sort();
        for path in children {
            let meta = fs::symlink_metadata(&path).map_err(RegistryError::io(&path))?;
            let rel = relative(root, &path);
            if meta.file_type().is_symlink() {
                return Err(RegistryError::SymlinkNotAllowed { file: rel });
            }
            if meta.is_dir() {
                self.read_dir(root, &path)?;
            } else if !meta.is_file() {
                // Refused from the listing, so a device is never even opened.
                return Err(RegistryError::NotARegularFile {
                    file: rel,
                    kind: crate::regular::kind(&meta.file_type()),
                });
            } else {
                let bytes = read_regular(&path, &rel, MAX_FILE_BYTES)?;
                self.files.insert(rel, bytes.into());
            }
        }
        Ok(())
    }

    /// Builds the map from `(path, bytes)` pairs, as compiled into the binary.
    pub fn from_static(pairs: &[(&str, &'static [u8])]) -> Self {
        let files = pairs
            .iter()
            .map(|(p, b)| ((*p).to_owned(), Arc::from(*b)))
            .collect();
        Self { files }
    }

    /// The bytes at `path`.
    pub fn get(&self, path: &str) -> Option<&Arc<[u8]>> {
        self.files.get(path)
    }

    /// Adds or replaces a file.
    pub fn insert(&mut self, path: impl Into<String>, bytes: impl Into<Arc<[u8]>>) {
        self.files.insert(path.into(), bytes.into());
    }

    /// Every path, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Paths under `prefix` (which should end with `/`) and their bytes, sorted by path.
    pub(crate) fn entries_under<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a Arc<[u8]>)> + 'a {
        self.files
            .range(prefix.to_owned()..)
            .map(|(p, b)| (p.as_str(), b))
            .take_while(move |(p, _)| p.starts_with(prefix))
    }

    /// Paths under `prefix` (which should end with `/`), sorted.
    pub fn paths_under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.files
            .range(prefix.to_owned()..)
            .map(|(p, _)| p.as_str())
            .take_while(move |p| p.starts_with(prefix))
    }
}

/// Writes `bytes` to `path` via a sibling temporary file and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(RegistryError::io(parent))?;
    }
    let tmp = path.with_extension("tmp-write");
    // Created exclusively, so a symlink planted at the temporary name is never written through;
    // a regular leftover of an interrupted write is replaced.
    match fs::symlink_metadata(&tmp) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(RegistryError::SymlinkNotAllowed {
                file: tmp.display().to_string(),
            });
        }
        Ok(_) => fs::remove_file(&tmp).map_err(RegistryError::io(&tmp))?,
        Err(_) => {}
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .map_err(RegistryError::io(&tmp))?;
    fs::rename(&tmp, path).map_err(RegistryError::io(path))
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
