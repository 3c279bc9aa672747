//! `rimthan registry diff REGISTRY A B`: what a promotion from A to B would change.

use std::{io::Write as _, path::PathBuf};

use clap::Args;
use rimthan_registry::{
    ChangeKind, RegistryError, RegistryFiles, ReleaseDiff, ReleaseId, Sha256Digest,
    VerifiedRegistry, diff_releases, embedded_policy, external_policy, verify_registry,
};

use super::{parse, release_not_found};

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The registry folder (`registry/default` is read with the digests this binary pins).
    dir: PathBuf,
    /// The release compared from, e.g. the one a channel names now.
    from: String,
    /// The release compared to, e.g. the one about to be promoted.
    to: String,
    /// Print the differences as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn diff(args: DiffArgs) -> anyhow::Result<()> {
    let from: ReleaseId = parse(&args.from)?;
    let to: ReleaseId = parse(&args.to)?;
    let registry = load(&args)?;
    let release = |id: &ReleaseId| {
        registry
            .release(id)
            .ok_or_else(|| release_not_found(&registry, id))
    };
    let diff = diff_releases(release(&from)?, release(&to)?);
    let out = &mut std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &diff)?;
        writeln!(out)?;
    } else {
        print_diff(&diff, out)?;
    }
    Ok(())
}

/// An operator's folder is verified by its keys. The committed default is signed by the
/// development key every external registry refuses, so it is accepted only when each release
/// matches a manifest digest this binary pins.
fn load(args: &DiffArgs) -> Result<VerifiedRegistry, RegistryError> {
    let files = RegistryFiles::from_dir(&args.dir)?;
    match verify_registry(&files, &external_policy()) {
        Err(RegistryError::UntrustedSigningKey { .. }) => {
            verify_registry(&files, &embedded_policy()?)
        }
        other => other,
    }
}

fn print_diff(diff: &ReleaseDiff, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let count = |kind: ChangeKind| diff.changes.iter().filter(|c| c.change == kind).count();
    writeln!(
        out,
        "release {} -> {}: {} added, {} removed, {} changed, {} unchanged",
        diff.from,
        diff.to,
        count(ChangeKind::Added),
        count(ChangeKind::Removed),
        count(ChangeKind::Changed),
        diff.unchanged
    )?;
    let mut group = None;
    for change in &diff.changes {
        if group != Some(&change.group) {
            writeln!(out, "{}", change.group)?;
            group = Some(&change.group);
        }
        let digest = |d: &Option<Sha256Digest>| d.map_or_else(|| "-".to_owned(), |d| d.to_string());
        writeln!(
            out,
            "  {:<8} {}  sha256 {} -> {}",
            change.change.as_str(),
            change.entry,
            digest(&change.from_sha256),
            digest(&change.to_sha256)
        )?;
    }
    Ok(())
}
