//! [`IndexLayout`]: which disk layout of the graph an index is opened with, its file and its
//! name.

use crate::kinds::graph::layout::packed;
#[cfg(doc)]
use crate::kinds::graph::DiskIndex;

/// Which disk layout of the graph a [`DiskIndex`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexLayout {
    /// The page-packed file as built: node `i`'s record in slot `i`.
    #[default]
    Packed,
    /// PageShuffle: records reordered so graph neighbours share pages.
    Shuffled,
    /// All-in-Storage: every record carries its neighbours' PQ codes; no codes in memory.
    AllInStorage,
    /// DecoupleVS: compressed neighbour lists and compressed vectors in two files
    /// ([`crate::kinds::graph::layout::decoupled`]); the page-packed file is not read.
    Decoupled,
    /// PageANN's page-node graph: a node is a page of similar vectors with one merged
    /// neighbour list ([`crate::kinds::graph::layout::pages`]).
    Pages,
}

impl IndexLayout {
    /// Every layout.
    pub const ALL: [Self; 5] = [
        Self::Packed,
        Self::Shuffled,
        Self::AllInStorage,
        Self::Decoupled,
        Self::Pages,
    ];

    /// File of the layout inside an index directory.
    pub fn file_name(&self) -> &'static str {
        match self {
            Self::Packed => packed::FILE_NAME,
            Self::Shuffled => "packed-shuffled.trawl",
            Self::AllInStorage => "packed-ais.trawl",
            Self::Decoupled => crate::kinds::graph::layout::decoupled::graph::FILE_NAME,
            Self::Pages => crate::kinds::graph::layout::pages::FILE_NAME,
        }
    }

    /// `packed`, `shuffle` or `ais`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Packed => "packed",
            Self::Shuffled => "shuffle",
            Self::AllInStorage => "ais",
            Self::Decoupled => "decoupled",
            Self::Pages => "pages",
        }
    }
}

impl std::str::FromStr for IndexLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "packed" => Ok(Self::Packed),
            "shuffle" | "shuffled" => Ok(Self::Shuffled),
            "ais" | "all-in-storage" => Ok(Self::AllInStorage),
            "decoupled" => Ok(Self::Decoupled),
            "pages" | "page-nodes" => Ok(Self::Pages),
            other => Err(format!(
                "unknown layout {other:?} (packed, shuffle, ais, decoupled, pages)"
            )),
        }
    }
}
