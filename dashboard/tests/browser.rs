//! The page in a real browser: headless Chromium (Debian's) through
//! chromedriver, against the server on 127.0.0.1.
//!
//! Fails, never skips, when the browser is missing, naming
//! `.ci/provision-chromium`. With `KEYBUS_DASHBOARD_SCREENSHOT=path` the
//! screenshot is also written there (the README's picture is made so).

mod support;

use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use support::sse::snapshot_map;
use support::webdriver::Browser;
use support::{block_on, Server};

const KEYS: usize = 120;

/// The page's table as `{name: value}`, from its own state.
const TABLE: &str =
    "const t = {}; for (const [k, m] of window.keybusDashboard.metrics) t[k] = m.value; return t;";

fn table(v: &Value) -> BTreeMap<String, f64> {
    snapshot_map(v)
}

/// How many batches the current page has had.
async fn batch_count(browser: &Browser) -> u64 {
    browser
        .eval("return window.keybusDashboard.batches")
        .await
        .as_u64()
        .unwrap()
}

/// Waits (as `what`) until the current page has had `n` batches.
async fn wait_for_batches(browser: &Browser, what: &str, n: u64) {
    let script = format!("return window.keybusDashboard.batches >= {n}");
    browser.wait_for(what, &script).await;
}

/// Opens `url` in a new tab and waits (as `what`) for its first `n` batches.
async fn open_tab(browser: &Browser, url: &str, what: &str, n: u64) {
    browser.new_tab().await;
    browser.goto(url).await;
    wait_for_batches(browser, what, n).await;
}

