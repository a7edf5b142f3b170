//! The recall monitor against held-out queries on a built index: runs the monitor's
//! measurement (`trawl::kinds::graph::monitor::measure`, the index's own vectors searched as queries,
//! each one's own node hidden) and searches the held-out queries at the same settings (beam
//! width 4, the monitor's list sizes), recall@10 against their ground truth.
//!
//! ```sh
//! cargo run --release -p trawl --example monitor_check -- INDEX_DIR BASE.fbin QUERY.fbin GT.bin [SAMPLES]
//! ```
//! `BASE.fbin` holds the index's vectors in slot order (what the index was built from).

use trawl::data::{read_ground_truth, read_matrix, Matrix};
use trawl::kinds::graph::search::{SearchParams, DEFAULT_BEAM_WIDTH};
use trawl::kinds::graph::{monitor, DiskIndex, OpenOptions};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    assert!(
        a.len() == 4 || a.len() == 5,
        "usage: monitor_check INDEX_DIR BASE QUERY GT [SAMPLES]"
    );
    let samples = a
        .get(4)
        .map_or(monitor::SAMPLES, |s| s.parse().expect("samples"));
    let ix = DiskIndex::open(a[0].as_ref(), OpenOptions::default()).expect("open");
    let base: Matrix<f32> = read_matrix(a[1].as_ref()).expect("base");
    let q: Matrix<f32> = read_matrix(a[2].as_ref()).expect("queries");
    let gt = read_ground_truth(a[3].as_ref()).expect("ground truth");
    assert_eq!(base.n(), ix.n(), "the base must be the index's vectors");
    let t = std::time::Instant::now();
    let (points, samples) =
        monitor::measure_samples(&ix, &|s| base.row(s as usize), &|_| true, samples)
            .expect("monitor");
    eprintln!(
        "monitor: {samples} samples in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let k = monitor::K;
    for p in &points {
        let sp = SearchParams::beam(k, p.l, DEFAULT_BEAM_WIDTH);
        let out = ix.search_batch(&q, &sp, 2).expect("search");
        let mut hit = 0;
        for i in 0..q.n() {
            let truth = &gt.ids(i)[..k];
            hit += out.ids[i * k..(i + 1) * k]
                .iter()
                .filter(|id| truth.contains(id))
                .count();
        }
        let held = hit as f64 / (k * q.n()) as f64;
        println!(
            "L {:>4}  monitor {:.4}  held-out {:.4}  difference {:+.2} points",
            p.l,
            p.recall,
            held,
            (p.recall - held) * 100.0
        );
    }
}
