//! `trawl info DIR` of a graph or IVF index directory: what the index is, its updates, build
//! and recall records, its layouts and files and the memory it holds at search time.

use std::path::Path;

use anyhow::Result;

use super::{decoupled_graph, decoupled_vectors, packed_file, recall_points};
use crate::runtime::human_bytes;

/// What streaming updates left in an index: its live vectors, the delta's vectors and the
/// log's operations not merged yet.
struct Updates {
    live: usize,
    delta: usize,
    pending: usize,
}

/// [`Updates`] of the index in `dir`, when it has taken any (`ids.trawl` or `wal.trawl`): the
/// index opened read-only as a live one, its log replayed.
fn updates_summary(dir: &Path, opts: trawl::kinds::graph::OpenOptions) -> Result<Option<Updates>> {
    if !trawl::kinds::GraphIndex::has_updates(dir) {
        return Ok(None);
    }
    let live = trawl::kinds::graph::updates::live::LiveIndex::open(
        dir,
        opts,
        trawl::kinds::graph::updates::live::Access::ReadOnly,
    )
    .map_err(|e| anyhow::anyhow!("the write-ahead log cannot be replayed: {e}"))?;
    let merged = live.disk().manifest().and_then(|m| m.log_seq).unwrap_or(0);
    let log = dir.join(trawl::kinds::graph::updates::wal::FILE_NAME);
    let pending = if log.is_file() {
        trawl::kinds::graph::updates::wal::read_log(&log)?
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

/// The layout `trawl info` opens an index directory with: the packed one, unless the index's
/// packed file was removed and it keeps only its decoupled layout.
fn info_layout(dir: &Path) -> trawl::kinds::graph::IndexLayout {
    let packed_path = dir.join(trawl::kinds::graph::layout::packed::FILE_NAME);
    if !packed_path.exists()
        && dir
            .join(trawl::kinds::graph::layout::decoupled::graph::FILE_NAME)
            .exists()
    {
        trawl::kinds::graph::IndexLayout::Decoupled
    } else {
        trawl::kinds::graph::IndexLayout::Packed
    }
}

/// `trawl info DIR` of a graph or IVF index directory: its description as JSON (`--json`), or
/// as text section by section (kind, updates, build, recall, layout, `--verify`, files,
/// memory).
pub(super) fn index_dir(
    dir: &Path,
    verify: bool,
    json: bool,
    accel: Option<trawl::accel::AccelKind>,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    let layout = info_layout(dir);
    let opts = trawl::kinds::graph::OpenOptions {
        direct: false,
        layout,
        ..Default::default()
    };
    let opts = trawl::kinds::graph::OpenOptions {
        accel: accel.unwrap_or(trawl::accel::AccelKind::Cpu),
        ..opts
    };
    if trawl::kinds::kind_of(dir)? == trawl::kinds::graph::KindName::Ivf {
        return ivf_dir(
            &trawl::kinds::ivf::IvfIndex::open(dir, opts)?,
            verify,
            json,
            ctl,
        );
    }
    let ix = trawl::kinds::graph::DiskIndex::open(dir, opts)?;
    let info = ix.info()?;
    // A log that cannot be replayed is reported, not an error of `info` (`--verify` fails
    // on it, naming the record).
    let updates = updates_summary(dir, opts);
    if json {
        return index_json(dir, &info, &updates, verify, ctl);
    }
    let db = ix.disk_bytes();
    print_summary(dir, &info, &updates);
    print_build(&info);
    print_recall(&info);
    print_layout(dir, &ix, layout, ctl)?;
    if verify {
        print_verify(dir, ctl)?;
    }
    print_files(&ix, &db);
    print_other_layouts(dir, &db);
    print_memory(&ix);
    Ok(())
}

/// `trawl info DIR --json` of a graph index: the library's [`trawl::kinds::graph::IndexInfo`], with
/// `updates` (or the error replaying the log) and, with `--verify`, the verification report.
fn index_json(
    dir: &Path,
    info: &trawl::kinds::graph::IndexInfo,
    updates: &Result<Option<Updates>>,
    verify: bool,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    let mut v = serde_json::to_value(info)?;
    match updates {
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
        let rep = trawl::kinds::graph::verify_index(dir, ctl)?;
        v["verify"] = serde_json::to_value(&rep)?;
    }
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// The `index:`, `kind:` and `updates:` lines: the directory, the kind and layouts written,
/// whether a manifest lists the files, and what streaming updates left unmerged.
fn print_summary(
    dir: &Path,
    info: &trawl::kinds::graph::IndexInfo,
    updates: &Result<Option<Updates>>,
) {
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
    match updates {
        Ok(Some(u)) => println!(
            "updates: {} live vectors; {} logged operations not merged yet ({} vectors in the \
             in-memory delta; `trawl merge` folds them into the files)",
            u.live, u.pending, u.delta
        ),
        Ok(None) => {}
        Err(e) => println!("updates: {e:#}"),
    }
}

/// The `build:` line: the build parameters the manifest records, when it records them.
fn print_build(info: &trawl::kinds::graph::IndexInfo) {
    if let Some(b) = &info.build {
        println!(
            "build:   R = {}, L = {}, alpha = {}, {}{}, entry ratio {}, seed {}{}{}",
            b.r,
            b.l,
            b.alpha,
            match b.rabitq_bits {
                Some(bits) => format!("RaBitQ {bits} bits ({} B codes)", b.pq_bytes),
                None => format!("{} PQ bytes", b.pq_bytes),
            },
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
}

/// The `recall:` line: the recall monitor's figures, when the manifest records them.
fn print_recall(info: &trawl::kinds::graph::IndexInfo) {
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
}

/// The layout opened: the packed file's description, or the decoupled graph's and its
/// vectors' (the segments of a merged index, else the one vector file).
fn print_layout(
    dir: &Path,
    ix: &trawl::kinds::graph::DiskIndex,
    layout: trawl::kinds::graph::IndexLayout,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    if layout == trawl::kinds::graph::IndexLayout::Decoupled {
        println!("(no packed.trawl: the decoupled layout only)");
        decoupled_graph(
            &dir.join(trawl::kinds::graph::layout::decoupled::graph::FILE_NAME),
            false,
        )?;
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
                &dir.join(trawl::kinds::graph::layout::decoupled::vectors::FILE_NAME),
                false,
            )?,
        }
    } else {
        packed_file(
            &dir.join(trawl::kinds::graph::layout::packed::FILE_NAME),
            false,
            ctl,
        )?;
    }
    Ok(())
}

/// `--verify`: every file of the index read whole and checked, one line per file, and the
/// graph's connectivity when it was checked.
fn print_verify(dir: &Path, ctl: &trawl::progress::Control) -> Result<()> {
    let rep = trawl::kinds::graph::verify_index(dir, ctl)?;
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
    Ok(())
}

/// The `files:` section: the bytes of each file the opened layout searches (and the entry
/// index's shape), and their total.
fn print_files(ix: &trawl::kinds::graph::DiskIndex, db: &trawl::kinds::graph::DiskBytes) {
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
    if db.refine > 0 {
        row("refine.trawl", db.refine);
    }
    if db.hot > 0 {
        row("hot.trawl", db.hot);
    }
    println!("  total           {:>12}", human_bytes(db.total()));
}

/// The other layouts of the same graph present in `dir`: the decoupled one's size beside the
/// packed one's, and the PageShuffle and All-in-Storage files.
fn print_other_layouts(dir: &Path, db: &trawl::kinds::graph::DiskBytes) {
    let dgraph = dir.join(trawl::kinds::graph::layout::decoupled::graph::FILE_NAME);
    if let Ok(g) = std::fs::metadata(&dgraph) {
        // The vector bytes: every segment and the map (read from the open decoupled layout),
        // else the layout's one vector file.
        let vectors = if db.vectors > 0 {
            db.vectors
        } else {
            std::fs::metadata(dir.join(trawl::kinds::graph::layout::decoupled::vectors::FILE_NAME))
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
        trawl::kinds::graph::IndexLayout::Shuffled,
        trawl::kinds::graph::IndexLayout::AllInStorage,
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
}

/// The `memory at search time:` line, by part.
fn print_memory(ix: &trawl::kinds::graph::DiskIndex) {
    let mem = ix.memory();
    let (codes, quantiser) = match ix.pq() {
        trawl::quant::Quantiser::Pq(p) if p.rotation().is_some() => {
            ("PQ codes", "codebooks and OPQ rotation")
        }
        trawl::quant::Quantiser::Pq(_) => ("PQ codes", "codebooks"),
        trawl::quant::Quantiser::RaBitQ(_) => ("RaBitQ codes", "centroid and rotation"),
    };
    println!(
        "memory at search time: {} ({codes} {}, {quantiser} {}, page checksums and order map {}, entry index {}, attributes {}; plus the cache if one is asked for)",
        human_bytes(mem.total()),
        human_bytes(mem.pq_codes_bytes),
        human_bytes(mem.pq_codebook_bytes),
        human_bytes(mem.checksum_bytes),
        human_bytes(mem.entry_bytes),
        human_bytes(mem.attrs_bytes)
    );
    if let Some(a) = ix.attrs() {
        let n = u64::from(a.n()).max(1);
        let occ = a.label_occurrences();
        println!(
            "attributes in memory: {} ({:.2} B per vector; {} labels, {occ} label occurrences, \
             bitmaps {:.2} B per occurrence; {} numeric fields) (attrs.trawl {})",
            human_bytes(a.memory_bytes()),
            a.memory_bytes() as f64 / n as f64,
            a.labels().count(),
            a.label_bytes() as f64 / occ.max(1) as f64,
            a.fields().len(),
            human_bytes(
                std::fs::metadata(ix.dir().join(trawl::filter::file::FILE_NAME))
                    .map_or(0, |m| m.len())
            ),
        );
    }
}

fn ivf_dir(
    ix: &trawl::kinds::ivf::IvfIndex,
    verify: bool,
    json: bool,
    ctl: &trawl::progress::Control,
) -> Result<()> {
    let info = ix.info()?;
    if json {
        let mut v = serde_json::to_value(&info)?;
        if verify {
            v["verify"] = serde_json::to_value(ix.verify(ctl)?)?;
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
        "vectors: {} × {} {} ({}), {}",
        info.n,
        info.dim,
        info.dtype,
        info.metric,
        ix.pq().describe()
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
            "memory:  {} (centroids {}, centroid graph {}, posting lists {}, codes {}, {}quantiser {}, \
             slot table and checksums {}), {:.1} B per vector",
            human_bytes(iv.memory.total()),
            human_bytes(iv.memory.centroids),
            human_bytes(iv.memory.centroid_graph),
            human_bytes(iv.memory.posting_lists),
            human_bytes(iv.memory.pq_codes),
            if iv.memory.code_lists > 0 {
                format!(
                    "codes in FastScan blocks by list {}, ",
                    human_bytes(iv.memory.code_lists)
                )
            } else {
                String::new()
            },
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
        super::print_verified(&ix.verify(ctl)?);
    }
    Ok(())
}
