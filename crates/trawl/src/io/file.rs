//! The index file an engine reads: opened once (optionally with O_DIRECT), shared by threads.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use super::{
    AlignedBuf, EngineConfig, EngineKind, IoEngine, IoError, MemEngine, PreadEngine, ReadRequest,
    UringEngine, PAGE_BYTES,
};

/// A read-only file of whole pages, opened once and shared: cloning is cheap (the handle is
/// reference-counted) and each search thread makes its own engine ([`IoFile::engine`]) from it.
#[derive(Debug, Clone)]
pub struct IoFile {
    file: Arc<File>,
    path: Arc<Path>,
    len: u64,
    direct: bool,
    /// The whole pages of the file, when loaded for the memory engine.
    resident: Option<Arc<AlignedBuf>>,
}

impl IoFile {
    /// Opens `path` read-only, with O_DIRECT when `direct` (reads then bypass the page cache).
    ///
    /// Errors: [`IoError::DirectUnsupported`] when the file system refuses O_DIRECT (EINVAL),
    /// [`IoError::Open`] for any other failure (missing file, permissions, a directory).
    pub fn open(path: &Path, direct: bool) -> Result<Self, IoError> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        if direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(path).map_err(|source| {
            if direct && source.raw_os_error() == Some(libc::EINVAL) {
                IoError::DirectUnsupported {
                    path: path.to_path_buf(),
                    source,
                }
            } else {
                IoError::Open {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let open_err = |source| IoError::Open {
            path: path.to_path_buf(),
            source,
        };
        let meta = file.metadata().map_err(open_err)?;
        if meta.is_dir() {
            return Err(open_err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            )));
        }
        Ok(Self {
            file: Arc::new(file),
            path: Arc::from(path),
            len: meta.len(),
            direct,
            resident: None,
        })
    }

    /// Reads every whole page of the file into memory, for [`EngineKind::Memory`] engines
    /// (shared by all of them).
    pub fn load_resident(&mut self) -> Result<(), IoError> {
        if self.resident.is_some() {
            return Ok(());
        }
        let pages = usize::try_from(self.pages())
            .map_err(|_| IoError::BadConfig("file too large for memory".into()))?;
        let mut all = AlignedBuf::with_pages(pages)?;
        const CHUNK: usize = 256;
        let mut chunk = AlignedBuf::with_pages(CHUNK.min(pages.max(1)))?;
        let mut at = 0usize;
        while at < pages {
            let n = CHUNK.min(pages - at);
            if chunk.pages() != n {
                chunk = AlignedBuf::with_pages(n)?;
            }
            self.read_pages(at as u64, &mut chunk)?;
            all.as_mut_slice()[at * PAGE_BYTES..(at + n) * PAGE_BYTES]
                .copy_from_slice(chunk.as_slice());
            at += n;
        }
        self.resident = Some(Arc::new(all));
        Ok(())
    }

    /// The resident copy, when loaded.
    pub(crate) fn resident(&self) -> Option<Arc<AlignedBuf>> {
        self.resident.clone()
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Length in bytes when the file was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whole pages in the file (`len / PAGE_BYTES`, rounded down).
    pub fn pages(&self) -> u64 {
        self.len / PAGE_BYTES as u64
    }

    /// Whether the file was opened with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    pub(crate) fn shared_file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// Makes an engine of `kind` reading this file. [`EngineKind::Auto`] tries io_uring and
    /// falls back to pread where io_uring is unavailable ([`IoError::UringUnavailable`]).
    pub fn engine(
        &self,
        kind: EngineKind,
        cfg: EngineConfig,
    ) -> Result<Box<dyn IoEngine>, IoError> {
        match kind {
            EngineKind::Pread => Ok(Box::new(PreadEngine::new(self, cfg)?)),
            EngineKind::Memory => Ok(Box::new(MemEngine::new(self, cfg)?)),
            EngineKind::Simulated(model) => Ok(Box::new(MemEngine::with_model(self, cfg, model)?)),
            EngineKind::Uring => Ok(Box::new(UringEngine::new(self, cfg)?)),
            EngineKind::Auto => match UringEngine::new(self, cfg) {
                Ok(e) => Ok(Box::new(e)),
                Err(IoError::UringUnavailable(_)) => Ok(Box::new(PreadEngine::new(self, cfg)?)),
                Err(e) => Err(e),
            },
        }
    }

    /// Reads `buf.len() / PAGE_BYTES` pages starting at page `first_page` into all of `buf`,
    /// synchronously.
    ///
    /// Errors: [`IoError::OutOfRange`] when the pages are not all inside [`IoFile::pages`],
    /// [`IoError::ShortRead`] when the file ends early (it shrank), [`IoError::Read`] when the
    /// OS fails the read.
    pub fn read_pages(&self, first_page: u64, buf: &mut AlignedBuf) -> Result<(), IoError> {
        let pages = buf.pages() as u64;
        let end = check_range(first_page, pages, self.pages())?;
        debug_assert!(end <= self.pages());
        pread_full(
            &self.file,
            buf.as_mut_slice(),
            first_page * PAGE_BYTES as u64,
            self.direct,
        )
    }
}

/// The slot a request would take (the last of `free`), after checking the request: a free
/// slot ([`IoError::QueueFull`]), `1 ≤ pages ≤ max_pages` ([`IoError::BadLength`]) and pages
/// inside the file ([`IoError::OutOfRange`]). Shared by every engine's `submit`.
pub(crate) fn check_request(
    free: &[u32],
    depth: usize,
    req: &ReadRequest,
    max_pages: usize,
    file_pages: u64,
) -> Result<u32, IoError> {
    let Some(&slot) = free.last() else {
        return Err(IoError::QueueFull { depth });
    };
    if req.pages == 0 || req.pages as usize > max_pages {
        return Err(IoError::BadLength {
            pages: req.pages,
            max: max_pages,
        });
    }
    check_range(req.first_page, u64::from(req.pages), file_pages)?;
    Ok(slot)
}

/// `first + pages` when the pages `[first, first + pages)` lie inside a file of `file_pages`
/// pages, else [`IoError::OutOfRange`].
pub(crate) fn check_range(first: u64, pages: u64, file_pages: u64) -> Result<u64, IoError> {
    match first.checked_add(pages) {
        Some(end) if end <= file_pages => Ok(end),
        end => Err(IoError::OutOfRange {
            first,
            end: end.unwrap_or(u64::MAX),
            file_pages,
        }),
    }
}

/// Fills all of `buf` from `offset` with `pread`, looping on partial reads and EINTR.
///
/// End of file before `buf` is full is [`IoError::ShortRead`]. With O_DIRECT a partial read
/// that is not a whole number of pages can only end at the end of the file (and a further read
/// at that unaligned offset would be refused), so it is a short read at once.
pub(crate) fn pread_full(
    file: &File,
    buf: &mut [u8],
    offset: u64,
    direct: bool,
) -> Result<(), IoError> {
    let expected = buf.len();
    let mut got = 0usize;
    while got < expected {
        let at = offset + got as u64;
        match file.read_at(&mut buf[got..], at) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if direct && got < expected && !got.is_multiple_of(PAGE_BYTES) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(IoError::Read { offset: at, source }),
        }
    }
    if got < expected {
        return Err(IoError::ShortRead {
            offset,
            expected,
            got,
        });
    }
    Ok(())
}
