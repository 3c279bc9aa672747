//! The participant's project folder: writing declared files safely and reading them back the
//! way an attestation must (`docs/registry-format.md` §3: containment re-checked after resolving symlinks).

use std::{
    fs,
    io::Write as _,
    path::{Component, Path, PathBuf},
};

use rimthan_registry::{Sha256Digest, check_relative_path};

use crate::StageError;

/// What reading a file back proved.
#[derive(Debug, Clone)]
pub struct ReadBack {
    /// The bytes read.
    pub bytes: Vec<u8>,
    /// Their sha256.
    pub sha256: Sha256Digest,
    /// No component of the path is a symlink, and the file resolves inside the project.
    pub symlink_free: bool,
}

/// A project folder.
#[derive(Debug, Clone)]
pub struct Project {
    root: PathBuf,
}

impl Project {
    /// Opens (creating) the project folder.
    pub fn open(root: &Path) -> Result<Self, StageError> {
        fs::create_dir_all(root).map_err(|e| StageError::io(root, e))?;
        let root = root.canonicalize().map_err(|e| StageError::io(root, e))?;
        Ok(Self { root })
    }

    /// The project's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn resolve(&self, rel: &str) -> Result<PathBuf, StageError> {
        check_relative_path(rel).map_err(|rule| StageError::UnsafePath {
            path: rel.into(),
            reason: rule.advice().into(),
        })?;
        Ok(self.root.join(rel))
    }

    /// Whether any existing component of `rel` is a symlink.
    fn traverses_symlink(&self, rel: &str) -> bool {
        let mut path = self.root.clone();
        Path::new(rel).components().any(|c| {
            if let Component::Normal(part) = c {
                path.push(part);
            }
            fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink())
        })
    }

    /// Writes `bytes` at the declared project path `rel` through a temporary file and a rename,
    /// refusing unsafe paths and symlinks.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), StageError> {
        self.resolve(rel)?;
        self.write_unchecked(rel, bytes)
    }

    /// Writes the harness's own session file, under the `.rimthan` root that declared paths
    /// may never reach.
    pub fn write_session_file(&self, bytes: &[u8]) -> Result<(), StageError> {
        self.write_unchecked(crate::SESSION_FILE, bytes)
    }

    fn write_unchecked(&self, rel: &str, bytes: &[u8]) -> Result<(), StageError> {
        let path = self.root.join(rel);
        if self.traverses_symlink(rel) {
            return Err(StageError::UnsafePath {
                path: rel.into(),
                reason: "a component is a symlink; refusing to write through it".into(),
            });
        }
        let parent = path.parent().expect("project paths have a parent");
        fs::create_dir_all(parent).map_err(|e| StageError::io(parent, e))?;
        let tmp = path.with_extension("rimthan-stage-tmp");
        let mut file = fs::File::create(&tmp).map_err(|e| StageError::io(&tmp, e))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| StageError::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| StageError::io(&path, e))
    }

    /// Reads `rel` back from disk.
    pub fn read_back(&self, rel: &str) -> Result<ReadBack, StageError> {
        let path = self.resolve(rel)?;
        let bytes = fs::read(&path).map_err(|e| StageError::io(&path, e))?;
        let inside = path
            .canonicalize()
            .is_ok_and(|real| real.starts_with(&self.root));
        Ok(ReadBack {
            sha256: Sha256Digest::of(&bytes),
            symlink_free: inside && !self.traverses_symlink(rel),
            bytes,
        })
    }

    /// Replaces `rel` with a symlink to a copy elsewhere in the project (the symlinked-output
    /// fault).
    #[cfg(unix)]
    pub fn symlink_to_shadow(&self, rel: &str, bytes: &[u8]) -> Result<(), StageError> {
        let shadow = format!("shadow/{rel}");
        self.write(&shadow, bytes)?;
        let path = self.resolve(rel)?;
        let _ = fs::remove_file(&path);
        fs::create_dir_all(path.parent().expect("parent")).map_err(|e| StageError::io(&path, e))?;
        std::os::unix::fs::symlink(self.root.join(&shadow), &path)
            .map_err(|e| StageError::io(&path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_with_their_digest() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::open(dir.path()).unwrap();
        project.write("research/a.md", b"hello").unwrap();
        let back = project.read_back("research/a.md").unwrap();
        assert_eq!(back.sha256, Sha256Digest::of(b"hello"));
        assert!(back.symlink_free);
        assert!(project.write("../escape.md", b"x").is_err());
        assert!(project.write(".git/config", b"x").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_files_are_not_symlink_free() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::open(dir.path()).unwrap();
        project
            .symlink_to_shadow("research/a.md", b"hello")
            .unwrap();
        assert!(!project.read_back("research/a.md").unwrap().symlink_free);
        assert!(project.write("research/a.md", b"again").is_err());
    }
}
