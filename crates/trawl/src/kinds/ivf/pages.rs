//! The IVF vector file as the re-rank stage's vector source
//! ([`crate::search::rerank::VectorSource`]).

use std::path::Path;

use crate::io::PAGE_BYTES;
use crate::kinds::slot_file::SlotFile;
use crate::search::rerank::VectorSource;
use crate::search::SearchError;

/// The vector file of an opened IVF index, read by its re-rank: a vector is read with the
/// pages it spans, and the ids on a page are known (page-mate scoring).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IvfPages<'a> {
    pub(crate) file: &'a SlotFile,
    /// The file, for error messages.
    pub(crate) path: &'a Path,
    /// Check every page read against its stored checksum.
    pub(crate) verify: bool,
}

impl VectorSource for IvfPages<'_> {
    #[inline]
    fn vector_page(&self, id: u32, _key: u32) -> u64 {
        self.file.locate(id).0
    }
    #[inline]
    fn locate(&self, id: u32, _key: u32) -> (u64, usize) {
        self.file.locate(id)
    }
    #[inline]
    fn pages_per_read(&self) -> u32 {
        self.file.geometry().pages_per_vector as u32
    }
    #[inline]
    fn vectors_on_page(&self, page: u64) -> u64 {
        self.file.vectors_on_page(page)
    }
    fn check_read(&self, page: u64, bytes: &[u8]) -> Result<(), SearchError> {
        if !self.verify {
            return Ok(());
        }
        for (j, p) in bytes.chunks(PAGE_BYTES).enumerate() {
            let at = page + j as u64;
            if Some(crc32fast::hash(p)) != self.file.page_crc(at) {
                return Err(SearchError::Corrupt {
                    path: self.path.to_path_buf(),
                    page: at,
                    detail: "checksum mismatch".into(),
                });
            }
        }
        Ok(())
    }
    #[inline]
    fn decode_vector(
        &self,
        id: u32,
        _key: u32,
        page: u64,
        bytes: &[u8],
        out: &mut [u8],
    ) -> Result<(), SearchError> {
        let (at, off) = self.file.locate(id);
        let src = bytes.get(off..off + out.len());
        match src {
            Some(src) if at == page => {
                out.copy_from_slice(src);
                Ok(())
            }
            _ => Err(SearchError::Internal(format!(
                "vector {id} is not in the read of page {page}"
            ))),
        }
    }
    #[inline]
    fn decode_at(
        &self,
        id: u32,
        _key: u32,
        page: u64,
        at: usize,
        bytes: &[u8],
        out: &mut [u8],
    ) -> Result<(), SearchError> {
        match bytes.get(at..at + out.len()) {
            Some(src) => {
                out.copy_from_slice(src);
                Ok(())
            }
            None => Err(SearchError::Internal(format!(
                "vector {id} at byte {at} is past the read of page {page}"
            ))),
        }
    }
    #[inline]
    fn ids_on_page(&self, page: u64) -> &[u32] {
        self.file.ids_on_page(page)
    }
}
