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
use crate::kinds::plan::{human, MemoryPlan, PlanError, PlanItem};

fn payload(dir: &Path, name: &str) -> u64 {
    std::fs::metadata(dir.join(name))
        .map(|m| {
            m.len()
                .saturating_sub(crate::dir::file::HEADER_BYTES as u64)
        })
        .unwrap_or(0)
}

/// Plans the IVF index in `dir` (reading `vectors`, its vector file) within `budget`.
pub fn plan(
    dir: &Path,
    vectors: IvfVectorLayout,
    budget: u64,
    threads: usize,
) -> Result<Result<MemoryPlan, PlanError>, OpenError> {
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
    let attrs = payload(dir, crate::filter::file::FILE_NAME);
    if attrs > 0 {
        items.push(PlanItem {
            name: "attrs",
            bytes: attrs,
            required: true,
            detail: "labels and fields filters read".into(),
        });
    }
    let minimum: u64 = items.iter().map(|i| i.bytes).sum();
    if minimum > budget {
        return Ok(Err(PlanError::BelowMinimum {
            budget,
            minimum,
            what: items
                .iter()
                .map(|i| format!("{} {}", i.name, human(i.bytes)))
                .collect::<Vec<_>>()
                .join(", "),
            hint: String::new(),
        }));
    }
    Ok(Ok(MemoryPlan {
        budget,
        minimum,
        items,
        notes: vec![
            "an IVF index keeps what it searches with in memory and has no cache: a larger \
             budget buys nothing more"
                .into(),
        ],
        ..MemoryPlan::default()
    }))
}
