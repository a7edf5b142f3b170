//! [`IndexInfo`]: one description of an opened index — shape, layout, files, bytes on disk,
//! memory at search time, build parameters — that `trawl info`, `trawl bench`'s JSON and
//! Python's `Index.info()` all print.

use crate::dir::manifest::{KindName, Manifest};
use crate::kinds::graph::{DiskIndex, OpenError};
use crate::kinds::info::{DiskBytesInfo, IndexInfo};

impl DiskIndex {
    /// The description of this index ([`IndexInfo`]). Reads the manifest again (it may have
    /// been rewritten since the index was opened, by `trawl layout` for example).
    pub fn info(&self) -> Result<IndexInfo, OpenError> {
        let manifest = Manifest::load_if_present(self.dir())?;
        let layouts = match &manifest {
            Some(m) => m.layouts.clone(),
            None => crate::kinds::graph::IndexLayout::ALL
                .iter()
                .filter(|l| self.dir().join(l.file_name()).is_file())
                .map(|l| l.name().to_string())
                .collect(),
        };
        let db = self.disk_bytes();
        let mem = self.memory();
        Ok(IndexInfo {
            dir: self.dir().display().to_string(),
            kind: KindName::Graph,
            n: self.n(),
            dim: self.dim(),
            dtype: self.dtype().name().into(),
            metric: self.metric().name().into(),
            r: self.meta().r,
            pq_bytes: self.pq().m(),
            medoid: self.medoid(),
            layout: self.options().layout.name().into(),
            records_per_page: self.packed().map_or(0, |p| p.geometry().per_page),
            entry_nodes: self.entry().map_or(0, |e| e.len()),
            layouts,
            disk_bytes: DiskBytesInfo {
                files: db,
                total: db.total(),
            },
            memory_bytes: mem,
            memory_total_bytes: mem.total(),
            verify_pages: self.verify_pages(),
            manifest: manifest.is_some(),
            files: manifest.as_ref().map_or_else(Vec::new, |m| m.files.clone()),
            build_id: manifest
                .as_ref()
                .map_or_else(String::new, |m| m.build_id.clone()),
            recall: manifest.as_ref().and_then(|m| m.recall.clone()),
            build: manifest.and_then(|m| m.build),
            ivf: None,
            shards: None,
        })
    }
}
