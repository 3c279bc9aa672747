//! Project-relative path rules for adapter path templates and declared outputs (`docs/registry-format.md` §3, path rules).
//!
//! A path that passes [`check_relative_path`] is relative, normalized POSIX, stays inside the
//! project when joined to it lexically, never names a version-control or rimthan root in any
//! spelling a case-insensitive or Windows file system would alias, and is portable to Windows.
//! Symlinks are the harness's business at write time; the attestation must say it checked.

use std::fmt;

use crate::ids::AssetId;

/// The only placeholder a path template may contain.
pub(crate) const ASSET_ID_PLACEHOLDER: &str = "{asset_id}";

/// Longest accepted path, in bytes.
pub(crate) const MAX_PATH_BYTES: usize = 1024;
/// Longest accepted segment, in bytes.
pub(crate) const MAX_SEGMENT_BYTES: usize = 255;

/// Roots a harness must never write under, compared case-insensitively after stripping trailing
/// dots and spaces (which Windows drops).
const RESERVED_ROOTS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", ".rimthan"];
/// 8.3 short-name aliases of reserved roots.
const RESERVED_SHORT_NAMES: &[&str] = &["git~1"];
const DEVICE_NAMES: &[&str] = &[
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9", "conin$",
    "conout$",
];
const FORBIDDEN_CHARS: &[char] = &['<', '>', ':', '"', '|', '?', '*'];

/// The rule a path or path template breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathRule {
    /// The path is empty.
    Empty,
    /// The path is longer than [`MAX_PATH_BYTES`] or a segment longer than [`MAX_SEGMENT_BYTES`].
    TooLong,
    /// The path starts with `/`.
    Absolute,
    /// The path contains a backslash.
    Backslash,
    /// The path starts with a drive letter or a UNC prefix.
    DriveOrUnc,
    /// The path has an empty segment (`a//b`).
    EmptySegment,
    /// The path ends with `/`.
    TrailingSlash,
    /// The path has a `.` or `..` segment.
    DotSegment,
    /// A segment is a reserved root such as `.git` in any spelling.
    ReservedRoot,
    /// A segment is a Windows device name such as `CON` or `com1.txt`.
    DeviceName,
    /// A segment contains one of `< > : " | ? *`.
    ForbiddenCharacter,
    /// A segment contains a control character.
    ControlCharacter,
    /// A segment ends with a dot or a space.
    TrailingDotOrSpace,
    /// A template does not contain exactly one `{asset_id}`.
    PlaceholderCount,
    /// A template contains a `{…}` other than `{asset_id}`.
    UnknownPlaceholder,
}

impl PathRule {
    /// Stable snake_case name of the rule.
    pub fn code(self) -> &'static str {
        match self {
            PathRule::Empty => "empty",
            PathRule::TooLong => "too_long",
            PathRule::Absolute => "absolute",
            PathRule::Backslash => "backslash",
            PathRule::DriveOrUnc => "drive_or_unc",
            PathRule::EmptySegment => "empty_segment",
            PathRule::TrailingSlash => "trailing_slash",
            PathRule::DotSegment => "dot_segment",
            PathRule::ReservedRoot => "reserved_root",
            PathRule::DeviceName => "device_name",
            PathRule::ForbiddenCharacter => "forbidden_character",
            PathRule::ControlCharacter => "control_character",
            PathRule::TrailingDotOrSpace => "trailing_dot_or_space",
            PathRule::PlaceholderCount => "placeholder_count",
            PathRule::UnknownPlaceholder => "unknown_placeholder",
        }
    }

    /// What the author should do about it.
    pub fn advice(self) -> &'static str {
        match self {
            PathRule::Empty => "give a project-relative path",
            PathRule::TooLong => "shorten the path",
            PathRule::Absolute => "remove the leading '/': paths are relative to the project",
            PathRule::Backslash => "use '/' as the separator",
            PathRule::DriveOrUnc => "remove the drive letter or UNC prefix",
            PathRule::EmptySegment => "remove the doubled '/'",
            PathRule::TrailingSlash => "name a file, not a folder",
            PathRule::DotSegment => "remove '.' and '..' segments",
            PathRule::ReservedRoot => {
                "do not write under .git, .hg, .svn, .bzr, .jj or .rimthan (in any spelling)"
            }
            PathRule::DeviceName => "rename the segment: it is a Windows device name",
            PathRule::ForbiddenCharacter => "remove < > : \" | ? * from the path",
            PathRule::ControlCharacter => "remove control characters from the path",
            PathRule::TrailingDotOrSpace => "remove the trailing dot or space from the segment",
            PathRule::PlaceholderCount => "use exactly one {asset_id} placeholder",
            PathRule::UnknownPlaceholder => "remove every placeholder other than {asset_id}",
        }
    }
}

