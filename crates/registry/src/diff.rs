//! What changed between two releases of a registry (`rimthan registry diff`), so an operator
//! reviews a promotion before making it.
//!
//! Entries are matched by [`Entry::label`] (kind, id, version, rendition); one whose bytes or
//! manifest record differ is changed. In an append-only registry (`published.json`) a changed
//! versioned entry cannot occur, so a review reads the added versions.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    canonical::to_canonical_bytes,
    digest::Sha256Digest,
    ids::ReleaseId,
    model::{Entry, EntryKind},
    release::VerifiedRelease,
};

/// The differences between two releases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReleaseDiff {
    /// The release compared from.
    pub from: ReleaseId,
    /// The release compared to.
    pub to: ReleaseId,
    /// Every added, removed or changed entry, grouped and sorted.
    pub changes: Vec<EntryChange>,
    /// How many entries are the same in both.
    pub unchanged: usize,
}

/// How an entry differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Only in `to`.
    Added,
    /// Only in `from`.
    Removed,
    /// In both, with other bytes or another manifest record.
    Changed,
}

impl ChangeKind {
    /// The word a listing shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        }
    }
}

/// One added, removed or changed entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryChange {
    /// What it belongs to: `workflow <id>@<version>` for a workflow and its steps, else the
    /// entry's label without its rendition (an asset version and its renditions together).
    pub group: String,
    /// The entry's label.
    pub entry: String,
    /// Added, removed or changed.
    pub change: ChangeKind,
    /// SHA-256 of its bytes in `from`, when there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_sha256: Option<Sha256Digest>,
    /// SHA-256 of its bytes in `to`, when there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_sha256: Option<Sha256Digest>,
}

/// Compares two verified releases entry by entry.
pub fn diff_releases(from: &VerifiedRelease, to: &VerifiedRelease) -> ReleaseDiff {
    let index = |r: &VerifiedRelease| -> BTreeMap<String, Entry> {
        r.manifest()
            .entries
            .iter()
            .map(|e| (e.label(), e.clone()))
            .collect()
    };
    let (old, new) = (index(from), index(to));
    let mut changes = Vec::new();
    let mut unchanged = 0;
    for (label, entry) in &old {
        match new.get(label) {
            None => changes.push(change(entry, ChangeKind::Removed, Some(entry), None)),
            Some(now) if record(entry) != record(now) => {
                changes.push(change(now, ChangeKind::Changed, Some(entry), Some(now)));
            }
            Some(_) => unchanged += 1,
        }
    }
    for (label, entry) in &new {
        if !old.contains_key(label) {
            changes.push(change(entry, ChangeKind::Added, None, Some(entry)));
        }
    }
    // The entry that names its group (a workflow definition, an asset's base) leads it.
    changes.sort_by(|a, b| {
        let key = |c: &EntryChange| (c.group.clone(), c.entry != c.group, c.entry.clone());
        key(a).cmp(&key(b))
    });
    ReleaseDiff {
        from: from.id().clone(),
        to: to.id().clone(),
        changes,
        unchanged,
    }
}

fn change(
    entry: &Entry,
    kind: ChangeKind,
    from: Option<&Entry>,
    to: Option<&Entry>,
) -> EntryChange {
    let group = match (entry.kind, &entry.workflow) {
        (EntryKind::Workflow, _) => format!("workflow {}@{}", entry.id, entry.version),
        (EntryKind::Step, Some(workflow)) => format!("workflow {workflow}@{}", entry.version),
        _ => {
            let mut base = entry.clone();
            base.rendition = None;
            base.label()
        }
    };
    EntryChange {
        group,
        entry: entry.label(),
        change: kind,
        from_sha256: from.map(|e| e.sha256),
        to_sha256: to.map(|e| e.sha256),
    }
}

fn record(entry: &Entry) -> Vec<u8> {
    to_canonical_bytes(entry).expect("entry serializes")
}
