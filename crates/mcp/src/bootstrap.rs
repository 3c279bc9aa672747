//! The bootstrap text (`docs/operations/workflow-engine-bootstrap.md`), served as the `rimthan.start_workflow` prompt, the
//! `rimthan://bootstrap/agent-entrypoint` resource and the `instructions`: a host-neutral
//! paragraph followed by the workflows the active release offers, so an agent can pass a real
//! `workflow_id`. The paragraph is the active release's own signed `bootstrap` entry when it
//! carries one, else the default kept once in `docs/operations/workflow-engine-bootstrap.md`
//! between markers and embedded at build time.

use std::sync::{Arc, LazyLock, RwLock};

use rimthan_registry::{ReleaseId, VerifiedRegistry, VerifiedRelease, WorkflowDoc};

/// The operations document that holds the default paragraph.
pub const BOOTSTRAP_DOC: &str =
    include_str!("../../../docs/operations/workflow-engine-bootstrap.md");
const BEGIN: &str = "<!-- rimthan:bootstrap:begin -->";
const END: &str = "<!-- rimthan:bootstrap:end -->";

/// Most workflow versions listed; a release with more points the agent at its resources.
pub const MAX_LISTED_WORKFLOWS: usize = 50;
/// Most characters of a listed workflow's title.
const MAX_TITLE_CHARS: usize = 100;
/// Most characters of a listed workflow's one line (the first sentence of its description).
const MAX_LINE_CHARS: usize = 200;

static PARAGRAPH: LazyLock<String> = LazyLock::new(|| {
    let start = BOOTSTRAP_DOC
        .find(BEGIN)
        .expect("bootstrap doc has the begin marker")
        + BEGIN.len();
    let end = BOOTSTRAP_DOC
        .find(END)
        .expect("bootstrap doc has the end marker");
    BOOTSTRAP_DOC[start..end].trim().to_owned()
});

/// The default paragraph, for a release that carries no bootstrap entry of its own.
pub fn paragraph() -> &'static str {
    &PARAGRAPH
}

/// The whole bootstrap text for `release`: its paragraph, a blank line, and its workflow list.
pub fn entrypoint(release: &VerifiedRelease) -> String {
    let paragraph = release.bootstrap().map_or(paragraph(), str::trim);
    let workflows: Vec<&WorkflowDoc> = release.workflows().map(|w| w.doc()).collect();
    format!("{paragraph}\n\n{}", workflow_list(release.id(), &workflows))
}

/// The workflows a release offers, one line each, in the order given (the release's: by id,
/// then version).
fn workflow_list(release: &ReleaseId, workflows: &[&WorkflowDoc]) -> String {
    if workflows.is_empty() {
        return format!("Release {release} offers no workflow; tell the participant and stop.");
    }
    let mut text = format!(
        "Workflows in release {release} (pass one workflow_id to rimthan.start_workflow; add \
         workflow_version to pick a version other than the highest):"
    );
    for doc in workflows.iter().take(MAX_LISTED_WORKFLOWS) {
        let harnesses: Vec<&str> = doc.harnesses.keys().map(|h| h.as_str()).collect();
        text.push_str(&format!(
            "\n- `{}` {}, {}: {} Harnesses: {}.",
            doc.id,
            doc.version,
            bounded(&one_line(&doc.title), MAX_TITLE_CHARS),
            bounded(first_sentence(&one_line(&doc.description)), MAX_LINE_CHARS),
            harnesses.join(", ")
        ));
    }
    if workflows.len() > MAX_LISTED_WORKFLOWS {
        let more = workflows.len() - MAX_LISTED_WORKFLOWS;
        text.push_str(&format!(
            "\n- and {more} more; list the resources to see every workflow definition."
        ));
    }
    text
}

/// `text` with every run of white space (line breaks too) made one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Up to and including the first `.`, `!` or `?` that ends a sentence; all of `text` otherwise.
fn first_sentence(text: &str) -> &str {
    text.char_indices()
        .find(|&(i, c)| matches!(c, '.' | '!' | '?') && text[i + c.len_utf8()..].starts_with(' '))
        .map_or(text, |(i, c)| &text[..i + c.len_utf8()])
}

