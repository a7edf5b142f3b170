//! The `trawl` command-line tool. Errors are reported with `anyhow` context chains; the library
//! underneath returns typed errors.

mod cmd_ablation;
mod cmd_accel_bench;
mod cmd_gen;
mod cmd_graph;
mod cmd_gt;
mod cmd_index;
mod cmd_info;
mod cmd_quickstart;
mod cmd_select_degree;
mod cmd_serve;
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
    /// Build a disk index in a directory: a graph index (PQ + Vamana graph + page-packed
    /// file), with --kind ivf an IVF index (FusionANNS), with --kind flat a flat index (exact
    /// search over the vectors on disk).
    Build(cmd_index::BuildArgs),
    /// Sharded indexes: `trawl shard build` partitions the data and builds one index per
    /// shard (search it with `trawl search` / `trawl bench`, --probe P).
    #[command(subcommand)]
    Shard(cmd_index::shard::ShardCommand),
    /// Search a disk index with one list size; write the results.
    Search(cmd_index::SearchArgs),
    /// Sweep list sizes over a disk index: recall, QPS, latency percentiles, pages and I/Os.
    Bench(cmd_index::BenchArgs),
    /// Print the open options and search parameters the search options resolve to on an
    /// index (the options test holds the CLI and Python to one resolution).
    #[command(hide = true)]
    Resolve(cmd_index::ResolveArgs),
    /// (Re)build the in-memory entry index (PipeANN's entry points, OctopusANN's MemGraph) of
    /// a disk index, uniformly sampled or by visit frequency.
    Entry(cmd_index::EntryArgs),
    /// Write other disk layouts of an index's graph: PageShuffle, All-in-Storage, the decoupled
    /// layout (DecoupleVS: compressed graph and vector files apart).
    Layout(cmd_index::LayoutArgs),
    /// Insert (or, with --upsert, replace) vectors into a disk index: logged and synced at
    /// once, searchable at once, written into the disk files by the next merge.
    Insert(cmd_index::InsertArgs),
    /// Delete vectors from a disk index by id (logged and synced; gone from searches at once).
    Delete(cmd_index::DeleteArgs),
    /// Fold the inserted and deleted vectors into the disk files (StreamingMerge).
    Merge(cmd_index::MergeArgs),
    /// Recommend a graph degree for the flash search on this machine (FlashANNS §4.3):
    /// profile random-link sample indexes of candidate degrees, balance per-step compute and
    /// read time.
    SelectDegree(cmd_select_degree::SelectDegreeArgs),
    /// Describe an index directory, a vector, ground-truth or trawl file.
    Info {
        /// The index directory or file (optional with --accel: then only the accelerator is
        /// described).
        #[arg(required_unless_present = "accel")]
        file: Option<PathBuf>,
        /// Open the filter-stage accelerator (cpu, gpu or auto; given alone: auto) and print
        /// what it runs on — the GPU adapter's name, driver and type, or the host CPU. With an
        /// IVF index directory, its accelerator is opened this way.
        #[arg(long, num_args = 0..=1, default_missing_value = "auto",
              value_parser = |s: &str| s.parse::<trawl::accel::AccelKind>())]
        accel: Option<trawl::accel::AccelKind>,
        /// Also read every page of an index and check its checksum.
        #[arg(long)]
        verify: bool,
        /// For an index directory: print its description (the library's `IndexInfo`) as JSON.
        #[arg(long)]
        json: bool,
        /// For an index directory: print what it would keep in memory within this budget
        /// (e.g. 512M, 2G), item by item, as `--memory-budget` plans it — reading only the
        /// files' headers. With --json, the plan as JSON.
        #[arg(long, value_parser = |s: &str| trawl::kinds::plan::parse_bytes(s))]
        plan: Option<u64>,
        /// With --plan: the layout asked for (packed, shuffle, ais, decoupled), or auto (the
        /// planner picks the one reading the fewest pages at the budget).
        #[arg(long, default_value = "packed", requires = "plan",
              value_parser = |s: &str| s.parse::<cmd_index::LayoutArg>())]
        layout: cmd_index::LayoutArg,
        /// With --plan: search threads and queries each keeps in flight.
        #[arg(long, default_value_t = 1, requires = "plan")]
        threads: usize,
        /// With --plan: queries each search thread keeps in flight.
        #[arg(long, default_value_t = 1, requires = "plan")]
        interleave: usize,
    },
    /// Serve indexes over HTTP: search, insert, upsert, delete and merge, with API keys,
    /// TLS, limits, a bounded queue, Prometheus metrics and a graceful shutdown on SIGTERM.
    Serve(cmd_serve::ServeArgs),
    /// Build and search in-memory Vamana graphs.
    #[command(subcommand)]
    Graph(cmd_graph::GraphCommand),
    /// Generate data, build a graph, search it, and print recall, QPS and latency.
    Quickstart(cmd_quickstart::QuickstartArgs),
    /// Measure the accelerators alone on random inputs — the IVF filter stage and the flash
    /// search step, CPU backend against GPU backend across batch sizes — and check that the
    /// GPU's outputs equal the CPU's.
    AccelBench(cmd_accel_bench::AccelBenchArgs),
}

/// Options shared by commands that compute distances.
pub fn parse_metric(s: &str) -> Result<Metric, String> {
    s.parse()
}

/// The most threads a command takes.
pub const MAX_THREADS: usize = 1024;

/// Parses a thread count (0 = one per core for the commands that say so), at most
/// [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|e| format!("{s:?} is not a thread count: {e}"))?;
    if n > MAX_THREADS {
        return Err(format!("{n} threads is more than {MAX_THREADS}"));
    }
    Ok(n)
}

