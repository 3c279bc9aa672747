//! The resource catalogue: exact bytes, cache hints, routing by release, not-found errors.

use rimthan_mcp::Profile;
use rimthan_registry::{
    RegistryFiles, SigningKey, build_release, external_policy, publish, set_channel,
    verify_registry,
};
use rmcp::model::{ReadResourceRequestParams, ResourceContents};

use crate::common::*;

fn text(contents: &ResourceContents) -> &str {
    match contents {
        ResourceContents::TextResourceContents { text, .. } => text,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn reads_are_byte_identical_to_manifest_entries_and_listed_in_uri_order() {
    let registry = rimthan_registry::verify_embedded().unwrap();
    let release = registry
        .channel(&"stable".parse().unwrap())
        .unwrap()
        .clone();
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let first = client.list_resources(None).await.unwrap();
    assert_eq!(first.resources.len(), rimthan_mcp::PAGE_SIZE);
    assert!(
        first.next_cursor.is_some(),
        "the release lists more than one page"
    );
    let listed = client.list_all_resources().await.unwrap();
    let uris: Vec<_> = listed.iter().map(|r| r.uri.clone()).collect();
    let mut sorted = uris.clone();
    sorted.sort();
    assert_eq!(uris, sorted);
    for entry in &release.manifest().entries {
        let uri = rimthan_registry::uri::entry(release.id(), entry);
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
            .unwrap();
        assert_eq!(
            text(&read.contents[0]).as_bytes(),
            &release.content(&entry.path).unwrap()[..],
            "{uri}"
        );
        let meta = match &read.contents[0] {
            ResourceContents::TextResourceContents { meta, .. } => meta.clone().unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(meta.0["rimthan/sha256"], entry.sha256.to_string());
        assert_eq!(meta.0["rimthan/immutable"], true);
    }
    let summary = client
        .read_resource(ReadResourceRequestParams::new(
            "rimthan://registry/2026.12.5/summary",
        ))
        .await
        .unwrap();
    let summary: serde_json::Value = serde_json::from_str(text(&summary.contents[0])).unwrap();
    assert_eq!(
        summary["manifest_sha256"],
        release.manifest_sha256().to_string()
    );
    assert_eq!(summary["signing_key_id"], release.signing_key_id().as_str());
    assert_eq!(summary["channels"], serde_json::json!(["stable"]));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_clients_see_private_cache_scope_and_ttls() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let client = modern_http_client(&http.url).await;
    let listed = client.list_resources(None).await.unwrap();
    assert_eq!(listed.cache_scope, Some(rmcp::model::CacheScope::Private));
    assert_eq!(listed.ttl_ms, Some(rimthan_mcp::TTL_MOVING_MS));
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "rimthan://registry/2026.12.5/manifest",
        ))
        .await
        .unwrap();
    assert_eq!(read.cache_scope, Some(rmcp::model::CacheScope::Private));
    assert_eq!(read.ttl_ms, Some(rimthan_mcp::TTL_IMMUTABLE_MS));
    let templates = client.list_resource_templates(None).await.unwrap();
    assert_eq!(
        templates.cache_scope,
        Some(rmcp::model::CacheScope::Private)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_uris_get_the_revisions_resource_not_found_error() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let missing = "rimthan://registry/2026.12.5/workflows/nope/1.0.0/definition";
    for (client, code) in [
        (legacy_http_client(&http.url).await, -32002),
        (modern_http_client(&http.url).await, -32602),
    ] {
        let err = client
            .read_resource(ReadResourceRequestParams::new(missing))
            .await
            .unwrap_err();
        let rmcp::service::ServiceError::McpError(data) = err else {
            panic!("{err:?}")
        };
        assert_eq!(data.code.0, code);
        assert!(data.message.contains(missing), "{}", data.message);
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn release_pinned_uris_keep_resolving_after_the_channel_moves() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source");
    let key = SigningKey::generate().unwrap();
    for release in ["2027.01.0", "2027.02.0"] {
        publish(
            dir.path(),
            &build_release(&source, &release.parse().unwrap(), &key).unwrap(),
        )
        .unwrap();
    }
    set_channel(
        dir.path(),
        &"stable".parse().unwrap(),
        &"2027.01.0".parse().unwrap(),
    )
    .unwrap();
    let load = || {
        verify_registry(
            &RegistryFiles::from_dir(dir.path()).unwrap(),
            &external_policy(),
        )
        .unwrap()
    };
    let server = server_on(load(), Profile::WorkflowEngine).await;
    let client = duplex_client(server.clone()).await;
    let old = "rimthan://registry/2027.01.0/manifest";
    assert!(
        client
            .list_all_resources()
            .await
            .unwrap()
            .iter()
            .any(|r| r.uri == old)
    );

    set_channel(
        dir.path(),
        &"stable".parse().unwrap(),
        &"2027.02.0".parse().unwrap(),
    )
    .unwrap();
    server.engine().releases().replace(load());
    // Clients may cache the list for its ttlMs; a new connection sees the moved channel.
    client.cancel().await.unwrap();
    let client = duplex_client(server.clone()).await;
    let listed = client.list_all_resources().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|r| r.uri == "rimthan://registry/2027.02.0/manifest")
    );
    assert!(!listed.iter().any(|r| r.uri == old));
    let read = client
        .read_resource(ReadResourceRequestParams::new(old))
        .await
        .unwrap();
    assert!(text(&read.contents[0]).contains("\"release\":\"2027.01.0\""));
    client.cancel().await.unwrap();
}