/// `text` cut to at most `max` characters, marked with `…` when cut.
fn bounded(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// The bootstrap text of one registry snapshot. Holding the snapshot keeps its address from
/// being reused by a later one.
type Kept = (Arc<VerifiedRegistry>, Arc<str>);

/// The bootstrap text of each registry snapshot, assembled once: it changes only when a
/// reload swaps the registry (and with it, perhaps, the active release).
#[derive(Debug, Clone, Default)]
pub(crate) struct Entrypoints {
    kept: Arc<RwLock<Option<Kept>>>,
}

impl Entrypoints {
    /// The text for `registry`, whose active release is `active`.
    pub(crate) fn text(
        &self,
        registry: &Arc<VerifiedRegistry>,
        active: &VerifiedRelease,
    ) -> Arc<str> {
        if let Some((kept_for, text)) = &*self.kept.read().expect("lock is never poisoned")
            && Arc::ptr_eq(kept_for, registry)
        {
            return text.clone();
        }
        let text: Arc<str> = entrypoint(active).into();
        *self.kept.write().expect("lock is never poisoned") =
            Some((registry.clone(), text.clone()));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paragraph_covers_the_nine_duties_and_the_host_spellings() {
        let p = paragraph();
        for duty in [
            "install no participant-local",
            "exactly four tools",
            "workflow_id",
            "really has",
            "pinned host-adapter asset",
            "project-relative files",
            "separate native subagent",
            "complete set",
            ".rimthan/workflow-session.json",
            "take precedence",
            "mcp__rimthan__rimthan_start_workflow",
            "rimthan_start_workflow under the mcp__rimthan namespace",
        ] {
            assert!(p.contains(duty), "missing: {duty}");
        }
        assert!(!p.contains("<!--"));
    }

    #[test]
    fn the_default_paragraph_names_no_shipped_workflow() {
        let registry = rimthan_registry::verify_embedded().unwrap();
        let p = paragraph().to_lowercase();
        for release in registry.releases().values() {
            for workflow in release.workflows() {
                let doc = workflow.doc();
                assert!(!p.contains(doc.id.as_str()), "{}", doc.id);
                assert!(!p.contains(&doc.title.to_lowercase()), "{}", doc.title);
            }
        }
    }

    fn doc(id: &str, title: &str, description: &str) -> WorkflowDoc {
        WorkflowDoc {
            id: id.parse().unwrap(),
            version: rimthan_registry::Version::new(1, 0, 0),
            title: title.into(),
            description: description.into(),
            harnesses: [(
                rimthan_registry::Harness::Codex,
                rimthan_registry::AdapterPin {
                    id: "codex".parse().unwrap(),
                    version: rimthan_registry::Version::new(1, 1, 0),
                },
            )]
            .into(),
            required_host_capabilities: Vec::new(),
            steps: Vec::new(),
        }
    }

    #[test]
    fn each_workflow_is_one_bounded_line_and_the_list_is_bounded() {
        let release: ReleaseId = "2027.01.0".parse().unwrap();
        let long = doc(
            "w",
            &"T".repeat(300),
            &format!("{}. Second.", "d".repeat(300)),
        );
        let text = workflow_list(&release, &[&long]);
        let line = text.lines().nth(1).unwrap();
        assert!(line.starts_with(&format!(
            "- `w` 1.0.0, {}…: {}…",
            "T".repeat(99),
            "d".repeat(199)
        )));
        assert!(line.ends_with(" Harnesses: codex."), "{line}");
        let plain = doc("w", "Title\non two lines", "One.\nTwo.");
        assert_eq!(
            workflow_list(&release, &[&plain]).lines().nth(1),
            Some("- `w` 1.0.0, Title on two lines: One. Harnesses: codex.")
        );

        let many: Vec<WorkflowDoc> = (0..=MAX_LISTED_WORKFLOWS)
            .map(|i| doc(&format!("w{i:03}"), "T", "D."))
            .collect();
        let refs: Vec<&WorkflowDoc> = many.iter().collect();
        let text = workflow_list(&release, &refs);
        assert_eq!(text.lines().count(), 1 + MAX_LISTED_WORKFLOWS + 1);
        assert!(text.lines().nth(1).unwrap().starts_with("- `w000` "));
        assert!(
            text.ends_with("- and 1 more; list the resources to see every workflow definition.")
        );
        assert!(workflow_list(&release, &[]).contains("offers no workflow"));
    }

    #[test]
    fn a_workflow_line_is_the_bounded_first_sentence_on_one_line() {
        assert_eq!(first_sentence("One. Two."), "One.");
        assert_eq!(first_sentence("Use v1.2 files! Then"), "Use v1.2 files!");
        assert_eq!(first_sentence("No end"), "No end");
        assert_eq!(one_line(" a\n\tb  c "), "a b c");
        assert_eq!(bounded("abc", 3), "abc");
        assert_eq!(bounded("abcd", 3), "ab…");
        assert_eq!(bounded("ééééé", 4).chars().count(), 4);
    }
}
