//! Writing the log: appending batches of records (group commit) and replacing the whole log
//! atomically ([`LogWriter::create`], [`checkpoint`]).

use std::fs::{self, File};
use std::io;
use std::ops::RangeInclusive;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::{encode_batch, encode_header};
use super::{file_err, LogContents, LogOp, LogRecord, WalError, HEADER_LEN};

/// Appends records to a log: made by [`LogWriter::create`], [`LogWriter::open_append`] or
/// [`checkpoint`]. One writer per log: a second would interleave its records.
#[derive(Debug)]
pub struct LogWriter {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) next_seq: u64,
    pub(super) poisoned: bool,
}

fn tmp_path(path: &Path) -> Result<PathBuf, WalError> {
    let name = path
        .file_name()
        .ok_or_else(|| WalError::Invalid(format!("{}: not a file path", path.display())))?;
    let mut tmp = name.to_os_string();
    tmp.push(".tmp");
    Ok(path.with_file_name(tmp))
}

/// Makes the directory entry of `path` (a rename) durable.
fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Writes `contents` as the whole file `path` atomically (temporary file, sync, rename, sync
/// of the directory); returns the open file.
fn replace_atomically(path: &Path, contents: &[u8]) -> Result<File, WalError> {
    let tmp = tmp_path(path)?;
    let write = || -> io::Result<File> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all_at(contents, 0)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        Ok(file)
    };
    let file = write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        file_err(path)(e)
    })?;
    sync_parent(path).map_err(file_err(path))?;
    Ok(file)
}

impl LogWriter {
    /// Writes a new log at `path` holding only the header (replacing any file there,
    /// atomically), open for appending; its first record will be `base_seq + 1`.
    pub fn create(path: &Path, base_seq: u64) -> Result<LogWriter, WalError> {
        let next_seq = first_seq(path, base_seq)?;
        let file = replace_atomically(path, &encode_header(base_seq))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len: HEADER_LEN,
            next_seq,
            poisoned: false,
        })
    }

    /// Opens the log at `path`, just read into `contents` by [`read_log`](super::read_log),
    /// for appending: cuts the file to [`LogContents::valid_len`] (dropping a torn tail,
    /// synced) and continues the sequence after the last good record.
    pub fn open_append(path: &Path, contents: &LogContents) -> Result<LogWriter, WalError> {
        let n = contents.records.len() as u64;
        let consistent = contents.valid_len >= HEADER_LEN
            && contents
                .records
                .iter()
                .zip(1u64..)
                .all(|(r, i)| contents.base_seq.checked_add(i) == Some(r.seq));
        if !consistent {
            return Err(WalError::Invalid(format!(
                "{}: the log contents given are not a log read by read_log",
                path.display()
            )));
        }
        let next_seq = first_seq(path, contents.base_seq)?
            .checked_add(n)
            .ok_or_else(|| seq_overflow(path))?;
        let err = file_err(path);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(&err)?;
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut h, 0).map_err(&err)?;
        let len = file.metadata().map_err(&err)?.len();
        if h != encode_header(contents.base_seq) || len < contents.valid_len {
            return Err(WalError::Invalid(format!(
                "{}: the log changed since it was read (reread it)",
                path.display()
            )));
        }
        if len > contents.valid_len {
            file.set_len(contents.valid_len).map_err(&err)?;
            file.sync_data().map_err(&err)?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len: contents.valid_len,
            next_seq,
            poisoned: false,
        })
    }

    /// Appends `ops` as consecutive records with one write at the end of the file and, when
    /// `sync`, one `fdatasync` (group commit); returns the sequence numbers assigned (an empty
    /// range for no ops). Every operation is checked before anything is written. When the
    /// write or sync fails the file is cut back to its previous length (best effort) and the
    /// writer refuses further appends ([`WalError::Poisoned`]).
    pub fn append(&mut self, ops: &[LogOp], sync: bool) -> Result<RangeInclusive<u64>, WalError> {
        self.check_poisoned()?;
        let first = self.next_seq;
        let next = first
            .checked_add(ops.len() as u64)
            .ok_or_else(|| seq_overflow(&self.path))?;
        let buf = encode_batch(ops, first, &self.path)?;
        let written = (|| -> io::Result<()> {
            if !buf.is_empty() {
                self.file.write_all_at(&buf, self.len)?;
            }
            if sync {
                self.file.sync_data()?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            self.poisoned = true;
            if self.file.set_len(self.len).is_ok() {
                let _ = self.file.sync_data();
            }
            return Err(file_err(&self.path)(e));
        }
        self.len += buf.len() as u64;
        self.next_seq = next;
        // `first..=first - 1` is empty; `first >= 1` always (it follows base_seq).
        Ok(first..=next - 1)
    }

    /// Makes every record appended so far durable (`fdatasync`).
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.check_poisoned()?;
        self.file.sync_data().map_err(|e| {
            self.poisoned = true;
            file_err(&self.path)(e)
        })
    }

    /// Sequence number the next appended record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Bytes of the log (header and records).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log holds no records (only its header).
    pub fn is_empty(&self) -> bool {
        self.len <= HEADER_LEN
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_poisoned(&self) -> Result<(), WalError> {
        if self.poisoned {
            Err(WalError::Poisoned {
                path: self.path.clone(),
            })
        } else {
            Ok(())
        }
    }
}

fn seq_overflow(path: &Path) -> WalError {
    WalError::Invalid(format!(
        "{}: sequence numbers exhausted (past {})",
        path.display(),
        u64::MAX
    ))
}

/// The first sequence number after `base_seq`.
fn first_seq(path: &Path, base_seq: u64) -> Result<u64, WalError> {
    base_seq.checked_add(1).ok_or_else(|| seq_overflow(path))
}

/// Rewrites the log at `path` to hold only `keep` after a header of base `new_base_seq`,
/// atomically (temporary file, sync, rename, sync of the directory: a crash leaves the old or
/// the new log whole); returns a writer appending to the new log. `keep` must be numbered
/// `new_base_seq + 1`, `+ 2`, ... contiguously. Drop any writer of the old log first: its
/// appends would go to the replaced file.
pub fn checkpoint(
    path: &Path,
    new_base_seq: u64,
    keep: &[LogRecord],
) -> Result<LogWriter, WalError> {
    let first = first_seq(path, new_base_seq)?;
    for (i, r) in keep.iter().enumerate() {
        let want = first.checked_add(i as u64);
        if want != Some(r.seq) {
            return Err(WalError::Invalid(format!(
                "{}: checkpoint record {i} has sequence number {}, expected {} (records kept \
                 must follow the new base {new_base_seq} contiguously)",
                path.display(),
                r.seq,
                want.map_or_else(|| "none".to_string(), |w| w.to_string()),
            )));
        }
    }
    let next_seq = first
        .checked_add(keep.len() as u64)
        .ok_or_else(|| seq_overflow(path))?;
    let ops: Vec<LogOp> = keep.iter().map(|r| r.op.clone()).collect();
    let mut contents = encode_header(new_base_seq).to_vec();
    contents.extend_from_slice(&encode_batch(&ops, first, path)?);
    let file = replace_atomically(path, &contents)?;
    Ok(LogWriter {
        path: path.to_path_buf(),
        file,
        len: contents.len() as u64,
        next_seq,
        poisoned: false,
    })
}
