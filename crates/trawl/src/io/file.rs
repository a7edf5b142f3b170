//! The index file an engine reads: opened once (optionally with O_DIRECT), shared by threads.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use crate::io::{
    AlignedBuf, EngineConfig, EngineKind, IoEngine, IoError, MemEngine, PreadEngine, ReadRequest,
    UringEngine, PAGE_BYTES,
};

/// A read-only file of whole pages, opened once and shared: cloning is cheap (the handle is
/// reference-counted) and each search thread makes its own engine ([`IoFile::engine`]) from it.
#[derive(Debug, Clone)]
pub struct IoFile {
    file: Arc<File>,
    /// Every file of the page space with its first page: one entry for a plain file, several
    /// for a concatenation ([`IoFile::concat`]).
    parts: Arc<[(Arc<File>, u64)]>,
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
        let file = Arc::new(file);
        Ok(Self {
            parts: Arc::from(vec![(Arc::clone(&file), 0u64)]),
            file,
            path: Arc::from(path),
            len: meta.len(),
            direct,
            resident: None,
        })
    }

    /// One page space over several files, one after the other: page `p` of `files[i]` is page
    /// `offset_i + p`, where `offset_i` is the pages of the files before it. A read never spans
    /// two files. Every file but the last must be whole pages; all must agree on O_DIRECT.
    /// Errors name the first file.
    pub fn concat(files: &[IoFile]) -> Result<Self, IoError> {
        let first = files
            .first()
            .ok_or_else(|| IoError::BadConfig("no files to concatenate".into()))?;
        let mut parts = Vec::new();
        let mut at = 0u64;
        for (i, f) in files.iter().enumerate() {
            if f.parts.len() != 1 || f.direct != first.direct || f.resident.is_some() {
                return Err(IoError::BadConfig(
                    "concatenate plain files opened alike".into(),
                ));
            }
            if i + 1 < files.len() && !f.len.is_multiple_of(PAGE_BYTES as u64) {
                return Err(IoError::BadConfig(format!(
                    "{} is not whole pages",
                    f.path.display()
                )));
            }
            parts.push((Arc::clone(&f.file), at));
            at += f.pages();
        }
        let last = files.last().map_or(0, |f| f.len % PAGE_BYTES as u64);
        Ok(Self {
            file: Arc::clone(&first.file),
            parts: Arc::from(parts),
            path: Arc::clone(&first.path),
            len: at * PAGE_BYTES as u64 + last,
            direct: first.direct,
            resident: None,
        })
    }

    /// Files of the page space (1 unless concatenated).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// The file holding pages `first .. first + pages`, its index, and the first page's offset
    /// in that file; [`IoError::OutOfRange`] when the range leaves the space or spans files.
    #[inline]
    pub(crate) fn part(&self, first: u64, pages: u64) -> Result<(usize, &File, u64), IoError> {
        let end = check_range(first, pages, self.pages())?;
        let i = self.parts.partition_point(|p| p.1 <= first).max(1) - 1;
        let (file, start) = &self.parts[i];
        let limit = self.parts.get(i + 1).map_or(self.pages(), |p| p.1);
        if end > limit {
            return Err(IoError::OutOfRange {
                first,
                end,
                file_pages: limit,
            });
        }
        Ok((i, file, (first - start) * PAGE_BYTES as u64))
    }

    /// The raw descriptors of the files, in order (for registering them with a ring).
    pub(crate) fn raw_fds(&self) -> Vec<i32> {
        use std::os::fd::AsRawFd;
        self.parts.iter().map(|p| p.0.as_raw_fd()).collect()
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
            // Chunks stop at the end of each concatenated file.
            let next_part = self
                .parts
                .iter()
                .map(|p| p.1 as usize)
                .find(|&start| start > at)
                .unwrap_or(pages);
            let n = CHUNK.min(pages - at).min(next_part - at);
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
        let (_, file, offset) = self.part(first_page, pages)?;
        pread_full(file, buf.as_mut_slice(), offset, self.direct)
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
