//! Bad input: malformed requests get clear error responses; a client that
//! disconnects mid-stream takes its receiver with it; a flood of connects and
//! disconnects leaves the server serving, and the clients still connected
//! lose nothing.

mod support;

use futures_util::future::join_all;
use std::net::SocketAddr;
use support::sse::{read_until, read_until_drained, snapshot_map, Client, Link, Tally};
use support::{block_on, request, Server, HANG_GUARD};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Writes `bytes` on a fresh connection and reads the answer until the server
/// closes (bounded by the hang guard): the raw response.
async fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(HANG_GUARD, tcp.read_to_end(&mut out)).await;
    assert!(
        read.is_ok(),
        "hung: the server had not closed {HANG_GUARD:?} after {:?}; it had answered {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(80)]),
        String::from_utf8_lossy(&out)
    );
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn malformed_requests_get_clear_errors() {
    block_on(async {
        let server = Server::start(&["--keys", "16", "--rate", "20000", "--max-connections", "3"]);
        let addr = server.addr;

        let garbage = raw(addr, b"\x16\x03\x01 this is not HTTP\r\n\r\n").await;
        assert!(garbage.starts_with("HTTP/1.1 400"), "{garbage:?}");
        let head = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(40_000)
        );
        let big = raw(addr, head.as_bytes()).await;
        assert!(
            big.starts_with("HTTP/1.1 431"),
            "an oversized head: {big:?}"
        );

        let cases: [(&str, &str, u16, &str); 7] = [
            ("GET", "/events?pace_ms=abc", 400, "pace_ms: invalid digit"),
            (
                "GET",
                "/events?pace_ms=1",
                400,
                "pace_ms must be between 20 and 60000, got 1",
            ),
            (
                "GET",
                "/events?pace_ms=99999999999999999999",
                400,
                "pace_ms",
            ),
            ("GET", "/events?color=red", 400, "unknown field `color`"),
            (
                "GET",
                &format!("/events?prefix={}", "p".repeat(65)),
                400,
                "prefix is 65 bytes",
            ),
            ("GET", "/nowhere", 404, "not found: /nowhere"),
            ("POST", "/workload/stop", 404, "needs the --allow-stop flag"),
        ];
        for (method, path, status, message) in cases {
            let (got, body) = request(addr, method, path).await;
            assert_eq!(got, status, "{method} {path}: {body}");
            assert!(
                body.contains(message),
                "{method} {path}: {body:?} lacks {message:?}"
            );
        }
        let (status, _) = request(addr, "POST", "/stats").await;
        assert_eq!(status, 405, "POST /stats");

        // Past --max-connections: 503, with the reason.
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(Client::connect(addr, "/events", Link::Fast).await);
        }
        let (status, body) = request(addr, "GET", "/events").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("at most 3"), "{body:?}");
        drop(held);
        // A connection leaves the hub, then the list: wait for both, or the
        // next one could still find the list full.
        server
            .wait_for("the held streams to close", |s| {
                s["hub"]["receivers"] == 0 && s["connections"].as_array().unwrap().is_empty()
            })
            .await;

        // And it still serves, the page included.
        let (status, page) = server.get("/").await;
        assert_eq!(status, 200);
        assert!(page.contains("<script src=\"/app.js\">"), "{page}");
        let (status, js) = server.get("/app.js").await;
        assert_eq!(status, 200);
        assert!(
            js.contains("new EventSource"),
            "the script opens the stream"
        );
        let mut client = Client::connect(addr, "/events?prefix=cpu.", Link::Fast).await;
        let mut tally = Tally::default();
        read_until(&mut client, &mut tally, "the first batch", |t| {
            t.batches > 0
        })
        .await;
        assert_eq!(
            tally.table.len(),
            4,
            "the cpu.* quarter of 16 metrics: {:?}",
            tally.table
        );
        assert!(tally.table.keys().all(|k| k.starts_with("cpu.")));
    });
}

