//! The connection layer under the router: how long a client may take to send a request's head
//! and body, how long a keep-alive connection may sit idle, and how many connections are served
//! at once. `axum::serve` exposes none of these, so the daemon accepts and serves its
//! connections itself (HTTP/1.1 on hyper, the same stack axum uses).
//!
//! - **Head**: from the moment the server waits for a request — a new connection, or a
//!   keep-alive one after its last response — the whole head must arrive within
//!   `server.header_read_timeout_ms`, else the connection is closed. So a slow-header client
//!   and an idle keep-alive connection are both closed by that time.
//! - **Body**: the request's body must arrive within `server.body_read_timeout_ms` of its head;
//!   a slower body ends in an error answer and the connection is closed.
//! - **Answers**: a write that makes no progress for `server.write_timeout_ms` (the client
//!   stopped reading and the socket's buffers are full) closes the connection, so clients that
//!   pipeline requests and never read cannot hold every slot.
//! - **Connections**: at most `server.max_connections` at once; one more is closed as soon as it
//!   is accepted (counted in `toolgraph_connections_refused_total`), so a flood of idle sockets
//!   never holds the accept queue and the open idle ones go away by the head limit. Under
//!   pressure (a quarter of the slots or less free) a new connection gets the shorter
//!   `server.header_read_timeout_busy_ms` for its heads, so slots cycle and a health check gets
//!   one within about that time even while idle clients hold the rest.
//! - **Per client address**: at most `server.max_connections_per_peer` of them, so one client
//!   that re-opens every closed connection cannot hold every slot (issue 53). The operations
//!   listener ([`super::app::serve_operations`]) answers health whatever the main port suffers.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use hyper::body::Body as _;
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Semaphore;
use tower::ServiceExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The limits of the connection layer (from `[server]`).
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub header_read: Duration,
    /// The head limit of a connection accepted while a quarter of the slots or less are free.
    pub header_read_busy: Duration,
    pub body_read: Duration,
    /// How long a write of an answer may make no progress (the client does not read).
    pub write: Duration,
    pub max_connections: usize,
    /// Connections one client address may hold (at least 1).
    pub per_peer: usize,
}

impl ConnLimits {
    /// The configured limits; the connection cap lowered to the open-file limit less 64 (the
    /// stores, the state database and outgoing calls need descriptors too) when that is smaller.
    pub fn from_settings(s: &toolgraph_schema::settings::ServerSettings) -> Self {
        let mut max_connections = s.max_connections.max(1);
        if let Some(files) = open_file_limit() {
            let room = files.saturating_sub(64).max(16);
            if room < max_connections {
                tracing::warn!(
                    configured = max_connections,
                    open_file_limit = files,
                    serving = room,
                    "server.max_connections lowered to fit the open-file limit"
                );
                max_connections = room;
            }
        }
        ConnLimits {
            header_read: Duration::from_millis(s.header_read_timeout_ms.max(1)),
            header_read_busy: Duration::from_millis(
                s.header_read_timeout_busy_ms.clamp(1, s.header_read_timeout_ms.max(1)),
            ),
            body_read: Duration::from_millis(s.body_read_timeout_ms.max(1)),
            write: Duration::from_millis(s.write_timeout_ms.max(1)),
            max_connections,
            per_peer: match s.max_connections_per_peer {
                0 => max_connections,
                n => n.min(max_connections),
            },
        }
    }
}

/// How many connections each client address holds (an entry only while it holds one).
#[derive(Default)]
struct Peers(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

impl Peers {
    /// Count one more connection of `ip`, unless it holds `cap` already.
    fn admit(self: &Arc<Self>, ip: std::net::IpAddr, cap: usize) -> Option<PeerSlot> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot { peers: self.clone(), ip })
    }
}

/// One connection of a client address; given back when dropped.
struct PeerSlot {
    peers: Arc<Peers>,
    ip: std::net::IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.peers.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// The soft open-file limit of this process (Linux: `/proc/self/limits`), if it can be read.
fn open_file_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_file_limit(&text)
}

