//! SQL through squawk's PostgreSQL parser: the parsed form `input.sql` a script check reads, and
//! the built-in `sql-lint` check kind, which runs squawk's own linter with the rules and
//! severities the check names.

use std::collections::BTreeMap;

use rhai::{Array, Dynamic, Map};
use squawk_linter::{Linter, Rule};
use squawk_syntax::{SourceFile, SyntaxKind, ast::AstNode};

use crate::{CheckError, Finding, Severity, input::LineIndex, input::TextInput};

/// The rule id of a `sql-lint` finding for text squawk cannot parse.
pub const SQL_SYNTAX_ERROR_RULE: &str = "syntax-error";
/// The rule id of a `sql-lint` finding for a `squawk-ignore` comment: the file under check may
/// not switch off the rules its check names.
pub const SQL_IGNORE_COMMENT_RULE: &str = "squawk-ignore-refused";

/// Deepest SQL nesting parsed: squawk's parser recurses once per level (brackets, prefix
/// operators, `CASE`) and slows quadratically with depth, so deeper text is a syntax error
/// found by the lexer (which does not recurse) before the parser sees it.
pub(crate) const MAX_SQL_NESTING: usize = 256;

/// The first offset at which `text` nests deeper than `MAX_SQL_NESTING`, counting open
/// brackets, open `CASE`s, and the run of words and operators since the last literal, comma,
/// semicolon or closing bracket (a chain such as `NOT NOT NOT …` or `- - - …`). Ordinary
/// statements stay far below it: commas and literals end a run.
fn too_deep(text: &str) -> Option<usize> {
    use squawk_lexer::TokenKind as T;
    let (mut brackets, mut cases, mut run, mut offset) = (0usize, 0usize, 0usize, 0usize);
    for token in squawk_lexer::tokenize(text) {
        let start = offset;
        offset += token.len as usize;
        match token.kind {
            T::Whitespace | T::LineComment | T::BlockComment { .. } => continue,
            T::OpenParen | T::OpenBracket | T::OpenCurly => brackets += 1,
            T::CloseParen | T::CloseBracket | T::CloseCurly => {
                brackets = brackets.saturating_sub(1);
                run = 0;
            }
            T::Literal { .. } | T::Comma | T::Semi | T::PositionalParam { .. } => run = 0,
            T::Ident => {
                let word = &text[start..offset];
                if word.eq_ignore_ascii_case("case") {
                    cases += 1;
                } else if word.eq_ignore_ascii_case("end") {
                    cases = cases.saturating_sub(1);
                }
                run += 1;
            }
            _ => run += 1,
        }
        if brackets + cases + run > MAX_SQL_NESTING {
            return Some(start);
        }
    }
    None
}

fn too_deep_message() -> String {
    format!(
        "SQL nests deeper than {MAX_SQL_NESTING} levels (brackets, CASE, or a chain of words and operators with no literal or comma)"
    )
}

/// `input.sql`: `statements`, each `#{ line, text }`, and `errors`, each `#{ line, message }`
/// (squawk's parser recovers, so a script sees every statement it could read).
pub(crate) fn parse(text: &str) -> Dynamic {
    let lines = LineIndex::new(text);
    let original = text;
    // Same length as the file: statements are cut from the author's text at squawk's offsets.
    let sent = crate::psql::as_sent(text);
    let text = sent.as_ref();
    if let Some(offset) = too_deep(text) {
        let mut error = Map::new();
        error.insert(
            "line".into(),
            Dynamic::from_int(i64::from(lines.line(offset))),
        );
        error.insert("message".into(), too_deep_message().into());
        let mut map = Map::new();
        map.insert("statements".into(), Array::new().into());
        map.insert("errors".into(), Array::from([Dynamic::from(error)]).into());
        return map.into();
    }
    let parse = SourceFile::parse(text);
    let statements: Array = parse
        .tree()
        .stmts()
        .map(|stmt| {
            let node = stmt.syntax();
            let start = usize::from(node.text_range().start());
            let mut map = Map::new();
            map.insert(
                "line".into(),
                Dynamic::from_int(i64::from(lines.line(start))),
            );
            let range = node.text_range();
            let own = original
                .get(usize::from(range.start())..usize::from(range.end()))
                .unwrap_or_default();
            map.insert("text".into(), own.into());
            map.into()
        })
        .collect();
    let errors: Array = parse
        .errors()
        .iter()
        .map(|error| {
            let start = usize::from(error.range().start());
            let mut map = Map::new();
            map.insert(
                "line".into(),
                Dynamic::from_int(i64::from(lines.line(start))),
            );
            map.insert("message".into(), error.message().to_owned().into());
            map.into()
        })
        .collect();
    let mut map = Map::new();
    map.insert("statements".into(), statements.into());
    map.insert("errors".into(), errors.into());
    map.into()
}