impl fmt::Display for PathRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Checks a declared project-relative file path against every path rule of `docs/registry-format.md` §3.
pub fn check_relative_path(path: &str) -> Result<(), PathRule> {
    if path.is_empty() {
        return Err(PathRule::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathRule::TooLong);
    }
    if path.contains('\\') {
        return Err(PathRule::Backslash);
    }
    if path.starts_with('/') {
        return Err(PathRule::Absolute);
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(PathRule::DriveOrUnc);
    }
    if path.ends_with('/') {
        return Err(PathRule::TrailingSlash);
    }
    path.split('/').try_for_each(check_segment)
}

fn check_segment(segment: &str) -> Result<(), PathRule> {
    if segment.is_empty() {
        return Err(PathRule::EmptySegment);
    }
    if segment == "." || segment == ".." {
        return Err(PathRule::DotSegment);
    }
    if segment.len() > MAX_SEGMENT_BYTES {
        return Err(PathRule::TooLong);
    }
    let folded = segment.trim_end_matches(['.', ' ']).to_ascii_lowercase();
    if RESERVED_ROOTS.contains(&folded.as_str()) || RESERVED_SHORT_NAMES.contains(&folded.as_str())
    {
        return Err(PathRule::ReservedRoot);
    }
    if segment.chars().any(char::is_control) {
        return Err(PathRule::ControlCharacter);
    }
    if segment.contains(FORBIDDEN_CHARS) {
        return Err(PathRule::ForbiddenCharacter);
    }
    if is_device_name(&folded) {
        return Err(PathRule::DeviceName);
    }
    if segment.ends_with(['.', ' ']) {
        return Err(PathRule::TrailingDotOrSpace);
    }
    Ok(())
}

/// Whether a (lower-cased) segment is a Windows device name, with or without an extension.
pub(crate) fn is_device_name(folded: &str) -> bool {
    let stem = folded
        .split('.')
        .next()
        .unwrap_or_default()
        .trim_end_matches(' ');
    DEVICE_NAMES.contains(&stem)
}

/// Checks an adapter path template: exactly one `{asset_id}`, no other `{…}`, and every path
/// rule for the template with the placeholder standing for any valid asset id.
pub fn check_path_template(template: &str) -> Result<(), PathRule> {
    if template.matches(ASSET_ID_PLACEHOLDER).count() != 1 {
        return Err(if template.contains(ASSET_ID_PLACEHOLDER) {
            PathRule::PlaceholderCount
        } else if template.contains(['{', '}']) {
            PathRule::UnknownPlaceholder
        } else {
            PathRule::PlaceholderCount
        });
    }
    let rest = template.replacen(ASSET_ID_PLACEHOLDER, "", 1);
    if rest.contains(['{', '}']) {
        return Err(PathRule::UnknownPlaceholder);
    }
    // Valid asset ids are lowercase alphanumerics and inner hyphens, so one probe id of maximal
    // length covers the length limits and no id can complete a reserved or device name, or
    // create a `.`/`..` segment: an id never contains '.', so the placeholder's segment keeps
    // any dot the template gives it and gains at least one letter or digit.
    for probe in ["a", &"a".repeat(64)] {
        check_relative_path(&template.replacen(ASSET_ID_PLACEHOLDER, probe, 1))?;
    }
    check_id_cannot_complete_a_name(template)
}

/// Rejects templates whose placeholder segment could become a reserved root or device name for
/// some id, e.g. `co{asset_id}` (id `n`), `.{asset_id}` (id `git`) or `c{asset_id}1` (id `om`).
/// Ids themselves are never device names (see [`crate::ids::check_name`]), so a bare
/// `{asset_id}` segment is safe.
fn check_id_cannot_complete_a_name(template: &str) -> Result<(), PathRule> {
    let segment = template
        .split('/')
        .find(|s| s.contains(ASSET_ID_PLACEHOLDER))
        .expect("template holds the placeholder");
    let (before, after) = segment
        .split_once(ASSET_ID_PLACEHOLDER)
        .expect("placeholder");
    let (before, after) = (before.to_ascii_lowercase(), after.to_ascii_lowercase());
    // The name a segment folds to for reserved roots: trailing dots and spaces dropped. An id
    // never ends in either, so only `after` is trimmed.
    let reserved_suffix = after.trim_end_matches(['.', ' ']);
    for name in RESERVED_ROOTS.iter().chain(RESERVED_SHORT_NAMES) {
        if id_completes(name, &before, reserved_suffix) {
            return Err(PathRule::ReservedRoot);
        }
    }
    // Device names match on the stem before the first dot, trailing spaces dropped. An id has
    // no dot, so a dot in `before` fixes the stem whatever the id is (the probes cover that).
    if !before.contains('.') {
        let device_suffix = after
            .split('.')
            .next()
            .unwrap_or_default()
            .trim_end_matches(' ');
        for name in DEVICE_NAMES {
            if id_completes(name, &before, device_suffix) {
                return Err(PathRule::DeviceName);
            }
        }
    }
    Ok(())
}

