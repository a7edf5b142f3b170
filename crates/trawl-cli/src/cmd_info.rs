//! `trawl info FILE`: what a vector, ground-truth or trawl file holds.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use trawl::data::format::probe;
use trawl::data::groundtruth::read_ground_truth;
use trawl::graph::Graph;

use crate::runtime::human_bytes;

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
    if path.is_dir() && trawl::shard::ShardedIndex::is_sharded(path) {
        return sharded_dir(path, json);
    }
    if path.is_dir() {
        return match trawl::kinds::kind_of(path)? {
            trawl::index::KindName::Graph | trawl::index::KindName::Ivf => {
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
    let f = trawl::layout::packed::PackedFile::open(path)?;
    let m = f.meta();
    let g = f.geometry();
    println!(
        "kind:    trawl page-packed disk index (format version {}){}{}",
        trawl::layout::packed::VERSION,
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
    println!("PQ:      {} bytes per vector", m.pq_bytes);
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
    let g = trawl::layout::decoupled::graph::GraphFile::open(path)?;
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
    let v = trawl::layout::decoupled::vectors::VectorFile::open(path)?;
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
pub(crate) use trawl::index::monitor::describe_points as recall_points;

/// What streaming updates left in an index: its live vectors, the delta's vectors and the
/// log's operations not merged yet.
struct Updates {
    live: usize,
    delta: usize,
    pending: usize,
}

/// [`Updates`] of the index in `dir`, when it has taken any (`ids.trawl` or `wal.trawl`): the
/// index opened read-only as a live one, its log replayed.
fn updates_summary(dir: &Path, opts: trawl::index::OpenOptions) -> Result<Option<Updates>> {
    if !trawl::kinds::GraphIndex::has_updates(dir) {
        return Ok(None);
    }
    let live = trawl::index::live::LiveIndex::open(dir, opts, trawl::index::live::Access::ReadOnly)
        .map_err(|e| anyhow::anyhow!("the write-ahead log cannot be replayed: {e}"))?;
    let merged = live.disk().manifest().and_then(|m| m.log_seq).unwrap_or(0);
    let log = dir.join(trawl::index::wal::FILE_NAME);
    let pending = if log.is_file() {
        trawl::index::wal::read_log(&log)?
            .records
            .iter()
            .filter(|r| r.seq > merged)
            .count()
    } else {
        0
    };
    Ok(Some(Updates {
        live: live.len(),
        delta: live.delta_len(),
        pending,
    }))
}

fn index_dir(
    dir: &Path,
    verify: bool,
    json: bool,
    accel: Option<trawl::accel::AccelKind>,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    // An index whose packed file was removed keeps only its decoupled layout.
    let packed_path = dir.join(trawl::layout::packed::FILE_NAME);
    let layout = if !packed_path.exists()
        && dir
            .join(trawl::layout::decoupled::graph::FILE_NAME)
            .exists()
    {
        trawl::index::IndexLayout::Decoupled
    } else {
        trawl::index::IndexLayout::Packed
    };
    let opts = trawl::index::OpenOptions {
        direct: false,
        layout,
        ..Default::default()
    };
    let opts = trawl::index::OpenOptions {
        accel: accel.unwrap_or(trawl::accel::AccelKind::Cpu),
        ..opts
    };
    if trawl::kinds::kind_of(dir)? == trawl::index::KindName::Ivf {
        return ivf_dir(&trawl::ivf::IvfIndex::open(dir, opts)?, verify, json, ctl);
    }
    let ix = trawl::index::DiskIndex::open(dir, opts)?;
    let info = ix.info()?;
    // A log that cannot be replayed is reported, not an error of `info` (`--verify` fails
    // on it, naming the record).
    let updates = updates_summary(dir, opts);
    if json {
        let mut v = serde_json::to_value(&info)?;
        match &updates {
            Ok(Some(u)) => {
                v["updates"] = serde_json::json!({
                    "live_vectors": u.live,
                    "delta_vectors": u.delta,
                    "unmerged_operations": u.pending,
                })
            }
            Ok(None) => {}
            Err(e) => v["updates"] = serde_json::json!({ "error": format!("{e:#}") }),
        }
        if verify {
            let rep = trawl::index::verify_index(dir, ctl)?;
            v["verify"] = serde_json::to_value(&rep)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let db = ix.disk_bytes();
    println!("index:   {}", dir.display());
    println!(
        "kind:    {} index; layouts {}; {}",
        info.kind.name(),
        info.layouts.join(", "),
        if info.manifest {
            "manifest.trawl lists every file"
        } else {
            "no manifest (built before manifests; written at the next `trawl layout` or `trawl entry`)"
        }
    );
    match &updates {
        Ok(Some(u)) => println!(
            "updates: {} live vectors; {} logged operations not merged yet ({} vectors in the \
             in-memory delta; `trawl merge` folds them into the files)",
            u.live, u.pending, u.delta
        ),
        Ok(None) => {}
        Err(e) => println!("updates: {e:#}"),
    }
    if let Some(b) = &info.build {
        println!(
            "build:   R = {}, L = {}, alpha = {}, {} PQ bytes{}, entry ratio {}, seed {}{}{}",
            b.r,
            b.l,
            b.alpha,
            b.pq_bytes,
            if b.opq { " (OPQ)" } else { "" },
            b.entry_ratio,
            b.seed,
            match (&b.visit_order, &b.ivf) {
                (Some(o), _) => format!(", visit order {o}"),
                (None, None) => ", visit order ids (recorded before the field)".to_string(),
                (None, Some(_)) => String::new(),
            },
            if b.query_sample > 0 {
                format!(", query sample of {}", b.query_sample)
            } else {
                String::new()
            }
        );
    }
    if let Some(r) = &info.recall {
        println!(
            "recall:  {} (recall monitor: {} of its vectors searched as held-out queries after the {}, \
             beam width {}){}",
            recall_points(&r.points),
            r.samples,
            r.by,
            r.beam_width,
            if r.by == "merge" {
                format!("; the last build: {}", recall_points(&r.build))
            } else {
                String::new()
            }
        );
    }
    if layout == trawl::index::IndexLayout::Decoupled {
        println!("(no packed.trawl: the decoupled layout only)");
        decoupled_graph(&dir.join(trawl::layout::decoupled::graph::FILE_NAME), false)?;
        match ix.decoupled().filter(|d| d.slot_map().is_some()) {
            Some(d) => println!(
                "vectors: {} segments written by merges and garbage collection ({}), mapped by \
                 vmap.trawl",
                d.segments().len(),
                d.segments()
                    .iter()
                    .map(|f| format!(
                        "{} {} vectors {}",
                        f.path().file_name().and_then(|n| n.to_str()).unwrap_or("?"),
                        f.geometry().n,
                        human_bytes(f.file_bytes())
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => decoupled_vectors(
                &dir.join(trawl::layout::decoupled::vectors::FILE_NAME),
                false,
            )?,
        }
    } else {
        packed_file(&packed_path, false, ctl)?;
    }
    if verify {
        // Every file of the index, read whole.
        let rep = trawl::index::verify_index(dir, ctl)?;
        println!(
            "verify:  {} files{}",
            rep.files.len(),
            if rep.manifest {
                ", each matching the manifest"
            } else {
                " (no manifest: the index files present)"
            }
        );
        for f in &rep.files {
            println!(
                "  {:<22} {:>12}  {}",
                f.name,
                human_bytes(f.bytes),
                f.checked
            );
        }
        if let Some(c) = &rep.connectivity {
            println!(
                "  graph: all {} nodes reachable from the medoid; in-degree min {} / median {} / \
                 max {}, {} without an in-link; {} strongly connected component(s), the largest \
                 of {} nodes",
                c.nodes,
                c.in_degree[0],
                c.in_degree[2],
                c.in_degree[4],
                c.zero_in_degree,
                c.components,
                c.largest_component
            );
        }
    }
    println!("files:");
    let row = |name: &str, b: u64| println!("  {name:<15} {:>12} ({b} bytes)", human_bytes(b));
    if db.packed > 0 {
        row("packed.trawl", db.packed);
    }
    row("pq.trawl", db.pq);
    row("pq-codes.trawl", db.pq_codes);
    if let Some(e) = ix.entry() {
        row("entry.trawl", db.entry);
        println!(
            "  (entry index: {} sampled nodes, {:.2}% of {}, graph R = {})",
            e.len(),
            100.0 * e.len() as f64 / ix.n() as f64,
            ix.n(),
            e.max_degree()
        );
    }
    println!("  total           {:>12}", human_bytes(db.total()));
    let dgraph = dir.join(trawl::layout::decoupled::graph::FILE_NAME);
    if let Ok(g) = std::fs::metadata(&dgraph) {
        // The vector bytes: every segment and the map (read from the open decoupled layout),
        // else the layout's one vector file.
        let vectors = if db.vectors > 0 {
            db.vectors
        } else {
            std::fs::metadata(dir.join(trawl::layout::decoupled::vectors::FILE_NAME))
                .map_or(0, |m| m.len())
        };
        let total = g.len() + vectors + db.pq + db.pq_codes;
        let packed_total = db.packed + db.pq + db.pq_codes;
        let vs_packed = |x: u64, p: u64| {
            if db.packed > 0 {
                format!(" ({:.3}× {})", x as f64 / p.max(1) as f64, human_bytes(p))
            } else {
                String::new()
            }
        };
        println!(
            "  decoupled layout (--layout decoupled): graph.trawl {} + vectors {} = {}{}; with \
             the PQ files {}{}",
            human_bytes(g.len()),
            human_bytes(vectors),
            human_bytes(g.len() + vectors),
            vs_packed(g.len() + vectors, db.packed),
            human_bytes(total),
            vs_packed(total, packed_total),
        );
    }
    for layout in [
        trawl::index::IndexLayout::Shuffled,
        trawl::index::IndexLayout::AllInStorage,
    ] {
        if let Ok(m) = std::fs::metadata(dir.join(layout.file_name())) {
            println!(
                "  {:<22} {:>12} (other layout of the same graph: --layout {})",
                layout.file_name(),
                human_bytes(m.len()),
                layout.name()
            );
        }
    }
    let mem = ix.memory();
    println!(
        "memory at search time: {} (PQ codes {}, codebooks {} (with the OPQ rotation if any), page checksums and order map {}, entry index {}; plus the cache if one is asked for)",
        human_bytes(mem.total()),
        human_bytes(mem.pq_codes_bytes),
        human_bytes(mem.pq_codebook_bytes),
        human_bytes(mem.checksum_bytes),
        human_bytes(mem.entry_bytes)
    );
    Ok(())
}

fn ivf_dir(
    ix: &trawl::ivf::IvfIndex,
    verify: bool,
    json: bool,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    let info = ix.info()?;
    if json {
        let mut v = serde_json::to_value(&info)?;
        if verify {
            v["verify"] = serde_json::json!({ "vector_pages": ix.verify(ctl)? });
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let m = ix.meta();
    let iv = info.ivf.as_ref();
    println!("index:   {}", ix.dir().display());
    println!(
        "kind:    ivf index (FusionANNS); vector layouts {}; {}",
        info.layouts.join(", "),
        if info.manifest {
            "manifest.trawl lists every file"
        } else {
            "no manifest"
        }
    );
    println!(
        "vectors: {} × {} {} ({}), PQ {} B per vector",
        info.n, info.dim, info.dtype, info.metric, info.pq_bytes
    );
    println!(
        "lists:   {} ({:.1}% of n; target size {}, ε {}, at most {} per vector), replication {:.2}; \
         centroid graph R {}",
        m.nlist(),
        100.0 * m.nlist() as f64 / info.n.max(1) as f64,
        m.list_size,
        m.epsilon,
        m.max_replicas,
        m.replication(),
        m.graph.max_degree()
    );
    if let Some(iv) = iv {
        println!(
            "pages:   {} data pages, {} vectors per page",
            iv.vector_pages, iv.vectors_per_page
        );
        println!(
            "memory:  {} (centroids {}, centroid graph {}, posting lists {}, PQ codes {}, codebooks {}, \
             slot table and checksums {}), {:.1} B per vector",
            human_bytes(iv.memory.total()),
            human_bytes(iv.memory.centroids),
            human_bytes(iv.memory.centroid_graph),
            human_bytes(iv.memory.posting_lists),
            human_bytes(iv.memory.pq_codes),
            human_bytes(iv.memory.pq_codebooks),
            human_bytes(iv.memory.vector_table),
            iv.memory.total() as f64 / info.n.max(1) as f64
        );
        println!("accel:   {} — {}", iv.accel.backend, iv.accel.adapter);
    }
    println!(
        "disk:    {} ({} files)",
        human_bytes(info.disk_bytes.total),
        info.files.len()
    );
    if verify {
        println!(
            "verify:  all {} vector pages match their checksums",
            ix.verify(ctl)?
        );
    }
    Ok(())
}

/// A shard manifest (`shards.trawl` or a build's plan): shape, partition, every shard.
fn shard_manifest(path: &Path) -> Result<trawl::shard::ShardManifest> {
    let m = trawl::shard::ShardManifest::load(path)?;
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
    let ix = trawl::shard::ShardedIndex::open(dir, trawl::index::OpenOptions::default())
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
    shard_manifest(&dir.join(trawl::shard::SHARD_MANIFEST_FILE))?;
    println!(
        "open:    every shard matches its recorded build; {} in memory, {} on disk",
        human_bytes(ix.memory_bytes()),
        human_bytes(ix.disk_bytes())
    );
    Ok(())
}

/// An index directory of a kind without a description of its own here: the library's
/// description ([`trawl::index::IndexInfo`]) and, with `--verify`, its files checked.
fn any_dir(dir: &Path, verify: bool, json: bool, ctl: &trawl::progress::Control) -> Result<()> {
    let opts = trawl::index::OpenOptions {
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
    for f in report.iter().flat_map(|r| &r.files) {
        println!(
            "verify:  {} ({}): {}",
            f.name,
            human_bytes(f.bytes),
            f.checked
        );
    }
    Ok(())
}
