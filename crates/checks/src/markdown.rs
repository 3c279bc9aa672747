//! The parsed form of a Markdown input (`input.markdown`), built from pulldown-cmark's events in
//! one pass: headings, paragraphs with their sentences, list items, block quotations, links,
//! tables and code blocks, each with its 1-based line and the heading of the section it sits in.
//! Text is copied into every element open around it, so nesting is bounded
//! (`MAX_MARKDOWN_NESTING`) and every copy is charged to the run's budget; a section's heading
//! is one string every element of the section shares.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use rhai::{Array, Dynamic, ImmutableString, Map};

use crate::budget::{self, Budget, Spent, Unparsed};
use crate::data::parse_error;
use crate::input::LineIndex;

/// Quotations and list items open inside one another. Deeper is a `parse_error` finding: each
/// level holds its own copy of the text inside it.
pub(crate) const MAX_MARKDOWN_NESTING: usize = 32;

/// A block or inline element being read: where it started and its text so far.
struct Open {
    line: u32,
    text: String,
}

impl Open {
    fn new(line: u32) -> Self {
        Self {
            line,
            text: String::new(),
        }
    }
}

struct Table {
    line: u32,
    section: ImmutableString,
    header: Array,
    rows: Array,
    row: Array,
    cell: Option<String>,
}

struct Builder<'b, 'a> {
    budget: &'b Budget<'a>,
    section: ImmutableString,
    heading: Option<(u8, Open)>,
    paragraph: Option<Open>,
    items: Vec<Open>,
    quotes: Vec<Open>,
    links: Vec<(String, Open)>,
    code: Option<(String, Open)>,
    table: Option<Table>,
    headings: Array,
    paragraphs: Array,
    list_items: Array,
    quotations: Array,
    link_list: Array,
    tables: Array,
    code_blocks: Array,
}

/// Builds `input.markdown` for `text`, the input named `input`.
pub(crate) fn parse(input: &str, text: &str, budget: &Budget<'_>) -> Result<Dynamic, Unparsed> {
    let lines = LineIndex::new(text);
    let mut b = Builder {
        budget,
        section: ImmutableString::new(),
        heading: None,
        paragraph: None,
        items: Vec::new(),
        quotes: Vec::new(),
        links: Vec::new(),
        code: None,
        table: None,
        headings: Array::new(),
        paragraphs: Array::new(),
        list_items: Array::new(),
        quotations: Array::new(),
        link_list: Array::new(),
        tables: Array::new(),
        code_blocks: Array::new(),
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        let line = lines.line(range.start);
        match event {
            Event::Start(tag) => {
                if matches!(tag, Tag::Item | Tag::BlockQuote(_))
                    && b.items.len() + b.quotes.len() == MAX_MARKDOWN_NESTING
                {
                    let message = format!(
                        "Markdown nests more than {MAX_MARKDOWN_NESTING} quotations and list items"
                    );
                    return Err(Unparsed::Error(parse_error(
                        input,
                        Some(u64::from(line)),
                        message,
                    )));
                }
                b.start(tag, line)?
            }
            Event::End(tag) => b.end(tag)?,
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                b.text(&t)?
            }
            Event::SoftBreak => b.text(" ")?,
            Event::HardBreak => b.text("\n")?,
            _ => budget.spend(0)?,
        }
    }
    let mut map = Map::new();
    map.insert("headings".into(), b.headings.into());
    map.insert("paragraphs".into(), b.paragraphs.into());
    map.insert("items".into(), b.list_items.into());
    map.insert("quotes".into(), b.quotations.into());
    map.insert("links".into(), b.link_list.into());
    map.insert("tables".into(), b.tables.into());
    map.insert("code_blocks".into(), b.code_blocks.into());
    Ok(map.into())
}

