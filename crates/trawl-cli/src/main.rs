//! The `trawl` command-line tool.

use anyhow::Result;
use clap::Parser;

/// trawl: disk-resident approximate nearest neighbour search.
#[derive(Debug, Parser)]
#[command(name = "trawl", version, about)]
struct Cli {}

fn main() -> Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
