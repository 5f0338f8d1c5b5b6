#[macro_use]
#[path = "../benches/support/conflate_scenarios.rs"]
mod scenarios;
use scenarios::*;
conflate_scenarios!(k, keybus::conflate);
conflate_scenarios!(b, keybus::baseline::conflate);
fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (s, r, keys, which) = (a[0], a[1], a[2], a[3]);
    let n = 2_000_000;
    for _ in 0..3 {
        let t = if which == 0 {
            k::fan_out(s, r, keys, n)
        } else {
            b::fan_out(s, r, keys, n)
        };
        println!(
            "{} {s}x{r} keys {keys}: {:.1} ns/send",
            if which == 0 { "keybus" } else { "baseline" },
            t.as_nanos() as f64 / n as f64
        );
    }
}
