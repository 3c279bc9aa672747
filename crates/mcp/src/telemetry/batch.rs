//! The span queue between requests and the collector.
//!
//! A request that ends a span hands it to a bounded queue and goes on: it never waits for the
//! collector, and when the queue is full (the collector is slow or gone) the span is dropped
//! and counted. One thread drains the queue in batches, every [`Batching::delay`] or as soon as
//! a batch is full, and exports each batch once; a batch the collector refused or never
//! answered is dropped and counted too. The counts are on `/metrics`
//! (`rimthan_otlp_spans_dropped`), which is why this is not the SDK's batch processor: that one
//! drops on a full queue without a count anything can read.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, RecvTimeoutError, SyncSender, TrySendError},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use opentelemetry::Context;
use opentelemetry_sdk::{
    Resource,
    error::{OTelSdkError, OTelSdkResult},
    trace::{Span, SpanData, SpanExporter, SpanProcessor},
};

/// Spans dropped since start, whatever the reason: what `/metrics` shows.
pub(crate) static SPANS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// How spans are batched: the standard `OTEL_BSP_*` variables where set.
#[derive(Debug, Clone, Copy)]
pub(super) struct Batching {
    /// Most spans waiting (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048).
    pub(super) queue: usize,
    /// Most spans in one export (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512).
    pub(super) batch: usize,
    /// The longest a span waits for its batch (`OTEL_BSP_SCHEDULE_DELAY` in ms, 5000).
    pub(super) delay: Duration,
}

impl Batching {
    /// The defaults, overridden by the `OTEL_BSP_*` variables that hold a positive number.
    pub(super) fn from_env() -> Self {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&n| n > 0)
        };
        let queue = var("OTEL_BSP_MAX_QUEUE_SIZE").map_or(2048, |n| n as usize);
        Self {
            queue,
            batch: var("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").map_or(512, |n| (n as usize).min(queue)),
            delay: Duration::from_millis(var("OTEL_BSP_SCHEDULE_DELAY").unwrap_or(5000)),
        }
    }
}

enum Message {
    Span(Box<SpanData>),
    /// Export what waits, then answer.
    Flush(SyncSender<OTelSdkResult>),
    /// Export what waits, shut the exporter down, answer and stop.
    Shutdown(SyncSender<OTelSdkResult>),
}

/// A [`SpanProcessor`] that never blocks the span's ender and counts what it drops.
#[derive(Debug)]
pub(super) struct Batches {
    queue: SyncSender<Message>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The exporter until the worker takes it (the provider sets its resource first).
    exporter: Arc<Mutex<Option<Box<dyn Exported>>>>,
}

/// The exporter, boxed: what the worker needs of it.
trait Exported: Send + std::fmt::Debug {
    fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult;
    fn set_resource(&mut self, resource: &Resource);
    fn shutdown(&mut self) -> OTelSdkResult;
}

impl<E: SpanExporter + 'static> Exported for E {
    fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        futures::executor::block_on(SpanExporter::export(self, batch))
    }
    fn set_resource(&mut self, resource: &Resource) {
        SpanExporter::set_resource(self, resource);
    }
    fn shutdown(&mut self) -> OTelSdkResult {
        SpanExporter::shutdown(self)
    }
}

impl Batches {
    /// A processor exporting through `exporter` as `batching` says.
    pub(super) fn new<E: SpanExporter + 'static>(exporter: E, batching: Batching) -> Self {
        let (queue, received) = mpsc::sync_channel(batching.queue);
        let exporter: Arc<Mutex<Option<Box<dyn Exported>>>> =
            Arc::new(Mutex::new(Some(Box::new(exporter))));
        let taken = exporter.clone();
        let worker = std::thread::Builder::new()
            .name("rimthan-otlp".into())
            .spawn(move || drain(&received, &taken, batching))
            .ok();
        Self {
            queue,
            worker: Mutex::new(worker),
            exporter,
        }
    }

    fn ask(&self, message: impl FnOnce(SyncSender<OTelSdkResult>) -> Message) -> OTelSdkResult {
        let (answer, answered) = mpsc::sync_channel(1);
        self.queue
            .send(message(answer))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        answered
            .recv()
            .unwrap_or(Err(OTelSdkError::AlreadyShutdown))
    }
}

impl SpanProcessor for Batches {
    fn on_start(&self, _: &mut Span, _: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        match self.queue.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                SPANS_DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Message::Flush)
    }

    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        let result = self.ask(Message::Shutdown);
        if let Some(worker) = self
            .worker
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            let _ = worker.join();
        }
        result
    }

    fn set_resource(&mut self, resource: &Resource) {
        if let Some(exporter) = self
            .exporter
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            exporter.set_resource(resource);
        }
    }
}

/// The worker: batches what arrives and exports each batch once.
fn drain(
    received: &mpsc::Receiver<Message>,
    exporter: &Mutex<Option<Box<dyn Exported>>>,
    batching: Batching,
) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(batching.batch);
    let mut due = Instant::now() + batching.delay;
    let export = |batch: &mut Vec<SpanData>| -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let spans = std::mem::take(batch);
        let count = spans.len() as u64;
        let guard = exporter
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = match guard.as_ref() {
            Some(exporter) => exporter.export(spans),
            None => Err(OTelSdkError::AlreadyShutdown),
        };
        if result.is_err() {
            SPANS_DROPPED.fetch_add(count, Ordering::Relaxed);
        }
        result
    };
    loop {
        match received.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(Message::Span(span)) => {
                batch.push(*span);
                if batch.len() >= batching.batch {
                    let _ = export(&mut batch);
                    due = Instant::now() + batching.delay;
                }
            }
            Ok(Message::Flush(answer)) => {
                let _ = answer.send(export(&mut batch));
            }
            Ok(Message::Shutdown(answer)) => {
                let exported = export(&mut batch);
                let shut = exporter
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                    .map_or(Ok(()), |mut e| e.shutdown());
                let _ = answer.send(exported.and(shut));
                return;
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = export(&mut batch);
                due = Instant::now() + batching.delay;
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = export(&mut batch);
                return;
            }
        }
    }
}