impl Builder<'_, '_> {
    fn start(&mut self, tag: Tag<'_>, line: u32) -> Result<(), Spent> {
        match tag {
            Tag::Heading { level, .. } => self.heading = Some((level as u8, Open::new(line))),
            Tag::Paragraph => self.paragraph = Some(Open::new(line)),
            Tag::Item => self.items.push(Open::new(line)),
            Tag::BlockQuote(_) => self.quotes.push(Open::new(line)),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.budget.spend(budget::string(dest_url.len()))?;
                self.links.push((dest_url.into_string(), Open::new(line)))
            }
            Tag::CodeBlock(kind) => {
                let info = match kind {
                    pulldown_cmark::CodeBlockKind::Fenced(info) => info.into_string(),
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                };
                self.budget.spend(budget::string(info.len()))?;
                self.code = Some((info, Open::new(line)));
            }
            Tag::Table(_) => {
                self.budget
                    .spend(budget::string(0) + budget::map(4) + budget::array(0) * 2)?;
                self.table = Some(Table {
                    line,
                    section: self.section.clone(),
                    header: Array::new(),
                    rows: Array::new(),
                    row: Array::new(),
                    cell: None,
                })
            }
            Tag::TableCell => {
                if let Some(table) = &mut self.table {
                    table.cell = Some(String::new());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, tag: TagEnd) -> Result<(), Spent> {
        match tag {
            TagEnd::Heading(_) => {
                if let Some((level, open)) = self.heading.take() {
                    self.budget.spend(budget::string(0) + budget::map(4))?;
                    let text: ImmutableString = open.text.trim().into();
                    self.section = text.clone();
                    let mut map = located(open.line, text);
                    map.insert("level".into(), Dynamic::from_int(i64::from(level)));
                    self.headings.push(map.into());
                }
            }
            TagEnd::Paragraph => {
                if let Some(open) = self.paragraph.take() {
                    // Two paragraphs of one quotation or list item stay two words apart.
                    self.budget.spend(
                        self.quotes.len() + self.items.len() + budget::string(0) + budget::map(5),
                    )?;
                    for outer in self.quotes.iter_mut().chain(self.items.iter_mut()) {
                        outer.text.push(' ');
                    }
                    let mut sentences = Array::new();
                    for sentence in self::sentences(&open.text) {
                        self.budget.spend(budget::string(sentence.len()))?;
                        sentences.push(sentence.into());
                    }
                    self.budget.spend(budget::array(sentences.len()))?;
                    let mut map = self.in_section(open);
                    map.insert("in_quote".into(), (!self.quotes.is_empty()).into());
                    map.insert("sentences".into(), sentences.into());
                    self.paragraphs.push(map.into());
                }
            }
            TagEnd::Item => {
                if let Some(open) = self.items.pop() {
                    self.budget.spend(budget::string(0) + budget::map(3))?;
                    let map = self.in_section(open);
                    self.list_items.push(map.into());
                }
            }
            TagEnd::BlockQuote(_) => {
                if let Some(open) = self.quotes.pop() {
                    self.budget.spend(budget::string(0) + budget::map(3))?;
                    let map = self.in_section(open);
                    self.quotations.push(map.into());
                }
            }
            TagEnd::Link | TagEnd::Image => {
                if let Some((url, open)) = self.links.pop() {
                    self.budget.spend(budget::string(0) + budget::map(4))?;
                    let mut map = self.in_section(open);
                    map.insert("url".into(), url.into());
                    self.link_list.push(map.into());
                }
            }
            TagEnd::CodeBlock => {
                if let Some((info, open)) = self.code.take() {
                    self.budget.spend(budget::string(0) + budget::map(4))?;
                    let mut map = self.in_section(open);
                    map.insert("info".into(), info.into());
                    self.code_blocks.push(map.into());
                }
            }
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table
                    && let Some(cell) = table.cell.take()
                {
                    self.budget.spend(budget::string(0) + 16)?;
                    table.row.push(cell.trim().to_owned().into());
                }
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.header = std::mem::take(&mut table.row);
                }
            }
            TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    self.budget.spend(budget::array(0))?;
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row.into());
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    let mut map = Map::new();
                    map.insert("line".into(), Dynamic::from_int(i64::from(table.line)));
                    map.insert("section".into(), table.section.into());
                    map.insert("header".into(), table.header.into());
                    map.insert("rows".into(), table.rows.into());
                    self.tables.push(map.into());
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Text goes to every element open around it: a quoted paragraph's text is both the
    /// paragraph's and the quotation's.
    fn text(&mut self, text: &str) -> Result<(), Spent> {
        let open = self
            .heading
            .iter_mut()
            .map(|(_, o)| o)
            .chain(self.paragraph.iter_mut())
            .chain(self.items.iter_mut())
            .chain(self.quotes.iter_mut())
            .chain(self.links.iter_mut().map(|(_, o)| o))
            .chain(self.code.iter_mut().map(|(_, o)| o));
        for element in open {
            self.budget.spend(text.len())?;
            element.text.push_str(text);
        }
        if let Some(cell) = self.table.as_mut().and_then(|t| t.cell.as_mut()) {
            self.budget.spend(text.len())?;
            cell.push_str(text);
        }
        Ok(())
    }

    /// The element's map with its text, line and the section's shared heading. The text was
    /// charged as it arrived; the map's fixed cost by the caller.
    fn in_section(&self, open: Open) -> Map {
        let mut map = located(open.line, open.text.trim().into());
        map.insert("section".into(), self.section.clone().into());
        map
    }
}

fn located(line: u32, text: ImmutableString) -> Map {
    let mut map = Map::new();
    map.insert("line".into(), Dynamic::from_int(i64::from(line)));
    map.insert("text".into(), text.into());
    map
}

/// Sentences end at `.`, `!` or `?` followed by white space; a cheap rule that is enough to
/// count and quote sentences, not a linguistic segmenter.
fn sentences(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut rest = text.trim();
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .zip(rest.chars().skip(1))
            .find(|((_, c), next)| matches!(c, '.' | '!' | '?') && next.is_whitespace())
            .map_or(rest.len(), |((i, c), _)| i + c.len_utf8());
        let (sentence, tail) = rest.split_at(end);
        rest = tail.trim_start();
        Some(sentence.trim().to_owned())
    })
}
