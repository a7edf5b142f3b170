//! `trawl info FILE`: what a vector, ground-truth or trawl file holds.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use trawl::data::format::probe;
use trawl::data::groundtruth::read_ground_truth;
use trawl::graph::Graph;

use crate::runtime::human_bytes;

pub fn run(path: &Path) -> Result<()> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let mut magic = [0u8; 8];
    let got = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut magic))
        .with_context(|| format!("reading {}", path.display()))?;
    println!("file:    {}", path.display());
    println!("size:    {} ({size} bytes)", human_bytes(size));
    if got == 8 && magic.starts_with(b"TRAWL") {
        return trawl_file(path, &magic);
    }
    match probe(path) {
        Ok(info) => {
            println!("kind:    vectors ({} format)", info.format);
            println!("dtype:   {}", info.dtype);
            println!("vectors: {}", info.n);
            println!("dim:     {}", info.dim);
            Ok(())
        }
        Err(vec_err) => match read_ground_truth(path) {
            Ok(gt) => {
                println!("kind:    ground truth");
                println!("queries: {}", gt.nq);
                println!("k:       {}", gt.k);
                println!(
                    "dists:   {}",
                    if gt.dists.is_empty() { "no" } else { "yes" }
                );
                Ok(())
            }
            Err(_) => Err(vec_err.into()),
        },
    }
}

fn trawl_file(path: &Path, magic: &[u8; 8]) -> Result<()> {
    match magic {
        b"TRAWLGRF" => {
            let g = Graph::load(path)?;
            println!("kind:    trawl Vamana graph");
            println!("nodes:   {}", g.n());
            println!("R:       {}", g.max_degree());
            println!("medoid:  {}", g.medoid());
            println!(
                "edges:   {} (avg degree {:.1})",
                g.edge_count(),
                g.edge_count() as f64 / g.n().max(1) as f64
            );
        }
        b"TRAWLPQ\0" => {
            let pq = trawl::quant::pq::ProductQuantizer::load(path)?;
            println!("kind:    trawl product quantizer");
            println!("dim:     {}", pq.dim());
            println!("bytes per vector (subspaces): {}", pq.m());
            println!("metric:  {}", pq.metric());
        }
        other => {
            println!(
                "kind:    trawl file of an unknown kind ({:?})",
                String::from_utf8_lossy(other)
            );
        }
    }
    Ok(())
}