fn parse_open_file_limit(limits: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Serve `app` on `listener` until `shutdown` resolves; then stop accepting and wait for the open
/// connections to finish their requests (the caller bounds that wait). `refused` is called for
/// each connection closed because the limit was reached.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnLimits,
    refused: Arc<dyn Fn() + Send + Sync>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(Peers::default());
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let head = if slots.available_permits() <= limits.max_connections / 4 {
            limits.header_read_busy
        } else {
            limits.header_read
        };
        let Some(peer) = peers.admit(remote.ip(), limits.per_peer) else {
            refused();
            tracing::debug!(%remote, limit = limits.per_peer, "connection refused: at the limit of its address");
            drop(stream);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refused();
            tracing::debug!(%remote, limit = limits.max_connections, "connection refused: at the connection limit");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let body_read = limits.body_read;
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(remote));
            // Only a request with a body gets a deadline (no timer for a GET).
            let req = req.map(|body| {
                if body.is_end_stream() {
                    Body::new(body)
                } else {
                    Body::new(BodyDeadline::new(body, body_read))
                }
            });
            app.clone().oneshot(req)
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(head)
            .serve_connection(
                hyper_util::rt::TokioIo::new(WriteDeadline::new(CannedBodies::new(stream), limits.write)),
                service,
            );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%remote, error = %e, "connection closed with an error");
            }
            drop((slot, peer));
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection whose writes must make progress: a write (or flush) that stays pending for
/// `limit` — the client stopped reading and the socket's buffers are full — fails with
/// `TimedOut`, which closes the connection and frees its slot. Any progress starts the clock
/// again, so a slow reader that keeps reading is served to the end.
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> Self {
        WriteDeadline { inner, limit, stalled: None }
    }

    /// After a pending write: `Err` once the stall has lasted `limit` (the timer wakes the task).
    fn check_stall(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if timer.as_mut().poll(cx).is_ready() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing of the answer for {} ms", limit.as_millis()),
            ));
        }
        Ok(())
    }

    fn on_write<T>(&mut self, cx: &mut Context<'_>, polled: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        match polled {
            Poll::Pending => match self.check_stall(cx) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.on_write(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.on_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.on_write(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.on_write(cx, polled)
    }
}

/// hyper answers a request it cannot parse itself — a head too large (431), a target too long
/// (414), a malformed head (400) — with no body at all. This gives those answers the body every
/// other error has (`{message, code, type}`): the one write of such a head is replaced by the
/// same head with a JSON body, and reported to hyper as written whole.
struct CannedBodies<S> {
    inner: S,
    /// The replacement being written, how much of it is out, and the length hyper asked for.
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<S> CannedBodies<S> {
    fn new(inner: S) -> Self {
        CannedBodies { inner, pending: None }
    }
}

/// The replacement of `head` when it is one of hyper's bodiless parse-error answers.
fn canned_body(head: &[u8]) -> Option<Vec<u8>> {
    const EMPTY: &[u8] = b"\r\ncontent-length: 0\r\n";
    if head.len() > 1024 || !head.starts_with(b"HTTP/1.1 4") || !head.ends_with(b"\r\n\r\n") {
        return None;
    }
    let (code, message) = match &head[9..12] {
        b"400" => ("bad_request", "the request could not be read as HTTP/1.1"),
        b"414" => ("uri_too_long", "the request target is longer than the server reads"),
        b"431" => ("headers_too_large", "the request's headers are larger than the server reads"),
        _ => return None,
    };
    let at = head.windows(EMPTY.len()).position(|w| w.eq_ignore_ascii_case(EMPTY))?;
    let body = serde_json::json!({"message": message, "code": code, "type": "invalid_request_error"}).to_string();
    let mut out = head[..at].to_vec();
    out.extend_from_slice(
        format!("\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", body.len()).as_bytes(),
    );
    out.extend_from_slice(&head[at + EMPTY.len()..]);
    out.extend_from_slice(body.as_bytes());
    Some(out)
}

impl<S: tokio::io::AsyncWrite + Unpin> CannedBodies<S> {
    /// Write the pending replacement out; `Ready(Ok(n))` with the length hyper asked for once done.
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        while let Some((out, done, claimed)) = &mut self.pending {
            if *done == out.len() {
                let n = *claimed;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &out[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(0))
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for CannedBodies<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for CannedBodies<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.pending.is_none() {
            match canned_body(buf) {
                Some(out) => self.pending = Some((out, 0, buf.len())),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        self.drive(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let first = bufs.iter().find(|b| !b.is_empty());
        if self.pending.is_some() || first.is_some_and(|b| canned_body(b).is_some()) {
            return self.poll_write(cx, first.map_or(&[][..], |b| &b[..]));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.pending.is_some() {
            if let Poll::Ready(Err(e)) = self.drive(cx) {
                return Poll::Ready(Err(e));
            }
            if self.pending.is_some() {
                return Poll::Pending;
            }
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request body that must be received within a time limit of the request's head.
struct BodyDeadline<B> {
    inner: B,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl<B> BodyDeadline<B> {
    fn new(inner: B, limit: Duration) -> Self {
        BodyDeadline { inner, deadline: Box::pin(tokio::time::sleep(limit)), limit }
    }
}

impl<B> hyper::body::Body for BodyDeadline<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            let message = format!("the request body did not arrive within {} ms", this.limit.as_millis());
            return Poll::Ready(Some(Err(message.into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_bodiless_parse_error_answers_get_a_json_body() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = String::from_utf8(canned_body(head).unwrap()).unwrap();
        let (h, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(h.starts_with("HTTP/1.1 431 ") && h.contains("content-type: application/json"), "{h}");
        assert!(h.contains(&format!("content-length: {}", body.len())), "{h}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(body).unwrap()["code"], "headers_too_large");
        // An answer with a body of its own, or another status, is left as it is.
        assert!(canned_body(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n").is_none());
        assert!(canned_body(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").is_none());
    }

    #[test]
    fn the_soft_open_file_limit_is_read_from_proc_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max cpu time              unlimited            unlimited            seconds   \n\
                    Max open files            256                  524288               files     \n";
        assert_eq!(parse_open_file_limit(text), Some(256));
        assert_eq!(parse_open_file_limit("Max open files            unlimited  unlimited files"), None);
        assert_eq!(parse_open_file_limit("nothing here"), None);
    }

    #[test]
    fn the_connection_cap_fits_the_open_file_limit() {
        let mut s = toolgraph_schema::settings::ServerSettings { max_connections: usize::MAX, ..Default::default() };
        let limits = ConnLimits::from_settings(&s);
        if let Some(files) = open_file_limit() {
            assert_eq!(limits.max_connections, files.saturating_sub(64).max(16));
        }
        s.max_connections = 3;
        assert_eq!(ConnLimits::from_settings(&s).max_connections, 3);
    }
}
