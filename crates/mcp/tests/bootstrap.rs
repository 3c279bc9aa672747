//! The bootstrap text: one paragraph (the release's own signed one, else the default from
//! `docs/operations/workflow-engine-bootstrap.md`) and the workflows of the active release,
//! served the same as prompt, resource and instructions, and following the active channel.

use std::path::Path;

use rimthan_mcp::{Profile, RimthanServer, START_PROMPT, reload::Reloader};
use rimthan_registry::{
    RegistryFiles, SigningKey, VerifiedRelease, build_release, external_policy, publish,
    set_channel, uri, verify_registry,
};
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams, ResourceContents};
use serde_json::json;

use crate::common::*;

const OPERATOR_PARAGRAPH: &str = "Example Corp's engine: connect, verify, and follow each step.";

/// The shipped release source with every workflow renamed `operator-<id>` and an operator's
/// own `bootstrap.md`, so no workflow id of the shipped source appears in it.
fn operator_source(root: &Path) -> std::path::PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source");
    let source = root.join("operator-source");
    copy_dir(&shipped, &source);
    for item in std::fs::read_dir(shipped.join("workflows")).unwrap() {
        let id = item.unwrap().file_name().into_string().unwrap();
        std::fs::rename(
            source.join("workflows").join(&id),
            source.join("workflows").join(format!("operator-{id}")),
        )
        .unwrap();
    }
    std::fs::write(
        source.join("bootstrap.md"),
        format!("\n{OPERATOR_PARAGRAPH}\n\n"),
    )
    .unwrap();
    source
}

/// A registry folder with release 2027.01.0 (the shipped source) and 2027.02.0 (the operator
/// source), `stable` on the first, and a server over it.
async fn two_release_server(dir: &Path) -> RimthanServer {
    let key = SigningKey::generate().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source");
    let operator = operator_source(dir);
    let registry = dir.join("registry");
    for (release, source) in [("2027.01.0", &shipped), ("2027.02.0", &operator)] {
        publish(
            &registry,
            &build_release(source, &release.parse().unwrap(), &key).unwrap(),
        )
        .unwrap();
    }
    set_channel(
        &registry,
        &"stable".parse().unwrap(),
        &"2027.01.0".parse().unwrap(),
    )
    .unwrap();
    server_on(verify(&registry), Profile::WorkflowEngine).await
}

fn verify(registry: &Path) -> rimthan_registry::VerifiedRegistry {
    verify_registry(
        &RegistryFiles::from_dir(registry).unwrap(),
        &external_policy(),
    )
    .unwrap()
}

fn text_of(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("{other:?}"),
    }
}

/// The prompt, the entrypoint resource and the instructions as `client` sees them, checked
/// to be one text.
async fn served_text(client: &Client) -> String {
    let prompt = client
        .get_prompt(GetPromptRequestParams::new(START_PROMPT))
        .await
        .unwrap();
    let prompt = prompt.messages[0].content.as_text().unwrap().text.clone();
    let resource = client
        .read_resource(ReadResourceRequestParams::new(uri::BOOTSTRAP_URI))
        .await
        .unwrap();
    let resource = text_of(&resource.contents[0]);
    let instructions = client.peer_info().unwrap().instructions.clone().unwrap();
    assert_eq!(prompt, resource, "prompt and resource");
    assert_eq!(prompt, instructions, "prompt and instructions");
    let listed = client.list_all_resources().await.unwrap();
    let entry = listed.iter().find(|r| r.uri == uri::BOOTSTRAP_URI).unwrap();
    assert_eq!(entry.size, Some(prompt.len() as u64));
    prompt
}

/// The `workflow_id`s the text lists, in order.
fn listed_ids(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .map(|l| {
            let (id, rest) = l.split_once("` ").unwrap();
            let version = rest.split(',').next().unwrap();
            (id.to_owned(), version.to_owned())
        })
        .collect()
}

fn workflows_of(release: &VerifiedRelease) -> Vec<(String, String)> {
    release
        .workflows()
        .map(|w| (w.doc().id.to_string(), w.doc().version.to_string()))
        .collect()
}

fn default_paragraph() -> &'static str {
    rimthan_mcp::bootstrap::paragraph()
}

#[tokio::test]
async fn the_text_is_the_paragraph_then_every_workflow_of_the_active_release_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_release_server(dir.path()).await;
    let registry = server.engine().releases().snapshot();
    let [active, other] = ["2027.01.0", "2027.02.0"]
        .map(|r| workflows_of(registry.release(&r.parse().unwrap()).unwrap()));
    assert!(!active.is_empty() && !other.is_empty());

    let client = duplex_client(server.clone()).await;
    let text = served_text(&client).await;
    assert!(
        text.starts_with(&format!("{}\n\n", default_paragraph())),
        "{text}"
    );
    assert!(!text.contains(OPERATOR_PARAGRAPH));
    assert_eq!(
        listed_ids(&text),
        active,
        "every workflow, by id then version"
    );
    for (id, _) in &other {
        assert!(
            !text.contains(id.as_str()),
            "{id} is not in the active release"
        );
    }
    // The heading the operations doc shows is the one served.
    let heading = rimthan_mcp::bootstrap::BOOTSTRAP_DOC
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("Workflows in release 2027.01.0"))
        .expect("the doc shows the list heading");
    assert!(text.contains(&format!("\n\n{heading}\n- `")), "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_release_with_its_own_bootstrap_serves_it_once_its_channel_is_active() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_release_server(dir.path()).await;
    let http = http_server(server.clone()).await;
    let read_over_http = async || {
        let (status, answer) =
            raw_read(http.addr, "2026-07-28", uri::BOOTSTRAP_URI, json!(1)).await;
        assert_eq!(status, 200, "{answer}");
        answer["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let before = read_over_http().await;
    assert!(before.starts_with(default_paragraph()));

    let registry = dir.path().join("registry");
    set_channel(
        &registry,
        &"stable".parse().unwrap(),
        &"2027.02.0".parse().unwrap(),
    )
    .unwrap();
    Reloader::new(registry.clone(), server.clone())
        .reload(true)
        .unwrap();
    let snapshot = server.engine().releases().snapshot();
    let [old, operator] = ["2027.01.0", "2027.02.0"]
        .map(|r| workflows_of(snapshot.release(&r.parse().unwrap()).unwrap()));

    for client in [
        duplex_client(server.clone()).await,
        modern_http_client(&http.url).await,
    ] {
        let text = served_text(&client).await;
        assert!(
            text.starts_with(&format!("{OPERATOR_PARAGRAPH}\n\n")),
            "{text}"
        );
        assert!(!text.contains(default_paragraph()));
        assert_eq!(listed_ids(&text), operator);
        for (id, _) in &old {
            assert!(
                !text.contains(&format!("`{id}`")),
                "{id} left with its release"
            );
        }
        // The signed paragraph itself stays readable at its release-pinned URI.
        let raw = client
            .read_resource(ReadResourceRequestParams::new(uri::bootstrap(
                &"2027.02.0".parse().unwrap(),
            )))
            .await
            .unwrap();
        assert_eq!(text_of(&raw.contents[0]), format!("{OPERATOR_PARAGRAPH}\n"));
        client.cancel().await.unwrap();
    }
    assert_eq!(
        read_over_http().await,
        served_text(&duplex_client(server).await).await
    );
}
