//! The host-neutral bootstrap paragraph (SPEC §4.3), kept once in
//! `docs/operations/workflow-engine-bootstrap.md` between markers and embedded at build time.

use std::sync::LazyLock;

/// The operations document that holds the paragraph.
pub const BOOTSTRAP_DOC: &str =
    include_str!("../../../docs/operations/workflow-engine-bootstrap.md");
const BEGIN: &str = "<!-- rimthan:bootstrap:begin -->";
const END: &str = "<!-- rimthan:bootstrap:end -->";

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

/// The bootstrap paragraph, served as prompt, resource and instructions.
pub fn paragraph() -> &'static str {
    &PARAGRAPH
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_paragraph_covers_the_nine_duties() {
        let p = super::paragraph();
        for duty in [
            "install no participant-local",
            "exactly four tools",
            "really has",
            "pinned host-adapter asset",
            "project-relative files",
            "separate native subagent",
            "complete set",
            ".rimthan/workflow-session.json",
            "take precedence",
        ] {
            assert!(p.contains(duty), "missing: {duty}");
        }
        assert!(!p.contains("<!--"));
    }
}
