//! Watch streams (checklist E1–E14).
//!
//! A watch is a chunked HTTP/1.1 response of newline-delimited JSON events. Each watch runs as a
//! task that reads the resource's event log from its position, so replay from an old
//! resourceVersion and live delivery are the same code path, a slow reader only delays itself,
//! and a reader that falls behind the compaction point gets `410 Expired` as an in-stream ERROR
//! event, as kube-apiserver's watch cache does.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::params::{Format, ListOptions};
use super::{Body, ChannelBody, ServerState};
use crate::api::{ReadAt, field_of};
use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::store::{Event, EventType, HistoryError, ObjKey, Stored};

/// How many events one read of the log takes at most.
const BATCH: usize = 512;
/// Chunks buffered per watch before the task waits for the client.
const CHANNEL_DEPTH: usize = 16;

/// Start a watch: answer 200 with the headers at once, and stream events from a task.
pub(super) fn start(
    state: Arc<ServerState>,
    def: Arc<ResourceDef>,
    namespace: Option<String>,
    opts: ListOptions,
    format: Format,
    user: Option<&str>,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
    let token = state.stop.child_token();
    state.faults.register_watch(&def.plural, &def.qualified(), user, token.clone());
    tokio::spawn(async move {
        let mut w = Watcher { state, def, namespace, opts, format, tx, token, sent_headers: false };
        w.run().await;
    });
    let mut resp = Response::new(http_body_util::Either::Right(ChannelBody(rx)));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    resp
}

struct Watcher {
    state: Arc<ServerState>,
    def: Arc<ResourceDef>,
    namespace: Option<String>,
    opts: ListOptions,
    format: Format,
    tx: mpsc::Sender<Bytes>,
    token: CancellationToken,
    /// Table watches send column definitions with the first event only.
    sent_headers: bool,
}

/// Why a watch ended.
enum End {
    /// The client went away.
    Gone,
    /// The stream should end now (timeout, closed by a test, server stopping).
    Close,
}

impl Watcher {
    async fn run(&mut self) {
        let timeout = self.opts.timeout.unwrap_or_else(|| {
            // kube-apiserver: minRequestTimeout (1800 s) times [1, 2).
            Duration::from_secs(1800 + rand::random_range(0..1800u64))
        });
        let deadline = tokio::time::Instant::now() + timeout;
        let _ = tokio::time::timeout_at(deadline, self.stream()).await;
    }

