//! The parsed form of a Markdown input (`input.markdown`), built from pulldown-cmark's events in
//! one pass: headings, paragraphs with their sentences, list items, block quotations, links,
//! tables and code blocks, each with its 1-based line and the heading of the section it sits in.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use rhai::{Array, Dynamic, Map};

use crate::input::LineIndex;

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
    section: String,
    header: Array,
    rows: Array,
    row: Array,
    cell: Option<String>,
}

#[derive(Default)]
struct Builder {
    section: String,
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

/// Builds `input.markdown` for `text`.
pub(crate) fn parse(text: &str) -> Dynamic {
    let lines = LineIndex::new(text);
    let mut b = Builder::default();
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        let line = lines.line(range.start);
        match event {
            Event::Start(tag) => b.start(tag, line),
            Event::End(tag) => b.end(tag),
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                b.text(&t)
            }
            Event::SoftBreak => b.text(" "),
            Event::HardBreak => b.text("\n"),
            _ => {}
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
    map.into()
}

impl Builder {
    fn start(&mut self, tag: Tag<'_>, line: u32) {
        match tag {
            Tag::Heading { level, .. } => self.heading = Some((level as u8, Open::new(line))),
            Tag::Paragraph => self.paragraph = Some(Open::new(line)),
            Tag::Item => self.items.push(Open::new(line)),
            Tag::BlockQuote(_) => self.quotes.push(Open::new(line)),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push((dest_url.into_string(), Open::new(line)))
            }
            Tag::CodeBlock(kind) => {
                let info = match kind {
                    pulldown_cmark::CodeBlockKind::Fenced(info) => info.into_string(),
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((info, Open::new(line)));
            }
            Tag::Table(_) => {
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
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                if let Some((level, open)) = self.heading.take() {
                    let text = open.text.trim().to_owned();
                    self.section = text.clone();
                    let mut map = located(open.line, text);
                    map.insert("level".into(), Dynamic::from_int(i64::from(level)));
                    self.headings.push(map.into());
                }
            }
            TagEnd::Paragraph => {
                if let Some(open) = self.paragraph.take() {
                    // Two paragraphs of one quotation or list item stay two words apart.
                    for outer in self.quotes.iter_mut().chain(self.items.iter_mut()) {
                        outer.text.push(' ');
                    }
                    let sentences: Array = sentences(&open.text).map(Dynamic::from).collect();
                    let mut map = self.in_section(open);
                    map.insert("in_quote".into(), (!self.quotes.is_empty()).into());
                    map.insert("sentences".into(), sentences.into());
                    self.paragraphs.push(map.into());
                }
            }
            TagEnd::Item => {
                if let Some(open) = self.items.pop() {
                    let map = self.in_section(open);
                    self.list_items.push(map.into());
                }
            }
            TagEnd::BlockQuote(_) => {
                if let Some(open) = self.quotes.pop() {
                    let map = self.in_section(open);
                    self.quotations.push(map.into());
                }
            }
            TagEnd::Link | TagEnd::Image => {
                if let Some((url, open)) = self.links.pop() {
                    let mut map = self.in_section(open);
                    map.insert("url".into(), url.into());
                    self.link_list.push(map.into());
                }
            }
            TagEnd::CodeBlock => {
                if let Some((info, open)) = self.code.take() {
                    let mut map = self.in_section(open);
                    map.insert("info".into(), info.into());
                    self.code_blocks.push(map.into());
                }
            }
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table
                    && let Some(cell) = table.cell.take()
                {
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
    }

    /// Text goes to every element open around it: a quoted paragraph's text is both the
    /// paragraph's and the quotation's.
    fn text(&mut self, text: &str) {
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
            element.text.push_str(text);
        }
        if let Some(cell) = self.table.as_mut().and_then(|t| t.cell.as_mut()) {
            cell.push_str(text);
        }
    }

    fn in_section(&self, open: Open) -> Map {
        let mut map = located(open.line, open.text.trim().to_owned());
        map.insert("section".into(), self.section.clone().into());
        map
    }
}

fn located(line: u32, text: String) -> Map {
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
