//! One test per folder under `tests/data/<scenario>/`: each applies its edits to a correctly
//! signed copy of the default registry and asserts the exact code, rule and location (or, for a
//! case without `expect`, that the edited registry still verifies).

use crate::common::{Case, test_registry, verify_external};

fn assert_fixture(scenario: &str) {
    let case = Case::load(scenario);
    let files = case.apply();
    let Some(expect) = &case.expect else {
        if let Err(err) = verify_external(&files) {
            panic!("{scenario} must verify ({}): {err}", case.description);
        }
        return;
    };
    let err =
        verify_external(&files).expect_err(&format!("{scenario} must fail: {}", case.description));
    assert_eq!(err.code(), expect.code, "{scenario}: {err}");
    if let Some(rule) = &expect.rule {
        let actual = err
            .path_rule()
            .map(|r| r.code().to_owned())
            .or_else(|| match &err {
                rimthan_registry::RegistryError::WorkflowInvalid { rule, .. } => {
                    Some(rule.code().to_owned())
                }
                rimthan_registry::RegistryError::AdapterContractInvalid { rule, .. } => {
                    Some(rule.code().to_owned())
                }
                _ => None,
            });
        assert_eq!(actual.as_deref(), Some(rule.as_str()), "{scenario}: {err}");
    }
    for names in std::iter::once(&expect.names).chain(&expect.also_names) {
        assert!(
            err.to_string().contains(names.as_str()),
            "{scenario}: {err} should name {names}"
        );
    }
}

#[test]
fn the_unmodified_test_registry_verifies() {
    let registry = verify_external(&test_registry()).expect("baseline verifies");
    let published = rimthan_registry::PublishedLock::read(&rimthan_registry::embedded_files())
        .unwrap()
        .expect("the embedded registry carries its publication lock");
    assert_eq!(registry.releases().len(), published.releases.len());
}

macro_rules! fixtures {
    ($($name:ident => $scenario:literal),+ $(,)?) => {
        $(#[test] fn $name() { assert_fixture($scenario); })+

        #[test]
        fn every_fixture_folder_has_a_test() {
            let mut listed = vec![$($scenario),+];
            listed.sort_unstable();
            let mut on_disk: Vec<String> = std::fs::read_dir(crate::common::data_dir())
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| e.path().join("case.json").exists())
                .map(|e| e.file_name().into_string().unwrap())
                .collect();
            on_disk.sort();
            assert_eq!(on_disk, listed);
        }
    };
}

fixtures! {
    changed_byte_is_a_digest_mismatch => "digest-mismatch",
    manifest_changed_after_signing_is_signature_invalid => "signature-invalid",
    signature_by_an_untrusted_key_is_unknown_signing_key => "unknown-signing-key",
    development_key_is_refused_for_external_registries => "default-key-refused",
    deleted_file_is_entry_missing => "missing-file",
    oversize_file_is_entry_too_large => "oversize-file",
    unsigned_extra_file_is_unlisted => "unlisted-file",
    unknown_validator_is_a_dangling_reference => "dangling-validator-reference",
    template_with_two_placeholders_is_refused => "template-two-placeholders",
    template_with_parent_segment_is_refused => "template-parent-segment",
    template_under_uppercase_git_is_refused => "template-reserved-root-uppercase",
    template_under_git_with_trailing_dot_is_refused => "template-reserved-root-trailing-dot",
    template_under_git_short_name_is_refused => "template-reserved-root-short-name",
    template_with_device_name_is_refused => "template-device-name",
    template_with_unknown_placeholder_is_refused => "template-unknown-placeholder",
    absolute_template_is_refused => "template-absolute",
    output_under_rimthan_root_is_refused => "output-path-reserved-root",
    workflow_must_start_with_setup => "workflow-without-setup-first",
    adapter_1_1_without_contract_is_refused => "adapter-without-contract",
    harness_pinned_to_contractless_adapter_is_refused => "harness-pinned-to-legacy-adapter",
    asset_id_breaking_the_name_rule_is_refused => "invalid-asset-id",
    schema_that_does_not_compile_is_refused => "schema-does-not-compile",
    writable_codex_subagent_is_refused => "codex-subagent-not-read-only",
    channel_to_missing_release_is_refused => "channel-unknown-release",
    report_schema_without_a_required_base_field_is_refused => "report-schema-drops-required-field",
    report_schema_retyping_findings_is_refused => "report-schema-retypes-findings",
    report_schema_adding_a_required_field_verifies => "report-schema-adds-required-field",
    schema_example_failing_its_schema_is_refused => "schema-example-fails-schema",
    example_on_a_json_output_is_refused => "example-on-json-output",
    output_example_over_max_bytes_is_refused => "example-too-large",
    schema_with_several_errors_reports_each_pointer => "schema-several-errors",
    schema_errors_are_listed_up_to_twenty => "schema-many-errors",
    validator_input_error_names_the_validator => "validator-input-unavailable",
    bootstrap_file_the_manifest_does_not_list_is_unlisted => "bootstrap-unlisted",
    oversize_bootstrap_entry_is_refused => "bootstrap-oversize",
    blank_bootstrap_entry_is_refused => "bootstrap-blank",
}
