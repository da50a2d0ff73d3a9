//! `scripts/falkordb.sh start` reports a server as started only when the server answering on the
//! port is the one it launched.

use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// Another server takes the port between the script's first look and its server's bind: the
/// script's redis-server aborts (after writing its pid file), and the other one answers `PING`.
/// Reported as started, two users would share one server and the first to stop it would stop it
/// under the other.
#[test]
fn a_start_that_lost_its_port_to_another_server_fails() {
    let assets =
        std::env::var("TOOLGRAPH_ASSETS").map(std::path::PathBuf::from).unwrap_or_else(|_| root().join(".assets"));
    assert!(assets.join("falkordb/redis-server").exists(), "run scripts/setup.sh");
    // A stand-in for the other server (a test double, not FalkorDB): it refuses the first PING
    // (the script's "already answering?" look), then answers PING and INFO as a server of
    // another process would.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = other.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (n, conn) in other.incoming().enumerate() {
            let Ok(mut conn) = conn else { continue };
            conn.set_read_timeout(Some(Duration::from_secs(2))).ok();
            let mut buf = [0u8; 256];
            let got = conn.read(&mut buf).unwrap_or(0);
            let asked = String::from_utf8_lossy(&buf[..got]).to_string();
            let reply = if n == 0 {
                "-ERR not yet\r\n".to_string() // the first look finds nothing answering PONG
            } else if asked.contains("INFO") {
                let body = "# Server\r\nprocess_id:1\r\n";
                format!("${}\r\n{body}\r\n", body.len())
            } else {
                "+PONG\r\n".to_string()
            };
            let _ = conn.write_all(reply.as_bytes());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out = falkordb_script("start", port, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "reported started on another server's port: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("did not start") && stderr.contains("Address already in use"), "{stderr}");
    assert!(!dir.path().join("redis.pid").exists(), "the aborted server's pid file stays behind");
}