/// Whether some valid asset id `m` makes `prefix + m + suffix == name`.
fn id_completes(name: &str, prefix: &str, suffix: &str) -> bool {
    name.len() > prefix.len() + suffix.len()
        && name.starts_with(prefix)
        && name.ends_with(suffix)
        && name[prefix.len()..name.len() - suffix.len()]
            .parse::<AssetId>()
            .is_ok()
}

/// Substitutes an asset id into a template that passed [`check_path_template`].
pub fn expand_template(template: &str, id: &AssetId) -> String {
    template.replacen(ASSET_ID_PLACEHOLDER, id.as_str(), 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_templates_are_accepted() {
        for t in [
            ".agents/skills/{asset_id}/SKILL.md",
            ".codex/agents/{asset_id}.toml",
            ".claude/skills/{asset_id}/SKILL.md",
            ".claude/agents/{asset_id}.md",
            ".claude/commands/{asset_id}.md",
        ] {
            assert_eq!(check_path_template(t), Ok(()), "{t}");
        }
    }

    #[test]
    fn template_rules_are_named() {
        let cases = [
            (
                "skills/{asset_id}/{asset_id}.md",
                PathRule::PlaceholderCount,
            ),
            ("skills/SKILL.md", PathRule::PlaceholderCount),
            ("skills/{name}/SKILL.md", PathRule::UnknownPlaceholder),
            ("{asset_id}/{version}.md", PathRule::UnknownPlaceholder),
            ("../{asset_id}.md", PathRule::DotSegment),
            ("a/./{asset_id}.md", PathRule::DotSegment),
            ("/abs/{asset_id}.md", PathRule::Absolute),
            ("C:/x/{asset_id}.md", PathRule::DriveOrUnc),
            ("a\\{asset_id}.md", PathRule::Backslash),
            ("//server/{asset_id}", PathRule::Absolute),
            ("a//{asset_id}", PathRule::EmptySegment),
            ("a/{asset_id}/", PathRule::TrailingSlash),
            (".git/{asset_id}.md", PathRule::ReservedRoot),
            (".GIT/{asset_id}.md", PathRule::ReservedRoot),
            (".git./{asset_id}.md", PathRule::ReservedRoot),
            (".git /{asset_id}.md", PathRule::ReservedRoot),
            ("git~1/{asset_id}.md", PathRule::ReservedRoot),
            (".Rimthan/{asset_id}.md", PathRule::ReservedRoot),
            ("x/.jj/{asset_id}", PathRule::ReservedRoot),
            ("CON/{asset_id}.md", PathRule::DeviceName),
            ("a/com1.txt/{asset_id}", PathRule::DeviceName),
            ("a/co{asset_id}", PathRule::DeviceName),
            ("a/c{asset_id}1", PathRule::DeviceName),
            ("a/co{asset_id} .md", PathRule::DeviceName),
            ("a/con{asset_id}$", PathRule::DeviceName),
            ("a/.g{asset_id}t", PathRule::ReservedRoot),
            ("a/.{asset_id}j", PathRule::ReservedRoot),
            ("a/lpt{asset_id}.md", PathRule::DeviceName),
            ("a/.{asset_id}", PathRule::ReservedRoot),
            ("a/b:c/{asset_id}", PathRule::ForbiddenCharacter),
            ("a/b\u{7}/{asset_id}", PathRule::ControlCharacter),
            ("a/b./{asset_id}", PathRule::TrailingDotOrSpace),
            ("a/{asset_id}.", PathRule::TrailingDotOrSpace),
        ];
        for (template, rule) in cases {
            assert_eq!(check_path_template(template), Err(rule), "{template}");
        }
    }

    #[test]
    fn output_paths_follow_the_same_rules() {
        assert_eq!(check_relative_path("reports/summary.json"), Ok(()));
        assert_eq!(
            check_relative_path(".rimthan/x.json"),
            Err(PathRule::ReservedRoot)
        );
        assert_eq!(
            check_relative_path("reports/../x"),
            Err(PathRule::DotSegment)
        );
        assert_eq!(check_relative_path("nul.txt"), Err(PathRule::DeviceName));
        assert_eq!(check_relative_path(""), Err(PathRule::Empty));
    }
}
