//! Broadcast ↔ stream against a real server: every revision or an exact gap,
//! the local reading contract, generations, bad input.

use crate::server::Server;
use crate::support::{connect, within};
use keybus::broadcast::{Buffer, Cursor};
use keybus::ReadError;
use keybus_nats::codec::{CodecError, DisplayValues, Utf8, ValueCodec};
use keybus_nats::{
    RemoteBuffer, RemoteReadError, StreamMirror, GENERATION_HEADER, REVISION_HEADER,
};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// What revision `r` carries, so a duplicated or shifted message shows.
pub fn value_of(r: u64) -> u64 {
    r * 1_000 + 7
}

/// Reads `reader` up to revision `to`, asserting every entry is the one after
/// the cursor (with its value) and every gap names the cursor exactly;
/// returns the gaps.
pub async fn read_to(
    reader: &mut keybus_nats::RemoteReader<u64, DisplayValues>,
    to: u64,
) -> Vec<(u64, u64)> {
    let mut gaps = Vec::new();
    let generation = reader.cursor().generation();
    while reader.cursor().revision() < to {
        let before = reader.cursor().revision();
        match within("the next revision", LIMIT, reader.next()).await {
            Ok(e) => {
                assert_eq!(e.revision, before + 1, "in order, none skipped");
                assert_eq!(e.value, value_of(e.revision), "revision {}", e.revision);
            }
            Err(RemoteReadError::Read(ReadError::Gap { after, oldest })) => {
                assert_eq!(after, before, "a gap names the cursor");
                assert!(oldest > after + 1);
                assert_eq!(reader.cursor(), Cursor::new(generation, oldest - 1));
                gaps.push((after, oldest));
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    gaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_revision_in_order_or_an_exact_gap() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let buf: Buffer<u64> = Buffer::new(64);
    let mirror = StreamMirror::new(&buf, js.clone(), "RING", DisplayValues)
        .subject("ring.values")
        .unwrap()
        .spawn();
    within("the stream", LIMIT, mirror.settled()).await;
    let remote = RemoteBuffer::open(&js, "RING", DisplayValues)
        .await
        .unwrap();
    let at = |revision| remote.cursor_at(revision);
    let mut live = remote.reader_at(at(0));
    let follower = tokio::spawn(async move {
        let gaps = read_to(&mut live, 200).await;
        (gaps, live.cursor())
    });
    for r in 1..=200 {
        assert_eq!(buf.append(value_of(r)).unwrap(), r);
        if r % 16 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let stats = within("settling", LIMIT, mirror.settled()).await;
    assert_eq!((stats.cursor, stats.published, stats.gaps), (200, 200, 0));
    let (_gaps, cursor) = within("the follower", LIMIT, follower).await.unwrap();
    assert_eq!(cursor, Cursor::new(remote.generation(), 200));

    // The local contract, remotely: retained 137..=200.
    assert_eq!(remote.tail().await.unwrap(), 200);
    assert_eq!(remote.cursor().await.unwrap(), at(200));
    assert_eq!(remote.read(at(136), 1000).await.unwrap().len(), 64);
    assert_eq!(
        remote.read(at(135), 10).await,
        Err(RemoteReadError::Read(ReadError::Gap {
            after: 135,
            oldest: 137
        }))
    );
    assert_eq!(remote.validate(at(136)).await, Ok(()));
    assert_eq!(
        remote.read(at(200), 10).await,
        Err(RemoteReadError::Read(ReadError::Empty))
    );
    assert_eq!(
        remote.read(at(201), 10).await,
        Err(RemoteReadError::Read(ReadError::Future {
            after: 201,
            tail: 200
        }))
    );
    // A cursor saved as text reads the same page.
    let saved: Cursor = at(150).to_string().parse().unwrap();
    let page = remote.read(saved, 3).await.unwrap();
    assert_eq!(
        page.iter().map(|e| e.revision).collect::<Vec<_>>(),
        [151, 152, 153]
    );
    let latest = remote.latest().await.unwrap().unwrap();
    assert_eq!((latest.revision, latest.value), (200, value_of(200)));
    let mut late = remote.reader_at(at(100));
    assert_eq!(
        late.try_next().await,
        Err(RemoteReadError::Read(ReadError::Gap {
            after: 100,
            oldest: 137
        }))
    );
    assert_eq!(late.try_next().await.unwrap().revision, 137);

    // A cursor of another generation (here the local buffer's) is foreign to
    // the stream, whatever its revision; a reader made with one stays put.
    let foreign = RemoteReadError::Read(ReadError::Foreign {
        expected: remote.generation(),
        found: buf.generation(),
    });
    let local = buf.cursor_at(150);
    assert_eq!(remote.read(local, 10).await, Err(foreign.clone()));
    assert_eq!(remote.validate(local).await, Err(foreign.clone()));
    let mut lost = remote.reader_at(local);
    assert_eq!(lost.try_next().await, Err(foreign));
    assert_eq!(lost.cursor(), local);

    // Headers name the revision and the buffer's generation.
    let stream = js.get_stream("RING").await.unwrap();
    let m = stream.get_raw_message(150).await.unwrap();
    assert_eq!(m.headers.get(REVISION_HEADER).unwrap().as_str(), "150");
    assert_eq!(
        m.headers.get(GENERATION_HEADER).unwrap().as_str(),
        buf.generation().to_string()
    );
    assert_eq!(stream.cached_info().config.max_messages, 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_stream_is_a_new_generation() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let buf: Buffer<u64> = Buffer::new(8);
    let mirror = StreamMirror::new(&buf, js.clone(), "GEN", DisplayValues).spawn();
    for r in 1..=5 {
        buf.append(value_of(r)).unwrap();
    }
    within("settling", LIMIT, mirror.settled()).await;
    let remote = RemoteBuffer::open(&js, "GEN", DisplayValues).await.unwrap();
    let g1 = remote.generation();
    let mut reader = remote.reader_at(remote.cursor_at(0));
    assert_eq!(read_to(&mut reader, 5).await, []);
    let old = reader.cursor();

    // Deleted under the mirror: the next append makes it create the stream
    // again, with what the buffer still holds (revisions 4..=12).
    js.delete_stream("GEN").await.unwrap();
    for r in 6..=12 {
        buf.append(value_of(r)).unwrap();
    }
    let stats = within("settling", LIMIT, mirror.settled()).await;
    assert_eq!(stats.recreated, 1, "{stats:?}");
    assert_eq!(stats.gaps, 1); // the new stream starts at the oldest retained
    match reader.next().await {
        Err(RemoteReadError::Generation { expected, found }) => {
            assert_eq!(expected, g1);
            assert_ne!(found, g1);
            assert_eq!(reader.cursor(), Cursor::new(found, 0));
        }
        other => panic!("expected a generation change, got {other:?}"),
    }
    assert_eq!(read_to(&mut reader, 12).await, [(0, 5)]);
    assert!(matches!(
        remote.tail().await,
        Err(RemoteReadError::Generation { .. })
    ));
    // A cursor of the old stream is foreign to a handle of the new one.
    let reopened: RemoteBuffer<u64, _> =
        RemoteBuffer::open(&js, "GEN", DisplayValues).await.unwrap();
    assert_eq!(
        reopened.read(old, 10).await,
        Err(RemoteReadError::Read(ReadError::Foreign {
            expected: reopened.generation(),
            found: g1
        }))
    );

    // A new buffer (a restarted producer) under the same name: a new stream.
    drop(mirror);
    let buf2: Buffer<u64> = Buffer::new(8);
    buf2.append(value_of(1)).unwrap();
    let mirror2 = StreamMirror::new(&buf2, js.clone(), "GEN", DisplayValues).spawn();
    within("settling", LIMIT, mirror2.settled()).await;
    let remote2: RemoteBuffer<u64, _> =
        RemoteBuffer::open(&js, "GEN", DisplayValues).await.unwrap();
    assert_ne!(remote2.generation(), reader.cursor().generation());
    assert_eq!(remote2.tail().await.unwrap(), 1);
}

/// Refuses one value.
struct NoSevens;

impl ValueCodec<String> for NoSevens {
    fn encode_value(&self, v: &String) -> Result<bytes::Bytes, CodecError> {
        if v == "7" {
            return Err(CodecError::Encode("no sevens".into()));
        }
        Utf8.encode_value(v)
    }
    fn decode_value(&self, b: &[u8]) -> Result<String, CodecError> {
        let s = Utf8.decode_value(b)?;
        if s == "undecodable" {
            return Err(CodecError::Decode("the test codec refuses this".into()));
        }
        Ok(s)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_keep_their_revision_and_are_reported_once() {
    let server = Server::start_with("max_payload: 4096");
    let js = connect(&server.url()).await;
    let buf: Buffer<String> = Buffer::new(32);
    let mirror = StreamMirror::new(&buf, js.clone(), "BAD", NoSevens).spawn();
    buf.append("1".into()).unwrap();
    buf.append("7".into()).unwrap(); // unencodable
    buf.append("x".repeat(10_000)).unwrap(); // over max_payload
    buf.append("undecodable".into()).unwrap();
    buf.append("5".into()).unwrap();
    let stats = within("settling", LIMIT, mirror.settled()).await;
    assert_eq!((stats.cursor, stats.placeholders), (5, 2), "{stats:?}");

    let remote = RemoteBuffer::open(&js, "BAD", NoSevens).await.unwrap();
    let mut reader = remote.reader_at(remote.cursor_at(0));
    assert_eq!(reader.next().await.unwrap().value, "1");
    for bad in 2..=4 {
        match reader.next().await {
            Err(RemoteReadError::Decode { revision, error }) => {
                assert_eq!(revision, bad);
                assert!(!error.to_string().is_empty());
            }
            other => panic!("revision {bad}: expected a decode error, got {other:?}"),
        }
        assert_eq!(reader.cursor(), remote.cursor_at(bad));
    }
    let last = reader.next().await.unwrap();
    assert_eq!((last.revision, last.value.as_str()), (5, "5"));
    // A page stops before a bad entry; the next read reports it.
    assert_eq!(remote.read(remote.cursor_at(0), 10).await.unwrap().len(), 1);
}
