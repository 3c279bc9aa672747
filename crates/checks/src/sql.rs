//! SQL through squawk's PostgreSQL parser: the parsed form `input.sql` a script check reads, and
//! the built-in `sql-lint` check kind, which runs squawk's own linter with the rules and
//! severities the check names.

use std::collections::BTreeMap;

use rhai::{Array, Dynamic, Map};
use squawk_linter::{Linter, Rule};
use squawk_syntax::{SourceFile, SyntaxKind, ast::AstNode};

use crate::budget::{self, Budget, Spent};
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

/// Longest chain of binary operators in one expression: squawk's parser wraps each operand of
/// `1 + 1 + … + 1` (or `AND`, `||`, `->`, …) around the one before it and slows quadratically
/// with the chain, even though no bracket opens (64,000 `+` took 35 s).
pub(crate) const MAX_SQL_CHAIN: usize = 1024;

/// The first offset at which `text` nests deeper than `MAX_SQL_NESTING`, counting open
/// brackets, open `CASE`s, and the run of words and operators since the last literal, comma,
/// semicolon or closing bracket (a chain such as `NOT NOT NOT …` or `- - - …`), or chains more
/// than `MAX_SQL_CHAIN` operators (symbols, `AND`, `OR`) at one bracket level between two
/// commas, semicolons or `WHEN`/`THEN`/`ELSE`. Ordinary statements stay far below both.
fn too_deep(text: &str) -> Option<(usize, String)> {
    use squawk_lexer::TokenKind as T;
    let (mut cases, mut run, mut offset) = (0usize, 0usize, 0usize);
    // Operators so far at each open bracket level, the outermost first.
    let mut chains: Vec<usize> = vec![0];
    for token in squawk_lexer::tokenize(text) {
        let start = offset;
        offset += token.len as usize;
        let mut operator = false;
        match token.kind {
            T::Whitespace | T::LineComment | T::BlockComment { .. } => continue,
            T::OpenParen | T::OpenBracket | T::OpenCurly => chains.push(0),
            T::CloseParen | T::CloseBracket | T::CloseCurly => {
                if chains.len() > 1 {
                    chains.pop();
                }
                run = 0;
            }
            T::Comma | T::Semi => {
                run = 0;
                *chains
                    .last_mut()
                    .expect("the outermost level is never popped") = 0;
            }
            T::Literal { .. } | T::PositionalParam { .. } => run = 0,
            T::Ident => {
                let word = &text[start..offset];
                let is = |w: &str| word.eq_ignore_ascii_case(w);
                if is("case") {
                    cases += 1;
                } else if is("end") {
                    cases = cases.saturating_sub(1);
                } else if is("when") || is("then") || is("else") {
                    *chains
                        .last_mut()
                        .expect("the outermost level is never popped") = 0;
                }
                operator = is("and") || is("or");
                run += 1;
            }
            _ => {
                operator = true;
                run += 1;
            }
        }
        let brackets = chains.len() - 1;
        if brackets + cases + run > MAX_SQL_NESTING {
            return Some((
                start,
                format!(
                    "SQL nests deeper than {MAX_SQL_NESTING} levels (brackets, CASE, or a chain of words and operators with no literal or comma)"
                ),
            ));
        }
        let chain = chains
            .last_mut()
            .expect("the outermost level is never popped");
        *chain += usize::from(operator);
        if *chain > MAX_SQL_CHAIN {
            return Some((
                start,
                format!(
                    "SQL chains more than {MAX_SQL_CHAIN} operators in one expression; split it, or use IN (…) or a VALUES list"
                ),
            ));
        }
    }
    None
}

/// `input.sql`: `statements`, each `#{ line, text }`, and `errors`, each `#{ line, message }`
/// (squawk's parser recovers, so a script sees every statement it could read).
pub(crate) fn parse(text: &str, budget: &Budget<'_>) -> Result<Dynamic, Spent> {
    let lines = LineIndex::new(text);
    let original = text;
    // Same length as the file: statements are cut from the author's text at squawk's offsets.
    let sent = crate::psql::as_sent(text);
    let text = sent.as_ref();
    if let Some((offset, message)) = too_deep(text) {
        let mut error = Map::new();
        error.insert(
            "line".into(),
            Dynamic::from_int(i64::from(lines.line(offset))),
        );
        error.insert("message".into(), message.into());
        let mut map = Map::new();
        map.insert("statements".into(), Array::new().into());
        map.insert("errors".into(), Array::from([Dynamic::from(error)]).into());
        return Ok(map.into());
    }
    let parse = SourceFile::parse(text);
    budget.spend(0)?;
    let mut statements = Array::new();
    for stmt in parse.tree().stmts() {
        let node = stmt.syntax();
        let range = node.text_range();
        let own = original
            .get(usize::from(range.start())..usize::from(range.end()))
            .unwrap_or_default();
        budget.spend(budget::map(2) + budget::string(own.len()) + 16)?;
        let mut map = Map::new();
        map.insert(
            "line".into(),
            Dynamic::from_int(i64::from(lines.line(usize::from(range.start())))),
        );
        map.insert("text".into(), own.into());
        statements.push(map.into());
    }
    let mut errors = Array::new();
    for error in parse.errors() {
        budget.spend(budget::map(2) + budget::string(error.message().len()) + 16)?;
        let start = usize::from(error.range().start());
        let mut map = Map::new();
        map.insert(
            "line".into(),
            Dynamic::from_int(i64::from(lines.line(start))),
        );
        map.insert("message".into(), error.message().to_owned().into());
        errors.push(map.into());
    }
    let mut map = Map::new();
    map.insert("statements".into(), statements.into());
    map.insert("errors".into(), errors.into());
    Ok(map.into())
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

    /// Lints one input as SQL, whatever its format.
    pub(crate) fn lint(&self, input: &TextInput<'_>, findings: &mut Vec<Finding>) {
        let lines = LineIndex::new(input.text);
        let at = |offset: usize| Some(lines.line(offset));
        // Same length as the file, so every offset below is the author's.
        let sent = crate::psql::as_sent(input.text);
        let text = sent.as_ref();
        if let Some((offset, message)) = too_deep(text) {
            findings.push(
                Finding::new(SQL_SYNTAX_ERROR_RULE, Severity::Error, message)
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