/// A compiled `sql-lint` check: squawk rules, each with the severity its findings carry.
#[derive(Debug, Clone)]
pub(crate) struct SqlLint {
    rules: BTreeMap<String, (Rule, Severity)>,
}

impl SqlLint {
    /// Resolves each named rule (kebab-case, as squawk spells it); an alias such as
    /// `require-timeout-settings` stands for the rules it expands to, at its severity.
    pub(crate) fn new<'a>(
        rules: impl IntoIterator<Item = (&'a str, Severity)>,
    ) -> Result<Self, CheckError> {
        let mut resolved = BTreeMap::new();
        for (name, severity) in rules {
            let rule: Rule = name.parse().map_err(|_| CheckError::UnknownSqlRule {
                rule: name.to_owned(),
            })?;
            for rule in std::iter::once(rule).chain(rule.expands_to().iter().copied()) {
                resolved.insert(rule.to_string(), (rule, severity));
            }
        }
        Ok(Self { rules: resolved })
    }

    /// Lints every input as SQL, whatever its format.
    pub(crate) fn run(&self, inputs: &[TextInput<'_>], findings: &mut Vec<Finding>) {
        for input in inputs {
            self.lint(input, findings);
        }
    }

    fn lint(&self, input: &TextInput<'_>, findings: &mut Vec<Finding>) {
        let lines = LineIndex::new(input.text);
        let at = |offset: usize| Some(lines.line(offset));
        // Same length as the file, so every offset below is the author's.
        let sent = crate::psql::as_sent(input.text);
        let text = sent.as_ref();
        if let Some(offset) = too_deep(text) {
            findings.push(
                Finding::new(SQL_SYNTAX_ERROR_RULE, Severity::Error, too_deep_message())
                    .at(input.name, at(offset)),
            );
            return;
        }
        let parse = SourceFile::parse(text);
        for error in parse.errors() {
            let message = format!("SQL does not parse: {}", error.message());
            findings.push(
                Finding::new(SQL_SYNTAX_ERROR_RULE, Severity::Error, message)
                    .at(input.name, at(usize::from(error.range().start()))),
            );
        }
        for token in parse.syntax_node().descendants_with_tokens() {
            if let Some(token) = token.into_token()
                && token.kind() == SyntaxKind::COMMENT
                && token.text().contains("squawk-ignore")
            {
                let message =
                    "a `squawk-ignore` comment cannot switch off the rules this check applies";
                findings.push(
                    Finding::new(SQL_IGNORE_COMMENT_RULE, Severity::Error, message)
                        .at(input.name, at(usize::from(token.text_range().start()))),
                );
            }
        }
        let mut linter = Linter::from(self.rules.values().map(|(rule, _)| *rule));
        for violation in linter.lint(&parse, text) {
            let rule = violation.code.to_string();
            let severity = self.rules.get(&rule).map_or(Severity::Error, |(_, s)| *s);
            let mut message = violation.message;
            if let Some(help) = violation.help {
                message.push_str(". ");
                message.push_str(&help);
            }
            findings.push(
                Finding::new(rule, severity, message)
                    .at(input.name, at(usize::from(violation.text_range.start()))),
            );
        }
    }
}
