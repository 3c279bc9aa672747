//! The same check on the same inputs gives the same findings on every run, on any thread: no
//! clock, no randomness, no hash order reaches a check.

use rimthan_checks::{Check, Input, Limits};

/// Reads every parsed form and reports from map keys, whose iteration order is the one place
/// a hash-ordered map would show.
const CHECK: &str = r#"
for name in inputs.keys() {
    let input = inputs[name];
    let form = input[input.format];
    if type_of(form) == "map" {
        for key in form.keys() {
            warning("seen", `${name} has ${key}`, name, 1);
        }
    }
}
let md = inputs["notes.md"].markdown;
for p in md.paragraphs {
    for s in p.sentences {
        if s.len() > 40 { error("long-sentence", s, "notes.md", p.line); }
    }
}
for row in inputs["table.csv"].csv.rows {
    for column in row.fields.keys() {
        if row.fields[column] == "" { error("empty-cell", column, "table.csv", row.line); }
    }
}
"#;

const NOTES: &str = "# Notes\n\nA short one. Then a sentence that runs on well past forty characters.\n\n> Quoted.\n";
const TABLE: &str = "b,a,c\n1,,3\n,2,\n";
const DATA: &str = r#"{"z": 1, "a": [1, 2], "m": {"y": null, "b": true}}"#;
const SQL: &str = "SELECT 1;\nALTER TABLE t ADD COLUMN c int;\n";

fn run(check: &Check) -> Vec<rimthan_checks::Finding> {
    let inputs = [
        Input::new("table.csv", TABLE.as_bytes()),
        Input::new("notes.md", NOTES.as_bytes()),
        Input::new("data.json", DATA.as_bytes()),
        Input::new("data.yaml", DATA.as_bytes()),
        Input::new("up.sql", SQL.as_bytes()),
    ];
    check.run(&inputs).expect("the check runs")
}

#[test]
fn the_same_inputs_give_the_same_findings_on_every_run_and_thread() {
    let check = Check::script(CHECK, Limits::default()).unwrap();
    let first = run(&check);
    assert!(first.len() > 10, "{first:#?}");
    assert_eq!(run(&check), first);
    let recompiled = Check::script(CHECK, Limits::default()).unwrap();
    assert_eq!(run(&recompiled), first);
    let on_threads: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| run(&check))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(on_threads.iter().all(|f| *f == first));
}

#[test]
fn findings_come_back_sorted_by_input_line_and_rule() {
    let check = Check::script(
        r#"
        error("b-rule", "m", "z.md", 2);
        warning("a-rule", "m", "z.md", 2);
        error("c-rule", "m", "a.md", 9);
        error("d-rule", "no place");
        error("e-rule", "m", "z.md", 1);
        "#,
        Limits::default(),
    )
    .unwrap();
    let order: Vec<_> = check
        .run(&[])
        .unwrap()
        .into_iter()
        .map(|f| f.rule)
        .collect();
    assert_eq!(order, ["d-rule", "c-rule", "e-rule", "a-rule", "b-rule"]);
}
