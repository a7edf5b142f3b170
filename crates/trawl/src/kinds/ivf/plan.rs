//! The IVF kind's memory plan ([`crate::kinds::plan`]): everything it searches with is
//! required — the centroids, their graph and the posting lists (`ivf.trawl`), the PQ codebooks
//! and codes, the vector file's slot table and page checksums, the attributes — and a larger
//! budget buys nothing more (the kind has no cache). Sizes come from the files: the slot
//! table's from the vector file's header and tables, the rest from payload sizes (the lists
//! are held as read, the codebooks in two layouts).

use std::path::Path;

use crate::kinds::graph::{OpenError, PQ_CODES_FILE, PQ_FILE};
use crate::kinds::ivf::file::FILE_NAME;
use crate::kinds::ivf::IvfVectorLayout;
use crate::kinds::plan::{payload_bytes as payload, MemoryPlan, PlanError, PlanItem};

/// Plans the IVF index in `dir` (reading `vectors`, its vector file) within `budget`;
/// `fastscan`: RaBitQ codes would also be copied into FastScan blocks by list (the CPU
/// backend with `fastscan` on).
pub fn plan(
    dir: &Path,
    vectors: IvfVectorLayout,
    budget: u64,
    threads: usize,
    fastscan: bool,
) -> Result<Result<MemoryPlan, PlanError>, OpenError> {
    // (The outer error: the files; the inner: the budget.)
    let table =
        crate::kinds::slot_file::SlotFile::open(&dir.join(vectors.file_name()))?.heap_bytes();
    let mut items = vec![
        PlanItem {
            name: "ivf_lists",
            // The file's lists widen to 8-byte offsets in memory: at most twice the payload.
            bytes: 2 * payload(dir, FILE_NAME),
            required: true,
            detail: "centroids, their graph and the posting lists".into(),
        },
        PlanItem {
            name: "pq_codebooks",
            bytes: 2 * payload(dir, PQ_FILE),
            required: true,
            detail: "in two layouts".into(),
        },
        PlanItem {
            name: "pq_codes",
            bytes: payload(dir, PQ_CODES_FILE),
            required: true,
            detail: "every vector's code".into(),
        },
        PlanItem {
            name: "vector_table",
            bytes: table,
            required: true,
            detail: "the vector file's slot table and page checksums".into(),
        },
        PlanItem {
            name: "search",
            // Per thread: the filter stage's candidates and a batch of vector pages.
            bytes: threads as u64 * (1 << 20),
            required: true,
            detail: format!("{threads} thread(s)"),
        },
    ];
    if fastscan {
        let q = crate::quant::Quantiser::load(&dir.join(PQ_FILE))?;
        if q.as_rabitq().is_some() {
            let meta = crate::kinds::ivf::file::IvfMeta::load(&dir.join(FILE_NAME))?;
            let lens = (0..meta.nlist() as u32).map(|l| meta.list(l).len());
            items.push(PlanItem {
                name: "fastscan_lists",
                bytes: crate::quant::rabitq::fastscan::BlockLists::bytes_for(lens, q.m()),
                required: true,
                detail: "RaBitQ codes copied into FastScan blocks by posting list (--no-fastscan \
                         drops them)"
                    .into(),
            });
        }
    }
    let attrs = payload(dir, crate::filter::file::FILE_NAME);
    items.extend(PlanItem::attrs(attrs));
    Ok(MemoryPlan::required_only(
        budget,
        items,
        vec![
            "an IVF index keeps what it searches with in memory and has no cache: a larger \
             budget buys nothing more"
                .into(),
        ],
    ))
}
