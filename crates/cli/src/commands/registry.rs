//! `rimthan registry …`: init, build, verify, inspect, diff, promote, keygen.

mod check;
mod diff;
mod test;

pub(crate) use check::{ChecksFailed, InputMissing};
pub(crate) use test::CasesFailed;

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use rimthan_registry::{
    ChannelName, INIT_WORKFLOW_ID, InitOptions, RegistryError, RegistryFiles, ReleaseId,
    SigningKey, SigningKeyFile, VerifiedRegistry, build_draft, build_release, external_policy,
    init_source_with, publish, refuse_draft, set_channel, verify_embedded, verify_registry,
};

use super::InputError;

#[derive(Debug, Subcommand)]
pub(crate) enum RegistryCommand {
    /// Write a minimal, working release source into a new or empty folder.
    Init(InitArgs),
    /// Build a signed release from a source folder into a registry folder.
    Build(BuildArgs),
    /// Verify every release of a registry (the embedded default when DIR is omitted).
    Verify(VerifyArgs),
    /// Show a registry's releases and entries as a table.
    Inspect(InspectArgs),
    /// List the entries added, removed and changed between two releases.
    Diff(diff::DiffArgs),
    /// Run a step's deterministic checks on local files, as the server runs them.
    Check(check::CheckArgs),
    /// Run a source's workflow test cases (workflows/ID/VERSION/tests/CASE/case.json) in process.
    Test(test::TestArgs),
    /// Point a channel at a release, after verifying the registry.
    Promote(PromoteArgs),
    /// Generate an ed25519 signing key.
    Keygen(KeygenArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    /// The release source folder (workflows/, validators/, skills/, …).
    src: PathBuf,
    /// The registry folder to publish into (created when absent).
    #[arg(long)]
    out: PathBuf,
    /// The new release id, e.g. 2026.12.0.
    #[arg(long)]
    release: String,
    /// The private key file from `rimthan registry keygen`.
    #[arg(long)]
    key: PathBuf,
    /// Also point this channel at the new release.
    #[arg(long)]
    channel: Option<String>,
    /// Refuse the build when it has warnings (such as a schema nothing uses).
    #[arg(long)]
    strict: bool,
    /// Build a draft into drafts/ID/: never published, rebuilt under the same id at will, never
    /// on a channel, served only by name (`serve --release ID`).
    #[arg(long, conflicts_with = "channel")]
    draft: bool,
}

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The folder to write the source into (created when absent; must be empty).
    dir: PathBuf,
    /// The workflow's id: its folder under workflows/ (default: my-workflow).
    #[arg(long)]
    workflow: Option<String>,
    /// A harness to pin at the current adapter version (repeatable; default: all four).
    #[arg(long = "harness")]
    harnesses: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The registry folder; omit for the embedded default registry.
    dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The registry folder; omit for the embedded default registry.
    dir: Option<PathBuf>,
    /// Only this release.
    #[arg(long)]
    release: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PromoteArgs {
    /// The registry folder.
    dir: PathBuf,
    /// The channel to move, e.g. stable.
    #[arg(long)]
    channel: String,
    /// The release it should point at.
    #[arg(long)]
    release: String,
}

#[derive(Debug, Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the private key (never overwritten).
    #[arg(long)]
    out: PathBuf,
}

impl RegistryCommand {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        match self {
            RegistryCommand::Init(args) => init(args),
            RegistryCommand::Build(args) => build(args),
            RegistryCommand::Verify(args) => {
                let registry = load(args.dir.as_deref())?;
                print_summary(&registry, &mut std::io::stdout().lock())?;
                Ok(())
            }
            RegistryCommand::Inspect(args) => inspect(args),
            RegistryCommand::Diff(args) => diff::diff(args),
            RegistryCommand::Check(args) => check::check(args),
            RegistryCommand::Test(args) => test::test(args),
            RegistryCommand::Promote(args) => promote(args),
            RegistryCommand::Keygen(args) => keygen(args),
        }
    }
}

