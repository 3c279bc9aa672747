//! Property tests: no accepted template or output path escapes the project or reaches a
//! reserved root, whatever asset id is substituted.

use proptest::prelude::*;
use rimthan_registry::{AssetId, check_path_template, check_relative_path, expand_template};

use crate::common::contained;

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(".git".to_owned()),
        Just(".GIT".to_owned()),
        Just(".git.".to_owned()),
        Just(".git ".to_owned()),
        Just("GIT~1".to_owned()),
        Just(".Rimthan".to_owned()),
        Just(".jj".to_owned()),
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("".to_owned()),
        Just("con".to_owned()),
        Just("Lpt1.txt".to_owned()),
        Just("a:b".to_owned()),
        Just("{asset_id}".to_owned()),
        Just("{asset_id}.md".to_owned()),
        Just(".{asset_id}".to_owned()),
        Just("co{asset_id}".to_owned()),
        Just("{other}".to_owned()),
        Just("c{asset_id}1".to_owned()),
        Just(".g{asset_id}t".to_owned()),
        Just("con{asset_id}$".to_owned()),
        Just("{asset_id} .md".to_owned()),
        Just("l{asset_id}9.txt".to_owned()),
        Just("x\\y".to_owned()),
        Just("C:".to_owned()),
        Just("skills".to_owned()),
        Just(".claude".to_owned()),
        Just("SKILL.md".to_owned()),
        Just("a.".to_owned()),
        Just("\u{1}".to_owned()),
        "[a-zA-Z0-9._~ -]{1,8}",
    ]
}

fn template() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(segment(), 1..6),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(segments, lead, trail)| {
            let mut t = segments.join("/");
            if lead {
                t.insert(0, '/');
            }
            if trail {
                t.push('/');
            }
            t
        })
}

fn asset_id() -> impl Strategy<Value = AssetId> {
    "[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?".prop_filter_map("valid id", |s| s.parse().ok())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn accepted_templates_never_escape_or_reach_a_reserved_root(t in template(), id in asset_id()) {
        if check_path_template(&t).is_ok() {
            let path = expand_template(&t, &id);
            prop_assert_eq!(check_relative_path(&path), Ok(()));
            prop_assert_eq!(contained(&path), Ok(()));
        }
    }

    #[test]
    fn accepted_output_paths_never_escape_or_reach_a_reserved_root(t in template()) {
        if check_relative_path(&t).is_ok() {
            prop_assert_eq!(contained(&t), Ok(()));
        }
    }

    #[test]
    fn arbitrary_strings_never_crash_the_checks(s in ".{0,80}") {
        let _ = check_path_template(&s);
        let _ = check_relative_path(&s);
    }
}
