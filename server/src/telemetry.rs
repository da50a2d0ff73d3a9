//! Logs and traces. Log lines go to standard error (`TOOLGRAPH_LOG` filter); a run's lines carry
//! its `run_id` (the `run` span), a tool call's its API (`tool_call`). With
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set (e.g. `http://collector:4318`), the same spans are exported
//! over OTLP/HTTP (protobuf, batched on a background thread; the standard `OTEL_*` variables —
//! headers, timeout, batch delay — apply); without it nothing is exported.

use opentelemetry::trace::TracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Keeps the exporter alive; dropping it flushes the spans not yet sent.
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Send what is buffered and stop exporting.
    pub fn shutdown(&mut self) {
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                eprintln!("OpenTelemetry: flushing spans failed: {e}");
            }
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Install the global subscriber: `filter` (an `EnvFilter` directive), log lines to `writer`, and
/// the OTLP exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. A second call changes nothing.
pub fn init<W>(filter: &str, writer: W) -> Telemetry
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let env = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "info".into());
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(false);
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|e| !e.trim().is_empty());
    let provider = endpoint.and_then(|_| match opentelemetry_otlp::SpanExporter::builder().with_http().build() {
        Ok(exporter) => {
            let resource = opentelemetry_sdk::Resource::builder().with_service_name("toolgraph").build();
            Some(
                opentelemetry_sdk::trace::SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource)
                    .build(),
            )
        }
        Err(e) => {
            eprintln!("OpenTelemetry: no exporter ({e}); spans are not exported");
            None
        }
    });
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("toolgraph")));
    let _ = tracing_subscriber::registry().with(env).with(fmt).with(otel).try_init();
    Telemetry { provider }
}