#[test]
fn a_client_gone_mid_stream_takes_its_receiver_with_it() {
    block_on(async {
        let server = Server::start(&["--keys", "64", "--rate", "200000", "--allow-stop"]);
        let mut clients = Vec::new();
        for _ in 0..10 {
            clients.push(Client::connect(server.addr, "/events", Link::Fast).await);
        }
        server
            .wait_for("10 receivers", |s| s["hub"]["receivers"] == 10)
            .await;
        let mut tallies = vec![Tally::default(); 10];
        for (client, tally) in clients.iter_mut().zip(&mut tallies) {
            read_until(client, tally, "hello and two batches", |t| t.batches >= 2).await;
        }
        // Half of them hang up mid-stream, with data in flight.
        let stay = clients.split_off(5);
        drop(clients);
        // The receiver is closed, then the connection unlisted: wait for both.
        server
            .wait_for("5 receivers, 5 connections", |s| {
                s["hub"]["receivers"] == 5 && s["connections"].as_array().unwrap().len() == 5
            })
            .await;

        // The others lose nothing.
        server.stop_workload().await;
        let snapshot = snapshot_map(&server.get_json("/snapshot").await);
        for (i, (mut client, mut tally)) in stay.into_iter().zip(tallies.split_off(5)).enumerate() {
            read_until_drained(&mut client, &mut tally).await;
            tally.check(&format!("staying client {i}"), &snapshot);
        }
    });
}

#[test]
fn a_flood_of_connects_and_disconnects_loses_nothing_for_the_rest() {
    block_on(async {
        let server = Server::start(&["--keys", "64", "--rate", "200000", "--allow-stop"]);
        let addr = server.addr;
        let steady: Vec<_> = (0..5)
            .map(|_| {
                tokio::spawn(async move {
                    let mut client = Client::connect(addr, "/events", Link::Fast).await;
                    let mut tally = Tally::default();
                    read_until_drained(&mut client, &mut tally).await;
                    (client, tally)
                })
            })
            .collect();
        server
            .wait_for("5 steady receivers", |s| {
                s["hub"]["receivers"].as_u64() >= Some(5)
            })
            .await;

        // 300 short visits, 20 at a time, three kinds: read the snapshot and
        // leave; hang up right after the request; send half a request and go.
        const WORKERS: usize = 20;
        const VISITS: usize = 15;
        let flood = (0..WORKERS).map(|w| {
            tokio::spawn(async move {
                for v in 0..VISITS {
                    match (w + v) % 3 {
                        0 => {
                            let mut c = Client::connect(addr, "/events", Link::Fast).await;
                            let mut t = Tally::default();
                            read_until(&mut c, &mut t, "a visitor's first batch", |t| {
                                t.batches > 0
                            })
                            .await;
                            assert_eq!(t.first_batch, 64, "a visitor is born with the table");
                        }
                        1 => {
                            let mut tcp = TcpStream::connect(addr).await.unwrap();
                            tcp.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
                                .await
                                .unwrap();
                        }
                        _ => {
                            let mut tcp = TcpStream::connect(addr).await.unwrap();
                            tcp.write_all(b"GET /events HTT").await.unwrap();
                        }
                    }
                }
            })
        });
        for r in join_all(flood).await {
            r.expect("a flood worker");
        }
        let stats = server
            .wait_for("the visitors' receivers to leave", |s| {
                s["hub"]["receivers"] == 5 && s["connections"].as_array().unwrap().len() == 5
            })
            .await;
        let opened = stats["connections_opened"].as_u64().unwrap();
        assert!(
            opened >= 5 + 100,
            "at least the reading visitors were served: {opened}"
        );

        server.stop_workload().await;
        let snapshot = snapshot_map(&server.get_json("/snapshot").await);
        for (i, r) in join_all(steady).await.into_iter().enumerate() {
            let (_client, tally) = r.expect("a steady client");
            tally.check(&format!("steady client {i}"), &snapshot);
        }
        println!("flood: {opened} connections opened, 5 steady clients exact");
    });
}
