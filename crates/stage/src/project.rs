//! The participant's project folder: writing declared files safely and reading them back the
//! way an attestation must (`docs/registry-format.md` §3: containment re-checked after resolving symlinks).
//!
//! Writes trust no name: each folder of the path is opened without following a symlink, the
//! temporary file is created exclusively, and the rename happens inside the opened folder, so a
//! symlink planted at any component or at the temporary name is refused and nothing is written
//! through it.

use std::{
    fs,
    io::Write as _,
    os::fd::OwnedFd,
    path::{Component, Path, PathBuf},
};

use rimthan_registry::{Sha256Digest, check_relative_path};
use rustix::{
    fs::{self as rfs, AtFlags, FileType, Mode, OFlags},
    io::Errno,
};

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

    /// Writes the completed session's signed provenance statement beside the session file.
    pub fn write_statement(&self, bytes: &[u8]) -> Result<(), StageError> {
        self.write_unchecked(crate::STATEMENT_FILE, bytes)
    }

    /// Removes a statement a previous session left, if any.
    pub fn remove_statement(&self) -> Result<(), StageError> {
        let path = self.root.join(crate::STATEMENT_FILE);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StageError::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// The in-process server's SQLite database, `.rimthan/stage.sqlite`: its folder is created
    /// without following a symlink, and neither it nor a journal beside it may be a symlink,
    /// since SQLite opens them by name.
    pub fn state_database(&self) -> Result<PathBuf, StageError> {
        let rel = ".rimthan/stage.sqlite";
        let (dir, name) = self.open_parent(rel)?;
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let file = format!("{name}{suffix}");
            if is_symlink_at(&dir, &file) {
                return Err(StageError::SymlinkInProject {
                    path: format!("{rel}{suffix}"),
                });
            }
        }
        Ok(self.root.join(rel))
    }

    /// The folder holding `rel`, opened (created where missing) one component at a time without
    /// following a symlink, so a symlink planted at any component is refused rather than
    /// written through; and `rel`'s file name.
    fn open_parent<'r>(&self, rel: &'r str) -> Result<(OwnedFd, &'r str), StageError> {
        const DIR: OFlags = OFlags::RDONLY
            .union(OFlags::DIRECTORY)
            .union(OFlags::NOFOLLOW)
            .union(OFlags::CLOEXEC);
        let mut dir = rfs::open(&self.root, DIR, Mode::empty())
            .map_err(|e| StageError::io(&self.root, e.into()))?;
        let (parents, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let mut walked = PathBuf::new();
        for part in parents.split('/').filter(|p| !p.is_empty()) {
            walked.push(part);
            let opened = match rfs::openat(&dir, part, DIR, Mode::empty()) {
                Err(Errno::NOENT) => match rfs::mkdirat(&dir, part, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => rfs::openat(&dir, part, DIR, Mode::empty()),
                    Err(e) => Err(e),
                },
                other => other,
            };
            dir = opened.map_err(|e| self.refusal(&dir, part, &walked, e))?;
        }
        Ok((dir, name))
    }

    /// Why `name` in `dir` could not be opened: a symlink by name, else the I/O error.
    fn refusal(&self, dir: &OwnedFd, name: &str, shown: &Path, error: Errno) -> StageError {
        if is_symlink_at(dir, name) {
            StageError::SymlinkInProject {
                path: shown.display().to_string(),
            }
        } else {
            StageError::io(&self.root.join(shown), error.into())
        }
    }

    fn write_unchecked(&self, rel: &str, bytes: &[u8]) -> Result<(), StageError> {
        let (dir, name) = self.open_parent(rel)?;
        if is_symlink_at(&dir, name) {
            return Err(StageError::SymlinkInProject { path: rel.into() });
        }
        let tmp = Path::new(name).with_extension("rimthan-stage-tmp");
        let tmp_rel = Path::new(rel).with_extension("rimthan-stage-tmp");
        let mut file = fs::File::from(self.create_exclusive(&dir, &tmp, &tmp_rel)?);
        let shown = self.root.join(&tmp_rel);
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| StageError::io(&shown, e))?;
        // Renaming replaces whatever sits at `name` (a symlink planted there after the check
        // above included) without following it.
        rfs::renameat(&dir, &tmp, &dir, name)
            .map_err(|e| StageError::io(&self.root.join(rel), e.into()))?;
        rfs::fsync(&dir).map_err(|e| StageError::io(&self.root.join(rel), e.into()))
    }

    /// Creates the temporary file `tmp` in `dir` exclusively (`O_EXCL` never follows a symlink).
    /// A regular file already there is the leftover of an interrupted write and is replaced;
    /// a symlink or anything else there is refused.
    fn create_exclusive(
        &self,
        dir: &OwnedFd,
        tmp: &Path,
        tmp_rel: &Path,
    ) -> Result<OwnedFd, StageError> {
        const FILE: OFlags = OFlags::WRONLY
            .union(OFlags::CREATE)
            .union(OFlags::EXCL)
            .union(OFlags::NOFOLLOW)
            .union(OFlags::CLOEXEC);
        let shown = self.root.join(tmp_rel);
        let mode = Mode::from_raw_mode(0o666);
        match rfs::openat(dir, tmp, FILE, mode) {
            Err(Errno::EXIST) => {}
            other => return other.map_err(|e| StageError::io(&shown, e.into())),
        }
        let stat = rfs::statat(dir, tmp, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| StageError::io(&shown, e.into()))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Symlink => {
                return Err(StageError::SymlinkInProject {
                    path: tmp_rel.display().to_string(),
                });
            }
            _ => {
                return Err(StageError::UnsafePath {
                    path: tmp_rel.display().to_string(),
                    reason: "something other than a file sits at this temporary name; remove it"
                        .into(),
                });
            }
        }
        rfs::unlinkat(dir, tmp, AtFlags::empty()).map_err(|e| StageError::io(&shown, e.into()))?;
        rfs::openat(dir, tmp, FILE, mode).map_err(|e| StageError::io(&shown, e.into()))
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

/// Whether `name` in `dir` is a symlink (not followed).
fn is_symlink_at(dir: &OwnedFd, name: impl rustix::path::Arg) -> bool {
    rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_with_their_digest() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::open(dir.path()).unwrap();
        project.write("out/a.md", b"hello").unwrap();
        let back = project.read_back("out/a.md").unwrap();
        assert_eq!(back.sha256, Sha256Digest::of(b"hello"));
        assert!(back.symlink_free);
        assert!(project.write("../escape.md", b"x").is_err());
        assert!(project.write(".git/config", b"x").is_err());
    }

    #[test]
    fn a_leftover_temporary_file_is_replaced_and_a_symlinked_folder_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let project = Project::open(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/a.rimthan-stage-tmp"), b"crashed").unwrap();
        project.write("out/a.md", b"hello").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("out/a.md")).unwrap(),
            b"hello"
        );
        assert!(!dir.path().join("out/a.rimthan-stage-tmp").exists());

        std::os::unix::fs::symlink(outside.path(), dir.path().join("notes")).unwrap();
        let err = project.write("notes/b.md", b"x").unwrap_err();
        assert!(
            matches!(&err, StageError::SymlinkInProject { path } if path == "notes"),
            "{err}"
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_files_are_not_symlink_free() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::open(dir.path()).unwrap();
        project.symlink_to_shadow("out/a.md", b"hello").unwrap();
        assert!(!project.read_back("out/a.md").unwrap().symlink_free);
        assert!(project.write("out/a.md", b"again").is_err());
    }
}
