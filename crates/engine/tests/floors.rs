//! The engine's floors (`docs/engine.md` §10), read from its source: each folder of `src/`
//! imports from the crate only what lies on its own floor or below, so plain data never reaches
//! for the store and a rule never reads or writes one.

use std::{collections::BTreeSet, fs, path::Path};

/// The floors from the ground up, with the crate modules each may import. `engine/` stands on
/// all of them and is not listed; `error.rs`, `cache.rs` and `releases.rs` are single files.
const FLOORS: &[(&str, &[&str])] = &[
    ("model", &["model"]),
    ("store", &["cache", "model", "store"]),
    ("rules", &["error", "model", "rules"]),
    ("evidence", &["evidence", "model", "store"]),
];

/// The crate modules `source` names after `crate::`, outside comments, including every item
/// of a `use crate::{…}` group.
fn imported(source: &str) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let leading = |item: &str| -> String {
        item.trim()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            found.insert(leading(rest));
            continue;
        };
        let (mut depth, mut start) = (0usize, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    found.insert(leading(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    found.insert(leading(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
    }
    found.remove("");
    found
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn each_floor_imports_only_the_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (floor, allowed) in FLOORS {
        let mut files = Vec::new();
        sources(&src.join(floor), &mut files);
        let beside = src.join(format!("{floor}.rs"));
        if beside.exists() {
            files.push(beside);
        }
        assert!(!files.is_empty(), "src/{floor} has no source");
        for file in files {
            for module in imported(&fs::read_to_string(&file).unwrap()) {
                if !allowed.contains(&module.as_str()) {
                    broken.push(format!(
                        "{} imports crate::{module}",
                        file.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "imports across floors: {broken:#?}");
}

#[test]
fn every_folder_of_the_engine_is_on_a_floor() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() && name != "engine" {
            assert!(
                FLOORS.iter().any(|(floor, _)| *floor == name),
                "src/{name}/ is on no floor: place it in FLOORS and docs/engine.md §10"
            );
        }
    }
}

#[test]
fn the_reader_sees_grouped_and_single_imports_and_skips_comments() {
    let source = "use crate::{\n    model::{a, b},\n    store::Store,\n};\n\
                  // crate::engine is named in a comment\n\
                  fn f() { crate::rules::view::x(); }\n";
    let found: Vec<_> = imported(source).into_iter().collect();
    assert_eq!(found, ["model", "rules", "store"]);
}
