//! The accept loop: hyper's HTTP/1 server driven directly (as `axum::serve`
//! does inside), so that each connection's buffering can be bounded.
//!
//! Why bound it: a client on a slow link must make its stream wait, so that
//! its receiver coalesces. Between the stream and that client sit hyper's
//! write buffer (about 400 KB by default) and the kernel's send buffer (grown
//! by Linux up to `net.ipv4.tcp_wmem`'s maximum, 4 MiB by default): tens to
//! hundreds of 7 KB batches, each stale before it is read, and memory per
//! connection that does not depend on the key set. Held to 16 KiB and 16 KiB
//! (which the kernel doubles), a slow client's pipe is full after a few
//! batches; from then on its stream is polled only as the client reads, and
//! each batch it gets carries the latest value of everything that changed.

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

use crate::app::{router, App};

/// hyper's buffer per connection (its minimum is 8 KiB); also the largest
/// request head accepted.
pub const WRITE_BUFFER: usize = 16 * 1024;
/// The kernel's send buffer per connection.
pub const SEND_BUFFER: usize = 16 * 1024;
/// A client that has not sent its request head by then is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, app: Arc<App>) -> std::io::Result<()> {
    let router = router(app);
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _peer)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like pass: keep serving the
                // connections there are, and retry shortly.
                eprintln!("keybus-dashboard: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Best effort: a socket that refuses keeps the kernel's defaults.
        let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(SEND_BUFFER);
        // One batch is one write; do not hold it back waiting for an ack.
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .max_buf_size(WRITE_BUFFER)
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            // A client that vanishes or sends garbage ends its own
            // connection; hyper has answered what it could (400 and so on).
            let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}
