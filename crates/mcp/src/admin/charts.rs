//! Bar charts as inline SVG, drawn by the server so the page needs no script. Each chart
//! carries a title and a description for screen readers, and its page shows the same numbers
//! in a table beside it.

use maud::{Markup, html};

/// One bar: what it counts, its length, and the number written beside it.
pub(super) struct Bar {
    pub(super) label: String,
    pub(super) value: f64,
    pub(super) shown: String,
}

const LABEL_WIDTH: f64 = 240.0;
const BAR_WIDTH: f64 = 380.0;
const VALUE_WIDTH: f64 = 160.0;
const ROW: f64 = 30.0;
const BAR_HEIGHT: f64 = 18.0;
/// Characters of a label drawn before it is cut (the table beside it shows it whole).
const LABEL_CHARS: usize = 34;

fn cut(label: &str) -> String {
    if label.chars().count() <= LABEL_CHARS {
        label.to_owned()
    } else {
        let head: String = label.chars().take(LABEL_CHARS - 1).collect();
        format!("{head}…")
    }
}

/// A horizontal bar chart; the longest bar is `max` (or the largest value when `max` is 0).
pub(super) fn bars(id: &str, title: &str, description: &str, bars: &[Bar], max: f64) -> Markup {
    let max = if max > 0.0 {
        max
    } else {
        bars.iter().map(|b| b.value).fold(0.0, f64::max)
    };
    let width = LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH;
    let height = (bars.len().max(1) as f64) * ROW + 10.0;
    let title_id = format!("{id}-title");
    let desc_id = format!("{id}-desc");
    html! {
        svg xmlns="http://www.w3.org/2000/svg" role="img"
            aria-labelledby=(format!("{title_id} {desc_id}"))
            viewBox=(format!("0 0 {width} {height}")) width=(width) height=(height) {
            title id=(title_id) { (title) }
            desc id=(desc_id) { (description) }
            @if bars.is_empty() {
                text x="0" y="20" class="chart-text" { "Nothing to count yet." }
            }
            @for (i, bar) in bars.iter().enumerate() {
                @let y = i as f64 * ROW + 5.0;
                @let length = if max > 0.0 { (bar.value / max).clamp(0.0, 1.0) * BAR_WIDTH } else { 0.0 };
                text x=(LABEL_WIDTH - 8.0) y=(y + BAR_HEIGHT - 4.0) text-anchor="end" class="chart-text" {
                    (cut(&bar.label))
                }
                rect x=(LABEL_WIDTH) y=(y) width=(format!("{length:.1}")) height=(BAR_HEIGHT) class="chart-bar" {}
                text x=(LABEL_WIDTH + length + 6.0) y=(y + BAR_HEIGHT - 4.0) class="chart-text" {
                    (bar.shown)
                }
            }
        }
    }
}

/// Seconds as a person reads a duration: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub(super) fn duration(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        s => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_cut_and_bars_scaled() {
        let chart = bars(
            "c",
            "T",
            "D",
            &[
                Bar {
                    label: "<script>alert(1)</script>".into(),
                    value: 2.0,
                    shown: "2".into(),
                },
                Bar {
                    label: "x".repeat(100),
                    value: 1.0,
                    shown: "1".into(),
                },
            ],
            0.0,
        )
        .into_string();
        assert!(!chart.contains("<script>"), "{chart}");
        assert!(chart.contains("&lt;script&gt;"));
        assert!(chart.contains(&format!("{}…", "x".repeat(LABEL_CHARS - 1))));
        assert!(chart.contains(r#"width="380.0""#) && chart.contains(r#"width="190.0""#));
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(duration(5), "5 s");
        assert_eq!(duration(600), "10 min");
        assert_eq!(duration(3 * 3600 + 300), "3 h 5 min");
        assert_eq!(duration(2 * 86_400 + 4 * 3600), "2 d 4 h");
    }
}