#[test]
fn the_page_in_headless_chromium() {
    // Before anything starts: a missing browser is a failure with a remedy.
    support::webdriver::chromium();
    support::webdriver::chromedriver();
    block_on(async {
        let server = Server::start(&[
            "--keys",
            &KEYS.to_string(),
            "--rate",
            "2000000",
            "--allow-stop",
        ]);
        let browser = Browser::start().await;

        // The first page: every metric, sorted by name, from its first batch.
        browser.goto(&server.url("/")).await;
        let first = browser.tab().await;
        browser
            .wait_for(
                "the whole table",
                &format!("return window.keybusDashboard.metrics.size === {KEYS}"),
            )
            .await;
        let first_batch = browser
            .eval("return window.keybusDashboard.firstBatchEvents")
            .await;
        assert_eq!(
            first_batch, KEYS,
            "the page's first batch is the whole table"
        );
        let rows = browser
            .eval("return [...document.querySelectorAll('#metrics tbody tr')].map(r => r.cells[0].textContent)")
            .await;
        let rows: Vec<String> = serde_json::from_value(rows).unwrap();
        assert_eq!(rows.len(), KEYS, "one row per metric");
        let mut sorted = rows.clone();
        sorted.sort();
        assert_eq!(rows, sorted, "rows sorted by name");
        let snapshot = snapshot_map(&server.get_json("/snapshot").await);
        assert_eq!(
            rows,
            snapshot.keys().cloned().collect::<Vec<_>>(),
            "every metric of the table"
        );

        // Values change over time, in the DOM: waited for (a state), not
        // asserted after some number of batches (how many sends a batch holds
        // depends on the machine's speed).
        browser
            .eval("const cells = () => Object.fromEntries([...document.querySelectorAll('#metrics tbody tr')].map(r => [r.dataset.key, r.cells[1].textContent])); window.keybusTest = {cells, before: cells()}; return null")
            .await;
        browser
            .wait_for(
                "a value changing in the table",
                "const t = window.keybusTest, now = t.cells(); return Object.keys(t.before).length > 0 && Object.entries(t.before).some(([k, v]) => now[k] !== v)",
            )
            .await;

        // Plots of the hot metrics, and the accounting lines all green.
        browser
            .wait_for("8 plots with a line", "return [...document.querySelectorAll('#hot polyline')].filter(p => p.getAttribute('points').split(' ').length > 5).length === 8")
            .await;
        let lines = browser
            .eval("return ['status','summary','conservation','all'].map(id => document.getElementById(id).textContent)")
            .await;
        let lines: Vec<String> = serde_json::from_value(lines).unwrap();
        for line in &lines {
            assert!(!line.contains('✗'), "a failed check on the page: {line}");
        }
        assert!(
            lines[2].contains("received") && lines[2].contains('✓'),
            "{}",
            lines[2]
        );
        assert!(lines[1].contains("skipped by coalescing"), "{}", lines[1]);

        // The screenshot: taken once the plots have some history, checked to
        // be a rendered page, kept.
        let batches = batch_count(&browser).await;
        wait_for_batches(&browser, "40 batches", batches.max(40)).await;
        let png = browser.screenshot().await;
        check_not_blank(&png);
        let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
        std::fs::write(&keep, &png).unwrap();
        if let Some(path) = std::env::var_os("KEYBUS_DASHBOARD_SCREENSHOT") {
            std::fs::write(&path, &png).unwrap();
        }
        println!("screenshot: {} ({} bytes)", keep.display(), png.len());

        // A slow page (one batch per 2 s) in a second tab; the first is now a
        // background tab and keeps receiving.
        open_tab(&browser, &server.url("/?pace_ms=2000"), "3 slow batches", 3).await;
        let slow = browser
            .eval("return [document.getElementById('summary').textContent, document.getElementById('status').textContent]")
            .await;
        println!("slow page (pace 2000 ms): {}\n  {}", slow[0], slow[1]);
        browser.switch_to(&first).await;
        let fast = browser
            .eval("return document.getElementById('summary').textContent")
            .await;
        println!("first page (pace 100 ms), meanwhile a background tab: {fast}");

        // Stop the producers: the first page ends with the hub's table.
        server.stop_workload().await;
        browser
            .wait_for(
                "the final batch",
                "const s = window.keybusDashboard; return !s.producing && s.rx.pending_sends === 0",
            )
            .await;
        let snapshot = snapshot_map(&server.get_json("/snapshot").await);
        let page_one = table(&browser.eval(TABLE).await);
        assert_eq!(
            page_one, snapshot,
            "the first page shows the hub's state table"
        );

        // A page opened later is born with that table, all in its first batch.
        open_tab(&browser, &server.url("/"), "a first batch", 1).await;
        assert_eq!(
            browser
                .eval("return window.keybusDashboard.firstBatchEvents")
                .await,
            KEYS
        );
        let late = table(&browser.eval(TABLE).await);
        assert_eq!(late, page_one, "the late page shows the same table at once");
        let tally = browser
            .eval("const s = window.keybusDashboard; return [s.sends, s.rx.folded, s.rx.received]")
            .await;
        assert_eq!(
            tally[0], tally[1],
            "the late page's tally is its receiver's folded: {tally}"
        );

        // Three pages open: three receivers, all conserved.
        let stats = server.stats().await;
        assert_eq!(stats["hub"]["receivers"], 3, "{stats}");
        assert_eq!(stats["conserved"], 3, "{stats}");
    });
}

/// A rendered page, not a blank or single-colour image: many colours, and
/// a good share of pixels that differ from the background.
fn check_not_blank(png: &[u8]) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    assert!(
        info.width >= 800 && info.height >= 600,
        "{}x{}",
        info.width,
        info.height
    );
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for p in &pixels {
        *counts.entry(p).or_default() += 1;
    }
    let background = counts.values().max().copied().unwrap_or(0);
    let colours: HashSet<&&[u8]> = counts.keys().collect();
    let other = 1.0 - background as f64 / pixels.len() as f64;
    assert!(
        colours.len() >= 50,
        "only {} colours: a blank page?",
        colours.len()
    );
    assert!(
        other > 0.05,
        "{:.1}% of pixels differ from the background",
        other * 100.0
    );
}
