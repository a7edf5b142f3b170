//! Building the entry index (MemGraph) of an index that exists on disk: its nodes chosen
//! uniformly or by visit frequency, their vectors read from the index file.

use std::time::Instant;

use crate::data::Matrix;
use crate::kernels::{DType, Element};
use crate::kinds::graph::search::entry::{self, EntryIndex, EntryParams, EntrySampling};
use crate::kinds::graph::search::CachePolicy;
use crate::kinds::graph::{DiskIndex, IndexBuildError};
use crate::progress::Control;

/// What [`DiskIndex::rebuild_entry`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct EntryReport {
    /// Nodes in the entry index.
    pub nodes: usize,
    /// Bytes of `entry.trawl`.
    pub file_bytes: u64,
    /// Bytes the entry index keeps in memory.
    pub memory_bytes: u64,
    /// Pages read to choose the nodes and fetch their vectors.
    pub pages_read: u64,
    /// Seconds of the whole build.
    pub secs: f64,
}

impl DiskIndex {
    /// Builds an entry index over this index's nodes: `params.ratio` of them, sampled
    /// uniformly (seeded) or chosen as the nodes most read by beam searches of sample indexed
    /// vectors (the cache's frequency count: `max(2000, 4m)` searches at L = 15, W = 4, from
    /// the medoid), then their vectors read from the index file. Returns the index and the
    /// pages read.
    pub fn build_entry(
        &self,
        params: &EntryParams,
        threads: usize,
        ctl: &Control,
    ) -> Result<(EntryIndex, u64), IndexBuildError> {
        let n = self.n();
        let m = params.sample_size(n)?;
        let (ids, mut pages) = match params.sampling {
            EntrySampling::Uniform => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(params.seed);
                let ids = rand::seq::index::sample(&mut rng, n, m)
                    .into_iter()
                    .map(|i| i as u32)
                    .collect();
                (ids, 0)
            }
            EntrySampling::Frequency => {
                let CachePolicy::Frequency {
                    sample_queries,
                    l,
                    beam_width,
                } = CachePolicy::default()
                else {
                    unreachable!("the default cache policy counts visits")
                };
                self.frequent_nodes(m, sample_queries, l, beam_width, threads, ctl)?
            }
        };
        let vb = self.packed_file()?.geometry().vector_bytes;
        let mut pos = std::collections::HashMap::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            pos.insert(id, i);
        }
        let mut bytes = vec![0u8; ids.len() * vb];
        pages += self.read_records(&ids, |id, rec| {
            let i = pos[&id];
            bytes[i * vb..(i + 1) * vb].copy_from_slice(&rec[..vb]);
        })?;
        let e = match self.dtype() {
            DType::F32 => self.entry_from_bytes::<f32>(ids, &bytes, params, ctl)?,
            DType::U8 => self.entry_from_bytes::<u8>(ids, &bytes, params, ctl)?,
            DType::I8 => self.entry_from_bytes::<i8>(ids, &bytes, params, ctl)?,
        };
        Ok((e, pages))
    }

    fn entry_from_bytes<T: Element>(
        &self,
        ids: Vec<u32>,
        bytes: &[u8],
        params: &EntryParams,
        ctl: &Control,
    ) -> Result<EntryIndex, IndexBuildError> {
        let rows: Vec<T> = bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(bytemuck::pod_read_unaligned::<T>)
            .collect();
        let rows = Matrix::from_vec(rows, self.dim()).ok_or(crate::vamana::BuildError::Empty)?;
        Ok(EntryIndex::from_sample(
            ids,
            rows,
            self.metric(),
            params,
            ctl,
        )?)
    }

    /// Builds an entry index ([`DiskIndex::build_entry`]), writes it as the index's
    /// `entry.trawl` (replacing the old one atomically) and searches with it from now on.
    pub fn rebuild_entry(
        &mut self,
        params: &EntryParams,
        threads: usize,
        ctl: &Control,
    ) -> Result<EntryReport, IndexBuildError> {
        let t0 = Instant::now();
        params.validate()?;
        let txn = self.begin_txn()?;
        let (e, pages_read) = self.build_entry(params, threads, ctl)?;
        let path = txn.path(entry::FILE_NAME);
        let meta = *self.packed_file()?.meta();
        let file_bytes = e.save(&path, meta.n, meta.pq_codes_crc)?;
        // The hot-node order too (the operation that refreshes what open-time choices read).
        let hot = self.fresh_hot_order(threads, ctl)?;
        hot.save(
            &txn.path(crate::kinds::graph::hot::FILE_NAME),
            meta.n,
            meta.pq_codes_crc,
        )?;
        let manifest = crate::kinds::graph::files::with_additions(self.dir(), txn.staging())?;
        txn.commit(&manifest)?;
        let report = EntryReport {
            nodes: e.len(),
            file_bytes,
            memory_bytes: e.heap_bytes() as u64,
            pages_read,
            secs: t0.elapsed().as_secs_f64(),
        };
        self.entry = Some(e);
        Ok(report)
    }
}

use rand::SeedableRng;
