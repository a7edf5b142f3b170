"""Exceptions raised by trawl.

Every error trawl reports is a :class:`Error`; most are also the built-in exception a Python
user would catch for that kind of problem:

* :class:`InvalidInputError` (also ``ValueError``): wrong shape, dimension or dtype, NaN or
  infinite values, ``k < 1`` or ``k`` larger than the index, invalid parameters, bad ids (a
  duplicate, one already present on insert or absent on delete, a negative one), a write
  through a read-only (or closed) ``Index``.
* :class:`IndexNotFoundError` (also ``FileNotFoundError``, an ``OSError``): the directory or
  vector file does not exist, or the directory is not an index.
* :class:`StorageError` (also ``OSError``): reading or writing failed (permissions, disk full,
  O_DIRECT refused by the file system), or another writer holds the index.
* :class:`CorruptIndexError`: a file is damaged, truncated, of the wrong kind, or from another
  build; rebuild the index.
* :class:`InternalError`: an invariant of trawl itself failed — a bug; please report it.

The class follows from the library's error kind (``invalid_input``, ``not_found``,
``corrupt``, ``storage``, ``internal``), not from the message.

The message is the library's own. A build stopped with Ctrl-C raises ``KeyboardInterrupt``.
"""


class Error(Exception):
    """Base class of every error trawl raises."""


class InvalidInputError(Error, ValueError):
    """Bad input: shape, dimension, dtype, non-finite values, ``k``, or parameters."""


class IndexNotFoundError(Error, FileNotFoundError):
    """The index directory (or input file) does not exist or is not an index."""


class StorageError(Error, OSError):
    """An I/O error while reading or writing the index."""


class CorruptIndexError(Error):
    """An index file is damaged, truncated, of the wrong kind, or from another build."""


class InternalError(Error):
    """A bug in trawl: an internal invariant did not hold. Please report it."""


__all__ = [
    "Error",
    "InvalidInputError",
    "IndexNotFoundError",
    "StorageError",
    "CorruptIndexError",
    "InternalError",
]