    async fn stream(&mut self) -> Result<(), ()> {
        let api = self.state.api.clone();
        let storage = self.def.storage.clone();
        let requested: Option<u64> = self.opts.resource_version.as_deref().and_then(|s| s.parse().ok());
        let initial = match self.opts.send_initial_events {
            Some(v) => v,
            None => requested.is_none_or(|rv| rv == 0),
        };
        let mut last = if initial {
            // Synthetic ADDED events for the current state (E2, E8), then everything after it.
            let shard = self.opts.shard.clone();
            let in_shard =
                move |key: &ObjKey, s: &Stored| shard.as_ref().is_none_or(|sel| sel.matches(&s.meta.uid, &key.0));
            let list = match api.list_where(
                &self.def,
                self.namespace.as_deref(),
                &self.opts.labels,
                &self.opts.fields,
                &in_shard,
                ReadAt::Latest,
                None,
                None,
            ) {
                Ok(l) => l,
                Err(e) => return self.error_and_close(&e).await,
            };
            let mut chunk = BytesMut::new();
            for (_, item) in &list.items {
                self.encode_event(&mut chunk, EventType::Added, item);
                if chunk.len() > 64 * 1024 {
                    self.send(chunk.split().freeze()).await.map_err(|_| ())?;
                }
            }
            if self.opts.send_initial_events == Some(true)
                || (initial && self.opts.bookmarks && self.opts.send_initial_events.is_none())
            {
                self.encode_bookmark(&mut chunk, list.rv, true);
            }
            if !chunk.is_empty() {
                self.send(chunk.freeze()).await.map_err(|_| ())?;
            }
            list.rv
        } else {
            requested.unwrap_or(0)
        };
        let mut notify = match api.store.watch_from(&storage, last) {
            Ok(start) => start.notify,
            Err(HistoryError::Expired { oldest }) => {
                return self
                    .error_and_close(&ApiError::expired(format!("too old resource version: {last} ({oldest})")))
                    .await;
            }
            Err(HistoryError::TooLarge { .. }) => {
                // E13: wait briefly for the store to reach the requested RV.
                let mut reached = None;
                for _ in 0..30 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Ok(start) = api.store.watch_from(&storage, last) {
                        reached = Some(start.notify);
                        break;
                    }
                }
                match reached {
                    Some(n) => n,
                    None => {
                        let current = api.store.current_rv();
                        return self.error_and_close(&ApiError::too_large_rv(last, current)).await;
                    }
                }
            }
        };
        let mut registry_changes = api.registry.subscribe();
        let mut bookmark_timer = tokio::time::interval(self.state.config.bookmark_interval);
        bookmark_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        bookmark_timer.reset();
        loop {
            // Deliver everything in the log after `last`.
            loop {
                let events = match api.store.events_after(&storage, last, BATCH) {
                    Ok(e) => e,
                    Err(HistoryError::Expired { oldest }) | Err(HistoryError::TooLarge { current: oldest }) => {
                        return self
                            .error_and_close(&ApiError::expired(format!("too old resource version: {last} ({oldest})")))
                            .await;
                    }
                };
                if events.is_empty() {
                    break;
                }
                let mut chunk = BytesMut::new();
                for event in &events {
                    self.encode_change(&mut chunk, event);
                    last = event.rv;
                }
                if !chunk.is_empty() {
                    match self.send(chunk.freeze()).await {
                        Ok(()) => bookmark_timer.reset(),
                        Err(End::Gone | End::Close) => return Err(()),
                    }
                }
            }
            tokio::select! {
                _ = self.token.cancelled() => return Ok(()),
                changed = notify.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                _ = registry_changes.changed() => {
                    // E12: a watch of a resource that is no longer served ends.
                    match api.registry.get(&self.def.group, &self.def.version, &self.def.plural) {
                        Some(d) if d.storage == self.def.storage => self.def = d,
                        _ => return Ok(()),
                    }
                }
                _ = bookmark_timer.tick(), if self.opts.bookmarks => {
                    // Every change of this resource up to the global RV read before the log
                    // was checked has been delivered, so the bookmark may claim it.
                    let global = api.store.current_rv();
                    let pending = api.store.events_after(&storage, last, 1).map(|e| e.first().map(|e| e.rv)).unwrap_or(None);
                    let rv = match pending {
                        Some(next) => next.saturating_sub(1).max(last),
                        None => global.max(last),
                    };
                    let mut chunk = BytesMut::new();
                    self.encode_bookmark(&mut chunk, rv, false);
                    if self.send(chunk.freeze()).await.is_err() {
                        return Err(());
                    }
                    last = rv.max(last);
                }
            }
        }
    }

    async fn send(&mut self, chunk: Bytes) -> Result<(), End> {
        tokio::select! {
            _ = self.token.cancelled() => Err(End::Close),
            res = self.tx.send(chunk) => res.map_err(|_| End::Gone),
        }
    }

    async fn error_and_close(&mut self, e: &ApiError) -> Result<(), ()> {
        let mut chunk = BytesMut::new();
        let line = json!({"type": "ERROR", "object": e.to_status()});
        chunk.put_slice(line.to_string().as_bytes());
        chunk.put_u8(b'\n');
        let _ = self.send(chunk.freeze()).await;
        Ok(())
    }

    fn matches(&self, key: &ObjKey, stored: &Stored) -> bool {
        if let Some(ns) = &self.namespace
            && key.0 != *ns
        {
            return false;
        }
        self.opts.labels.matches(&stored.meta.labels)
            && self.opts.fields.matches(|f| field_of(&self.def, key, &stored.meta, f))
            && self.opts.shard.as_ref().is_none_or(|s| s.matches(&stored.meta.uid, &key.0))
    }

    /// One change, with selector transitions (E4): entering the selection is ADDED, leaving it
    /// is DELETED with the previous state and the change's RV.
    fn encode_change(&mut self, out: &mut BytesMut, event: &Event) {
        let now = self.matches(&event.key, &event.object);
        let before = event.prev.as_ref().is_some_and(|p| self.matches(&event.key, p));
        match event.kind {
            EventType::Added if now => self.encode_stored(out, EventType::Added, &event.object),
            EventType::Deleted if now => self.encode_stored(out, EventType::Deleted, &event.object),
            EventType::Modified => match (before, now) {
                (true, true) => self.encode_stored(out, EventType::Modified, &event.object),
                (false, true) => self.encode_stored(out, EventType::Added, &event.object),
                (true, false) => {
                    if let Some(prev) = &event.prev {
                        // The previous state, carrying the RV of the change that removed it.
                        let mut v = self.state.api.present_value(&self.def, prev);
                        if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                            md.insert("resourceVersion".into(), json!(event.rv.to_string()));
                        }
                        let bytes = Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
                        self.encode_event(out, EventType::Deleted, &bytes);
                    }
                }
                (false, false) => {}
            },
            _ => {}
        }
    }

    fn encode_stored(&mut self, out: &mut BytesMut, ty: EventType, stored: &Stored) {
        let bytes = self.state.api.present(&self.def, stored);
        self.encode_event(out, ty, &bytes);
    }

    fn encode_event(&mut self, out: &mut BytesMut, ty: EventType, object: &Bytes) {
        out.put_slice(b"{\"type\":\"");
        out.put_slice(ty.as_str().as_bytes());
        out.put_slice(b"\",\"object\":");
        match self.format {
            Format::Json => out.put_slice(object),
            Format::PartialMeta | Format::PartialMetaList => {
                let v: Value = serde_json::from_slice(object).unwrap_or(Value::Null);
                out.put_slice(crate::table::partial_object_metadata(&v).to_string().as_bytes());
            }
            Format::Table { include, .. } => {
                let v: Value = serde_json::from_slice(object).unwrap_or(Value::Null);
                let rv = v.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("").to_string();
                let (columns, rows) = self.state.table_rows(&self.def, vec![v], include);
                let table = super::table_version(
                    crate::table::table(&columns, rows, &rv, None, None, !self.sent_headers),
                    self.format,
                );
                self.sent_headers = true;
                out.put_slice(table.to_string().as_bytes());
            }
        }
        out.put_slice(b"}\n");
    }

    fn encode_bookmark(&mut self, out: &mut BytesMut, rv: u64, initial_events_end: bool) {
        let mut metadata = serde_json::Map::new();
        metadata.insert("resourceVersion".into(), json!(rv.to_string()));
        if initial_events_end {
            metadata.insert("annotations".into(), json!({"k8s.io/initial-events-end": "true"}));
        }
        let object = match self.format {
            Format::PartialMeta | Format::PartialMetaList => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
            }
            _ => json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": metadata}),
        };
        let line = json!({"type": "BOOKMARK", "object": object});
        out.put_slice(line.to_string().as_bytes());
        out.put_u8(b'\n');
    }
}