/// Parses an element type name.
pub fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse()
}

fn main() -> ExitCode {
    // Output piped into a reader that stops early (`trawl info … | head`) ends the process
    // quietly, as for other command-line tools, instead of a panic on the failed print.
    // SAFETY: restores the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let ctl = if cli.quiet {
        trawl::progress::Control::silent()
    } else {
        trawl::progress::Control::with_progress()
    };
    // The service handles SIGTERM and Ctrl-C itself (a graceful shutdown, exit 0).
    let interrupted = if matches!(cli.command, Command::Serve(_)) {
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false))
    } else {
        interrupt::install()
    };
    let ctl = ctl.with_cancel_flag(std::sync::Arc::clone(&interrupted));
    let result = match cli.command {
        Command::Gen(args) => cmd_gen::run(&args, &ctl),
        Command::Gt(args) => cmd_gt::run(&args, &ctl),
        Command::Build(args) => cmd_index::build(&args, &ctl).map(|_| ()),
        Command::Shard(cmd) => cmd_index::shard::run(&cmd, &ctl),
        Command::Search(args) => cmd_index::search(&args, &ctl),
        Command::Resolve(args) => cmd_index::resolve(&args, &ctl),
        Command::Bench(args) if args.ablation => cmd_ablation::run(&args, &ctl),
        Command::Bench(args) if args.radius.is_some() => {
            cmd_index::bench_range(&args, args.radius.unwrap_or_default(), &ctl).map(|_| ())
        }
        Command::Bench(args) => cmd_index::bench(&args, &ctl).map(|(rows, info)| {
            cmd_index::print_bench(&rows, info["k"].as_u64().unwrap_or(10) as usize);
            if args.opts.time_parts {
                cmd_index::print_parts(&rows);
            }
        }),
        Command::Entry(args) => cmd_index::entry(&args, &ctl),
        Command::Layout(args) => cmd_index::layout(&args, &ctl),
        Command::Insert(args) => cmd_index::insert(&args, &ctl),
        Command::Delete(args) => cmd_index::delete(&args, &ctl),
        Command::Merge(args) => cmd_index::merge(&args, &ctl),
        Command::SelectDegree(args) => cmd_select_degree::run(&args, &ctl),
        Command::Info {
            file: Some(file),
            plan: Some(budget),
            json,
            layout,
            threads,
            interleave,
            ..
        } => cmd_info::plan(&file, budget, layout, threads, interleave, json),
        Command::Info {
            file,
            verify,
            json,
            accel,
            ..
        } => cmd_info::run(file.as_deref(), verify, json, accel, &ctl),
        Command::Graph(cmd) => cmd_graph::run(cmd, &ctl),
        Command::Quickstart(args) => cmd_quickstart::run(&args, &ctl),
        Command::AccelBench(args) => cmd_accel_bench::run(&args),
        Command::Serve(args) => cmd_serve::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
                // 128 + SIGINT, as a shell reports an interrupted command.
                return ExitCode::from(130);
            }
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C and SIGTERM cancel the running command through its [`trawl::progress::Control`]:
/// it stops at its next check and unwinds, so its temporary files and staging directories are
/// removed and an index it was writing stays as it was. A command that does not stop within
/// [`interrupt::GRACE`] (one that never checks) is ended then, as is any command at a second
/// signal.
mod interrupt {
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// How long a cancelled command may take to unwind.
    pub const GRACE: Duration = Duration::from_secs(5);

    static FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());
    /// Write end of the pipe that wakes the watchdog thread.
    static WAKE: AtomicI32 = AtomicI32::new(-1);

    extern "C" fn on_signal(_: libc::c_int) {
        let p = FLAG.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: `p` comes from `Arc::into_raw` of an Arc that is never released.
            unsafe { (*p).store(true, Ordering::SeqCst) };
        }
        const MSG: &[u8] = b"\ninterrupted: stopping (again to stop at once)\n";
        // SAFETY: write(2) is async-signal-safe; MSG is a static buffer.
        unsafe { libc::write(2, MSG.as_ptr().cast(), MSG.len()) };
        let fd = WAKE.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: as above, one static byte to the watchdog's pipe.
            unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
        }
    }

    /// Installs the handler and its watchdog; returns the flag it sets.
    pub fn install() -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        FLAG.store(
            Arc::into_raw(Arc::clone(&flag)) as *mut AtomicBool,
            Ordering::SeqCst,
        );
        let mut fds = [-1i32; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } == 0 {
            let read_fd = fds[0];
            WAKE.store(fds[1], Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut b = [0u8; 1];
                // SAFETY: reads one byte into a local buffer from the pipe this thread owns.
                let got = unsafe { libc::read(read_fd, b.as_mut_ptr().cast(), 1) };
                if got == 1 {
                    std::thread::sleep(GRACE);
                    // SAFETY: ends the process without unwinding (the command did not stop).
                    unsafe { libc::_exit(130) };
                }
            });
        }
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: an all-zero sigaction is a valid value (no handler, no flags).
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_signal as *const () as usize;
            // SA_RESETHAND restores the default action, so a second signal terminates.
            sa.sa_flags = libc::SA_RESETHAND;
            // SAFETY: `sa.sa_mask` is a valid sigset_t owned by this frame.
            unsafe { libc::sigemptyset(&mut sa.sa_mask) };
            // SAFETY: the handler only stores to atomics and writes (async-signal-safe);
            // `sa` lives through the call.
            unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        }
        flag
    }
}

/// The error and its causes, `: `-separated, leaving out a cause whose text the message
/// already holds (library errors often print their source inside their own message).
fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
