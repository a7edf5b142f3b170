//! `trawl info FILE`: what a vector, ground-truth or trawl file holds.

mod index_dir;

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use trawl::data::format::probe;
use trawl::data::groundtruth::read_ground_truth;
use trawl::vamana::Graph;

use crate::runtime::human_bytes;
use index_dir::index_dir;

/// `trawl info DIR --plan BUDGET`: the memory plan of the index in `dir`.
pub fn plan(
    dir: &Path,
    budget: u64,
    layout: crate::runtime::LayoutArg,
    threads: usize,
    interleave: usize,
    json: bool,
) -> Result<()> {
    let o = trawl::kinds::Options {
        memory_budget: Some(budget),
        layout: layout.named(),
        layout_auto: layout == crate::runtime::LayoutArg::Auto,
        threads,
        interleave,
        ..Default::default()
    };
    let plan = trawl::kinds::plan_memory(dir, &o)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{}", plan.describe());
    }
    Ok(())
}

pub fn run(
    path: Option<&Path>,
    verify: bool,
    json: bool,
    accel: Option<trawl::accel::AccelKind>,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    let Some(path) = path else {
        return accel_only(accel.unwrap_or(trawl::accel::AccelKind::Auto), json);
    };
    if path.is_dir() && trawl::kinds::sharded::ShardedIndex::is_sharded(path) {
        return sharded_dir(path, json);
    }
    if path.is_dir() {
        return match trawl::kinds::kind_of(path)? {
            trawl::kinds::graph::KindName::Graph | trawl::kinds::graph::KindName::Ivf => {
                index_dir(path, verify, json, accel, ctl)
            }
            _ => any_dir(path, verify, json, ctl),
        };
    }
    if accel.is_some() {
        anyhow::bail!(
            "--accel describes an accelerator or an IVF index directory; {} is a file",
            path.display()
        );
    }
    if json {
        anyhow::bail!(
            "--json describes an index directory; {} is a file",
            path.display()
        );
    }
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
        if &magic == b"TRAWLPAK" {
            return packed_file(path, verify, ctl);
        }
        if &magic == b"TRAWLDGR" {
            return decoupled_graph(path, verify);
        }
        if &magic == b"TRAWLVEC" {
            return decoupled_vectors(path, verify);
        }
        if &magic == b"TRAWLSHD" {
            return shard_manifest(path).map(|_| ());
        }
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
        b"TRAWLRBQ" => {
            let q = trawl::quant::rabitq::RaBitQuantizer::load(path)?;
            println!("kind:    trawl RaBitQ quantiser");
            println!("dim:     {} (rotated in {})", q.dim(), q.pad());
            println!(
                "bits:    {} per dimension ({} bytes per code)",
                q.bits(),
                q.code_bytes()
            );
            println!("metric:  {}", q.metric());
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

fn packed_file(path: &Path, verify: bool, ctl: &trawl::progress::Control) -> Result<()> {
    let f = trawl::kinds::graph::layout::packed::PackedFile::open(path)?;
    let m = f.meta();
    let g = f.geometry();
    println!(
        "kind:    trawl page-packed disk index (format version {}){}{}",
        trawl::kinds::graph::layout::packed::VERSION,
        if f.is_permuted() {
            ", PageShuffle order"
        } else {
            ""
        },
        if m.neighbor_code_bytes > 0 {
            ", All-in-Storage (neighbour PQ codes in every record)"
        } else {
            ""
        }
    );
    println!("vectors: {} × {} {}", m.n, m.dim, m.dtype);
    println!("metric:  {}", m.metric);
    println!("R:       {} neighbour slots per record", m.r);
    println!("medoid:  {}", m.medoid);
    println!(
        "record:  {} bytes ({} vector + 4 degree + {} ids + {} neighbour codes); {}",
        g.record_bytes,
        g.vector_bytes,
        4 * m.r,
        m.r * m.neighbor_code_bytes,
        if g.per_page > 0 {
            format!("{} records per 4 KiB page", g.per_page)
        } else {
            format!("{} pages per record", g.pages_per_record)
        }
    );
    println!(
        "pages:   1 header + {} data + {} checksum + {} order = {}",
        g.data_pages,
        g.checksum_pages,
        g.order_pages,
        g.total_pages()
    );
    println!(
        "codes:   {} bytes per vector in memory (PQ or RaBitQ)",
        m.pq_bytes
    );
    if verify {
        f.verify_all(ctl)?;
        println!(
            "verify:  all {} data pages match their checksums",
            g.data_pages
        );
    }
    Ok(())
}

fn decoupled_graph(path: &Path, verify: bool) -> Result<()> {
    let g = trawl::kinds::graph::layout::decoupled::graph::GraphFile::open(path)?;
    let m = g.meta();
    println!("kind:    trawl decoupled graph (Elias-Fano neighbour lists in 4 KiB pages)");
    println!(
        "nodes:   {} ({} × {} {}, {})",
        m.n, m.n, m.dim, m.dtype, m.metric
    );
    println!(
        "edges:   {} (avg degree {:.1}, R = {})",
        g.edges(),
        g.edges() as f64 / m.n as f64,
        m.r
    );
    let raw = 4 * (m.n + g.edges());
    println!(
        "pages:   1 header + {} data + {} sparse index; {} ({:.3}× the {} of uncompressed lists)",
        g.data_pages(),
        g.total_pages() - 1 - g.data_pages(),
        human_bytes(g.file_bytes()),
        g.file_bytes() as f64 / raw as f64,
        human_bytes(raw)
    );
    println!(
        "memory:  sparse index {}; list cache entries of {} bytes",
        human_bytes(g.heap_bytes() as u64),
        g.cache_entry_bytes()
    );
    if verify {
        println!(
            "verify:  all {} data pages decode and match their checksums",
            g.verify_all()?
        );
    }
    Ok(())
}

fn decoupled_vectors(path: &Path, verify: bool) -> Result<()> {
    let v = trawl::kinds::graph::layout::decoupled::vectors::CompressedVectorFile::open(path)?;
    let g = v.geometry();
    let r = v.report();
    let raw = g.n * g.vector_bytes() as u64;
    println!("kind:    trawl decoupled vectors (lossless: XOR base per chunk, Huffman per segment and byte lane)");
    println!("vectors: {} × {} {}", g.n, g.dim, g.dtype);
    println!(
        "layout:  {} segments of {} vectors, {} chunks of {} ({} XOR-coded), {} data pages",
        r.segments, g.segment_vectors, r.chunks, g.chunk_vectors, r.xor_chunks, r.data_pages
    );
    println!(
        "size:    {} ({:.3}× the {} raw; coded payload {:.3}×; {} vectors stored raw)",
        human_bytes(v.file_bytes()),
        v.file_bytes() as f64 / raw as f64,
        human_bytes(raw),
        r.payload_bytes as f64 / raw as f64,
        r.raw_vectors
    );
    println!(
        "memory:  {} (code tables, chunk records and base vectors, first id per page)",
        human_bytes(v.heap_bytes() as u64)
    );
    if verify {
        let mut n = 0u64;
        v.scan(|_, _| n += 1)?;
        println!("verify:  all {n} vectors decode and every page matches its checksum");
    }
    Ok(())
}

/// `trawl info --accel`: lists the adapters `wgpu` enumerates, opens the accelerator over no
/// codes and prints what it runs on. The adapters are printed before the open, so a failed
/// open (no usable GPU) still shows what the machine has.
fn accel_only(kind: trawl::accel::AccelKind, json: bool) -> Result<()> {
    let adapters = trawl::accel::adapters();
    if !json {
        if adapters.is_empty() {
            println!("adapters: none (no Vulkan driver found, or a build without the GPU backend)");
        }
        for (i, a) in adapters.iter().enumerate() {
            println!(
                "adapter {i}: {} — {} {}, driver {}, PCI {:04x}:{:04x}",
                a.name, a.backend, a.device_type, a.driver, a.vendor, a.device
            );
        }
    }
    let codes = std::sync::Arc::new(
        trawl::quant::pq::PqCodes::from_vec(vec![0; 8], 8, 256)
            .ok_or_else(|| anyhow::anyhow!("probe codes"))?,
    );
    let a = trawl::accel::open(kind, codes)?;
    let info = a.info();
    if json {
        let mut v = serde_json::to_value(&info)?;
        v["adapters"] = serde_json::to_value(&adapters)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("accel:   {} (asked: {})", info.backend, kind.name());
        println!("device:  {}", info.adapter);
    }
    Ok(())
}

/// `recall@10 0.9512 at L 32, …`.
pub(crate) use trawl::kinds::graph::monitor::describe_points as recall_points;

/// A shard manifest (`shards.trawl` or a build's plan): shape, partition, every shard.
fn shard_manifest(path: &Path) -> Result<trawl::kinds::sharded::ShardManifest> {
    let m = trawl::kinds::sharded::ShardManifest::load(path)?;
    let h = &m.header;
    println!(
        "kind:    shard manifest (TRAWLSHD), written by trawl {}",
        h.written_by
    );
    println!(
        "shape:   {} × {} {} ({}), {} shards",
        h.n,
        h.dim,
        h.dtype,
        h.metric,
        h.shards.len()
    );
    println!(
        "split:   slack {}, epsilon {} ({} replicas, {:.3} copies per vector), {:.1}% in their nearest shard",
        h.slack,
        h.epsilon,
        h.replicas,
        (h.n + h.replicas) as f64 / h.n.max(1) as f64,
        100.0 * h.in_nearest as f64 / h.n.max(1) as f64
    );
    for e in &h.shards {
        println!(
            "  {}: {} vectors, build {}",
            e.dir,
            e.count,
            if e.build_id.is_empty() {
                "(not built: a plan)"
            } else {
                &e.build_id
            }
        );
    }
    Ok(m)
}

/// A sharded index directory: its manifest, then each shard opened and checked against it.
fn sharded_dir(dir: &Path, json: bool) -> Result<()> {
    let ix =
        trawl::kinds::sharded::ShardedIndex::open(dir, trawl::kinds::graph::OpenOptions::default())
            .with_context(|| format!("opening {}", dir.display()))?;
    if json {
        let h = &ix.manifest().header;
        let v = serde_json::json!({
            "kind": "sharded", "n": ix.n(), "dim": ix.dim(), "dtype": ix.dtype().name(),
            "metric": ix.metric().name(), "slack": h.slack, "epsilon": h.epsilon,
            "replicas": h.replicas, "in_nearest": h.in_nearest,
            "shards": h.shards, "memory_bytes": ix.memory_bytes(), "disk_bytes": ix.disk_bytes(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("index:   {} (sharded)", dir.display());
    shard_manifest(&dir.join(trawl::kinds::sharded::SHARD_MANIFEST_FILE))?;
    println!(
        "open:    every shard matches its recorded build; {} in memory, {} on disk",
        human_bytes(ix.memory_bytes()),
        human_bytes(ix.disk_bytes())
    );
    Ok(())
}

/// An index directory of a kind without a description of its own here: the library's
/// description ([`trawl::kinds::graph::IndexInfo`]) and, with `--verify`, its files checked.
fn any_dir(dir: &Path, verify: bool, json: bool, ctl: &trawl::progress::Control) -> Result<()> {
    let opts = trawl::kinds::graph::OpenOptions {
        direct: false,
        ..Default::default()
    };
    let ix = trawl::kinds::open(dir, opts)?;
    let info = ix.info()?;
    let report = if verify { Some(ix.verify(ctl)?) } else { None };
    if json {
        let mut v = serde_json::to_value(&info)?;
        if let Some(r) = &report {
            v["verify"] = serde_json::to_value(r)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("index:   {}", dir.display());
    println!(
        "kind:    {} index; layouts {}",
        info.kind.label(),
        info.layouts.join(", ")
    );
    println!(
        "vectors: {} × {} {} ({})",
        info.n, info.dim, info.dtype, info.metric
    );
    println!(
        "disk:    {} ({} files); memory {}",
        human_bytes(info.disk_bytes.total),
        info.files.len(),
        human_bytes(info.memory_total_bytes)
    );
    if let Some(r) = &report {
        print_verified(r);
    }
    Ok(())
}

/// One `verify:` line per file checked.
fn print_verified(report: &trawl::kinds::VerifyReport) {
    for f in &report.files {
        println!(
            "verify:  {} ({}): {}",
            f.name,
            human_bytes(f.bytes),
            f.checked
        );
    }
}
