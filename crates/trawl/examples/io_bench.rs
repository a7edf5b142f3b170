//! Random 4 KiB O_DIRECT reads through each I/O engine (`trawl::io`), one thread.
//!
//! ```text
//! cargo run --release -p trawl --example io_bench -- [--dir target/io-bench] [--mib 1024]
//!     [--secs 3] [--reps 3] [--depths 1,32] [--keep 0]
//! ```
//!
//! Writes a file of `--mib` MiB in `--dir` (reused if it has that size), then for each engine
//! and queue depth keeps the queue full of random single-page reads for `--secs` seconds,
//! `--reps` times, and prints the median IOPS. Deletes the file afterwards unless `--keep 1`.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trawl::io::{EngineConfig, EngineKind, IoFile, ReadRequest, PAGE_BYTES};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dir = PathBuf::from("target/io-bench");
    let (mut mib, mut secs, mut reps, mut keep) = (1024u64, 3.0f64, 3usize, false);
    let mut depths = vec![1usize, 32];
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [flag, v] = pair else {
            return Err(format!("flag {pair:?} lacks a value").into());
        };
        match flag.as_str() {
            "--dir" => dir = PathBuf::from(v),
            "--mib" => mib = v.parse()?,
            "--secs" => secs = v.parse()?,
            "--reps" => reps = v.parse()?,
            "--keep" => keep = v != "0",
            "--depths" => {
                depths = v.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            other => return Err(format!("unknown flag {other}").into()),
        }
    }

    std::fs::create_dir_all(&dir)?;
    let path = dir.join("pages.bin");
    let bytes = mib << 20;
    if std::fs::metadata(&path).map(|m| m.len()).ok() != Some(bytes) {
        eprintln!("writing {mib} MiB to {}", path.display());
        let mut f = std::fs::File::create(&path)?;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut chunk = vec![0u8; 1 << 20];
        for _ in 0..mib {
            rng.fill(&mut chunk[..]);
            f.write_all(&chunk)?;
        }
        f.sync_all()?;
    }
    let file = IoFile::open(&path, true)?;
    let pages = file.pages();

    println!("engine  depth  median IOPS   (runs)");
    for kind in [EngineKind::Pread, EngineKind::Uring] {
        for &depth in &depths {
            let cfg = EngineConfig {
                depth,
                ..EngineConfig::default()
            };
            let mut runs = Vec::new();
            for rep in 0..reps {
                let mut engine = file.engine(kind, cfg)?;
                let mut rng = ChaCha8Rng::seed_from_u64(rep as u64 + 10);
                let mut out = Vec::with_capacity(depth);
                let mut done = 0u64;
                let start = Instant::now();
                let limit = Duration::from_secs_f64(secs);
                while start.elapsed() < limit {
                    while engine.can_submit() {
                        let first_page = rng.gen_range(0..pages);
                        engine.submit(
                            first_page,
                            ReadRequest {
                                first_page,
                                pages: 1,
                            },
                        )?;
                    }
                    out.clear();
                    engine.wait(1, &mut out)?;
                    for c in &out {
                        debug_assert_eq!(engine.buffer(c.slot).len(), PAGE_BYTES);
                        engine.release(c.slot);
                    }
                    done += out.len() as u64;
                }
                runs.push(done as f64 / start.elapsed().as_secs_f64());
            }
            let mut sorted = runs.clone();
            sorted.sort_by(f64::total_cmp);
            let name = file.engine(kind, cfg)?.info().name;
            let runs: Vec<String> = runs.iter().map(|r| format!("{r:.0}")).collect();
            println!(
                "{name:<7} {depth:>5}  {:>11.0}   ({})",
                sorted[sorted.len() / 2],
                runs.join(", ")
            );
        }
    }
    if !keep {
        std::fs::remove_file(&path)?;
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(())
}