fn parse<T: std::str::FromStr>(value: &str) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e: T::Err| InputError(e.to_string()).into())
}

fn load(dir: Option<&Path>) -> Result<VerifiedRegistry, RegistryError> {
    match dir {
        None => verify_embedded(),
        Some(dir) => verify_registry(&RegistryFiles::from_dir(dir)?, &external_policy()),
    }
}

fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    let text = fs::read_to_string(path)
        .map_err(|e| InputError(format!("{}: cannot read the key file: {e}", path.display())))?;
    let file: SigningKeyFile = serde_json::from_str(&text)
        .map_err(|e| InputError(format!("{}: not a signing key file: {e}", path.display())))?;
    SigningKey::from_file(&file).map_err(|e| InputError(format!("{}: {e}", path.display())).into())
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let release: ReleaseId = parse(&args.release)?;
    let channel: Option<ChannelName> = args.channel.as_deref().map(parse).transpose()?;
    let key = read_key(&args.key)?;
    let built = if args.draft {
        build_draft(&args.src, &release, &key)?
    } else {
        build_release(&args.src, &release, &key)?
    };
    let label = if args.strict { "error" } else { "warning" };
    for warning in &built.warnings {
        eprintln!("{label}[{}]: {warning}", warning.code());
    }
    if args.strict && !built.warnings.is_empty() {
        return Err(InputError(format!(
            "--strict refuses the {} warning(s) above; fix them or build without --strict (nothing was published)",
            built.warnings.len()
        ))
        .into());
    }
    // The workflows' test cases hold a release as its examples do: a failing one publishes
    // nothing. A draft is for finding out, so it is built anyway (`docs/authoring.md` §13).
    let cases = rimthan_stage::find_cases(&args.src, None)?;
    let mut passed = None;
    if !cases.is_empty() {
        let results = test::run_cases(&args.src, &cases, &mut |case, divergence| {
            if divergence.is_some() {
                eprintln!("{}", test::line(case, divergence));
            }
        })?;
        let failed = results.iter().filter(|(_, d)| d.is_some()).count();
        match (failed, args.draft) {
            (0, _) => passed = Some(results.len()),
            (failed, false) => {
                return Err(InputError(format!(
                    "{failed} of {} workflow test case(s) failed (above); fix the workflow or \
                     the case and build again (nothing was published)",
                    results.len()
                ))
                .into());
            }
            (failed, true) => eprintln!(
                "warning: {failed} of {} workflow test case(s) failed (above); the draft is built \
                 anyway",
                results.len()
            ),
        }
    }
    publish(&args.out, &built)?;
    if let Some(channel) = &channel {
        set_channel(&args.out, channel, &release)?;
    }
    let what = if args.draft { "draft" } else { "release" };
    println!(
        "built {what} {release} into {} (manifest sha256 {}, key {})",
        args.out.display(),
        built.manifest_sha256,
        key.key_id()
    );
    if let Some(passed) = passed {
        println!("{passed} workflow test case(s) passed");
    }
    if args.draft {
        println!(
            "serve it by name: rimthan serve --registry {} --release {release}",
            args.out.display()
        );
    }
    Ok(())
}

fn init(args: InitArgs) -> anyhow::Result<()> {
    let workflow: rimthan_registry::WorkflowId = match &args.workflow {
        Some(id) => parse(id)?,
        None => INIT_WORKFLOW_ID.parse().expect("a valid id"),
    };
    let harnesses = args
        .harnesses
        .iter()
        .map(|h| parse(h))
        .collect::<anyhow::Result<Vec<rimthan_registry::Harness>>>()?;
    let options = InitOptions::new(workflow.clone(), harnesses);
    let harness = options.harnesses[0];
    let written = init_source_with(&args.dir, &options)?;
    let dir = args.dir.display();
    println!("wrote a release source into {dir}:");
    for path in written {
        println!("  {path}");
    }
    println!(
        "\nEdit the workflow under {dir}/workflows/{workflow}/, then:\n\
         \x20 rimthan registry keygen --out ~/.rimthan/keys/my-org.key   # outside the source: never commit a key\n\
         \x20 rimthan registry build {dir} --out my-registry --release 2027.01.0 --key ~/.rimthan/keys/my-org.key --channel stable\n\
         \x20 rimthan serve --registry my-registry\n\
         \x20 rimthan stage --harness {harness} --project my-try --url http://127.0.0.1:8787/mcp --workflow {workflow}\n\
         See docs/registry-format.md (section 5) for the source format."
    );
    Ok(())
}

