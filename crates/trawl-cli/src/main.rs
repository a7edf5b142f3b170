//! The `trawl` command-line tool. Errors are reported with `anyhow` context chains; the library
//! underneath returns typed errors.

mod cmd_gen;
mod cmd_graph;
mod cmd_gt;
mod cmd_info;
mod cmd_quickstart;
mod runtime;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use trawl::{DType, Metric};

/// trawl: disk-resident approximate nearest neighbour search.
#[derive(Debug, Parser)]
#[command(name = "trawl", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Hide progress bars.
    #[arg(long, global = true)]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a seeded synthetic dataset (anisotropic Gaussian mixture) and held-out queries.
    Gen(cmd_gen::GenArgs),
    /// Compute exact k-nearest-neighbour ground truth (DiskANN/big-ann format).
    Gt(cmd_gt::GtArgs),
    /// Describe a vector, ground-truth or trawl file.
    Info {
        /// The file.
        file: PathBuf,
    },
    /// Build and search in-memory Vamana graphs.
    #[command(subcommand)]
    Graph(cmd_graph::GraphCommand),
    /// Generate data, build a graph, search it, and print recall, QPS and latency.
    Quickstart(cmd_quickstart::QuickstartArgs),
}

/// Options shared by commands that compute distances.
pub fn parse_metric(s: &str) -> Result<Metric, String> {
    s.parse()
}

/// Parses an element type name.
pub fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctl = if cli.quiet {
        trawl::progress::Control::silent()
    } else {
        trawl::progress::Control::with_progress()
    };
    let result = match cli.command {
        Command::Gen(args) => cmd_gen::run(&args, &ctl),
        Command::Gt(args) => cmd_gt::run(&args, &ctl),
        Command::Info { file } => cmd_info::run(&file),
        Command::Graph(cmd) => cmd_graph::run(cmd, &ctl),
        Command::Quickstart(args) => cmd_quickstart::run(&args, &ctl),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