fn promote(args: PromoteArgs) -> anyhow::Result<()> {
    let channel: ChannelName = parse(&args.channel)?;
    let release: ReleaseId = parse(&args.release)?;
    refuse_draft(&args.dir, &release)?;
    let registry = load(Some(&args.dir))?;
    if registry.release(&release).is_none() {
        return Err(release_not_found(&registry, &release).into());
    }
    set_channel(&args.dir, &channel, &release)?;
    println!("channel {channel} -> {release}");
    Ok(())
}

fn release_not_found(registry: &VerifiedRegistry, release: &ReleaseId) -> RegistryError {
    RegistryError::ReleaseNotFound {
        release: release.to_string(),
        available: registry.release_list(),
    }
}

fn keygen(args: KeygenArgs) -> anyhow::Result<()> {
    let key = SigningKey::generate()?;
    let mut text = serde_json::to_string_pretty(&key.to_file())?;
    text.push('\n');
    // `--out ~/keys/acme.key` on a fresh machine: the folder is made, readable by its owner only.
    if let Some(parent) = args
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        create_private_dir(parent)
            .with_context(|| format!("{}: cannot create the key's folder", parent.display()))?;
    }
    match write_private(&args.out, text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(InputError(format!(
                "{} exists; keys are never overwritten, choose another path",
                args.out.display()
            ))
            .into());
        }
        other => {
            other.with_context(|| format!("{}: cannot create the key file", args.out.display()))?
        }
    }
    println!("key {} written to {}", key.key_id(), args.out.display());
    Ok(())
}

#[cfg(unix)]
fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

#[cfg(not(unix))]
fn create_private_dir(path: &Path) -> std::io::Result<()> {
    fs::create_dir_all(path)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)
}

fn print_summary(
    registry: &VerifiedRegistry,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    writeln!(out, "verified {} release(s)", registry.releases().len())?;
    for (id, release) in registry.releases() {
        let channels: Vec<_> = registry
            .channels_of(id)
            .iter()
            .map(ToString::to_string)
            .collect();
        writeln!(
            out,
            "  {id}: {} entries, manifest sha256 {}, signed by {}, channels [{}]",
            release.manifest().entries.len(),
            release.manifest_sha256(),
            release.signing_key_id(),
            channels.join(", ")
        )?;
    }
    Ok(())
}

fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let registry = load(args.dir.as_deref())?;
    let only: Option<ReleaseId> = args.release.as_deref().map(parse).transpose()?;
    if let Some(only) = only.as_ref().filter(|o| registry.release(o).is_none()) {
        return Err(release_not_found(&registry, only).into());
    }
    let out = &mut std::io::stdout().lock();
    print_summary(&registry, out)?;
    for (id, release) in registry.releases() {
        if only.as_ref().is_some_and(|o| o != id) {
            continue;
        }
        writeln!(out, "\nrelease {id}")?;
        let rows: Vec<[String; 5]> = release
            .manifest()
            .entries
            .iter()
            .map(|e| {
                [
                    e.label(),
                    e.media_type.clone(),
                    e.bytes.to_string(),
                    e.sha256.to_string()[..16].to_owned(),
                    e.path.clone(),
                ]
            })
            .collect();
        print_table(
            out,
            ["ENTRY", "MEDIA TYPE", "BYTES", "SHA256", "PATH"],
            &rows,
        )?;
    }
    Ok(())
}

fn print_table<const N: usize>(
    out: &mut impl std::io::Write,
    header: [&str; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}
