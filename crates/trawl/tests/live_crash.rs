//! Crash consistency of streaming updates: a child process (this test binary, re-run with
//! `TRAWL_CRASH_CHILD` set) applies a seeded mix of inserts, deletes, upserts and merges to one
//! index and prints each operation before it starts and once it is acknowledged; the parent
//! kills it with SIGKILL at a random moment — during the operations, or at a random point of a
//! merge (before or after its manifest rename) — and then checks, on the same evolving index:
//! it opens, `verify_index` passes, every acknowledged operation is visible (each live vector
//! is found by searching for it; no deleted id comes back), the operation in flight is applied
//! whole or not at all, and `len` is the model's. 10 kills here (`TRAWL_CRASH_KILLS=50` for the
//! full run). The merges take deletes out of the graph in place (both ways of finding the
//! in-neighbours) or by consolidation, in turn.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use trawl::data::Matrix;
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex};
use trawl::kinds::graph::{
    build_index, verify_index, DiskIndex, IndexLayout, IndexParams, OpenOptions,
};
use trawl::progress::Control;
use trawl::Metric;

const DIM: usize = 16;
const BASE: u64 = 1_500;

/// The vector of `id` in version `v` (0 = as inserted, 1 = after an upsert): a hash of both,
/// so the parent can recompute every vector.
fn vector(id: u64, v: u64) -> Vec<f32> {
    let mut x = id
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(v.wrapping_mul(0xD6E8_FEB8_6659_FD93))
        | 1;
    (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

thread_local! {
    /// The layout this test (and its child) opens the index on: the decoupled one makes its
    /// merges decoupled merges (graph file rewritten, vector segments, garbage collection).
    static LAYOUT: std::cell::Cell<IndexLayout> = const { std::cell::Cell::new(IndexLayout::Packed) };
}

fn opts_packed() -> OpenOptions {
    OpenOptions {
        direct: false,
        ..OpenOptions::default()
    }
}

fn opts() -> OpenOptions {
    OpenOptions {
        direct: false,
        layout: LAYOUT.with(|l| l.get()),
        ..OpenOptions::default()
    }
}

/// The child: reads the live ids (`id version` lines) from `TRAWL_CRASH_STATE`, then applies
/// operations until killed (or after 400).
fn child(dir: &Path, state: &Path, seed: u64, next_id: u64) {
    let ix = LiveIndex::open(dir, opts(), Access::ReadWrite).unwrap();
    let mut live: Vec<u64> = std::fs::read_to_string(state)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let mut rng = Rng(seed | 1);
    let mut next = next_id;
    let out = std::io::stdout();
    let say = |line: String| {
        let mut o = out.lock();
        writeln!(o, "{line}").unwrap();
        o.flush().unwrap();
    };
    for n in 0..400u64 {
        let r = rng.below(100);
        if r < 45 || live.len() < 50 {
            let m = 1 + rng.below(40);
            let ids: Vec<u64> = (next..next + m).collect();
            next += m;
            let rows: Vec<f32> = ids.iter().flat_map(|&i| vector(i, 0)).collect();
            say(format!("begin {n} insert {}", join(&ids)));
            ix.insert(Some(&ids), &rows).unwrap();
            say(format!("ack {n}"));
            live.extend(ids);
        } else if r < 70 {
            let m = 1 + rng.below(20);
            let mut ids = Vec::new();
            for _ in 0..m {
                let k = rng.below(live.len() as u64) as usize;
                ids.push(live.swap_remove(k));
            }
            say(format!("begin {n} delete {}", join(&ids)));
            ix.delete(&ids).unwrap();
            say(format!("ack {n}"));
        } else if r < 88 {
            let m = 1 + rng.below(8);
            let mut ids: Vec<u64> = (0..m)
                .map(|_| live[rng.below(live.len() as u64) as usize])
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let rows: Vec<f32> = ids.iter().flat_map(|&i| vector(i, 1)).collect();
            say(format!("begin {n} upsert {}", join(&ids)));
            ix.upsert(&ids, &rows).unwrap();
            say(format!("ack {n}"));
        } else {
            let seq = ix.disk().manifest().and_then(|m| m.log_seq).unwrap_or(0);
            say(format!("begin {n} merge {seq}"));
            // Every way of taking deletes out of the graph: in place (by search, or with the
            // exact in-neighbours) and by consolidation, in turn.
            use trawl::kinds::graph::updates::merge::{DeleteRepair, InNeighbours, InPlaceParams};
            let deletes = match n % 3 {
                0 => DeleteRepair::default(),
                1 => DeleteRepair::InPlace(InPlaceParams {
                    in_neighbours: InNeighbours::Search { l: 0 },
                    ..InPlaceParams::default()
                }),
                _ => DeleteRepair::Consolidate,
            };
            let o = trawl::kinds::graph::updates::live::MergeOptions {
                threads: 1,
                deletes,
                ..Default::default()
            };
            ix.merge_with(&o, &Control::silent()).unwrap();
            say(format!("ack {n}"));
        }
    }
    say("done".into());
}

fn join(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u64>),
    Delete(Vec<u64>),
    Upsert(Vec<u64>),
    /// With the manifest's log sequence number when the merge began.
    Merge(u64),
}

fn parse_op(words: &[&str]) -> Op {
    let ids = || -> Vec<u64> { words[1].split(',').map(|x| x.parse().unwrap()).collect() };
    match words[0] {
        "insert" => Op::Insert(ids()),
        "delete" => Op::Delete(ids()),
        "upsert" => Op::Upsert(ids()),
        _ => Op::Merge(words[1].parse().unwrap()),
    }
}

/// Live ids → vector version.
type Model = HashMap<u64, u64>;

fn apply(model: &mut Model, op: &Op) {
    match op {
        Op::Insert(ids) => ids.iter().for_each(|&i| {
            model.insert(i, 0);
        }),
        Op::Delete(ids) => ids.iter().for_each(|i| {
            model.remove(i);
        }),
        Op::Upsert(ids) => ids.iter().for_each(|&i| {
            model.insert(i, 1);
        }),
        Op::Merge(_) => {}
    }
}

/// Checks the index against the model (after deciding the operation in flight); returns how
/// the kill landed, from what the directory shows.
fn check(dir: &Path, model: &mut Model, deleted: &mut HashSet<u64>, in_flight: Option<Op>) {
    let ix = LiveIndex::open(dir, opts(), Access::ReadWrite)
        .unwrap_or_else(|e| panic!("the index does not open after a kill: {e}"));
    // The operation in flight: whole or not at all.
    if let Some(op) = in_flight {
        let applied = match &op {
            Op::Insert(ids) => {
                let n = ids.iter().filter(|&&i| ix.contains(i)).count();
                assert!(n == 0 || n == ids.len(), "{n} of {} inserted", ids.len());
                n > 0
            }
            Op::Delete(ids) => {
                let n = ids.iter().filter(|&&i| !ix.contains(i)).count();
                assert!(n == 0 || n == ids.len(), "{n} of {} deleted", ids.len());
                n > 0
            }
            Op::Upsert(ids) => {
                // Applied iff the first id's vector is the new one.
                let q = vector(ids[0], 1);
                let top = ix
                    .search_rows(&q, &SearchParams::beam(1, 64, 4), 1, 1)
                    .unwrap();
                let new = top.ids[0] == ids[0] && top.dists[0] == 0.0;
                for &i in &ids[1..] {
                    let t = ix
                        .search_rows(&vector(i, 1), &SearchParams::beam(1, 64, 4), 1, 1)
                        .unwrap();
                    assert_eq!(
                        t.ids[0] == i && t.dists[0] == 0.0,
                        new,
                        "upsert half applied"
                    );
                }
                new
            }
            Op::Merge(_) => false,
        };
        if applied {
            if let Op::Delete(ids) = &op {
                deleted.extend(ids.iter().copied());
            }
            apply(model, &op);
        }
    }
    assert_eq!(ix.len(), model.len(), "live vectors");
    // Every live vector is found as its own nearest neighbour, under its id.
    let ids: Vec<u64> = model.keys().copied().collect();
    let rows: Vec<f32> = ids.iter().flat_map(|&i| vector(i, model[&i])).collect();
    let out = ix
        .search_rows(&rows, &SearchParams::beam(10, 64, 4), 2, 1)
        .unwrap();
    let mut missed = 0;
    for (j, &id) in ids.iter().enumerate() {
        let got = &out.ids[j * 10..(j + 1) * 10];
        if !got.contains(&id) {
            missed += 1;
        }
        for g in got {
            assert!(
                !deleted.contains(g) || model.contains_key(g),
                "deleted id {g} returned"
            );
        }
        assert!(ix.contains(id), "acknowledged id {id} lost");
    }
    assert!(
        missed * 200 <= ids.len(),
        "{missed} of {} live vectors not found by searching for them",
        ids.len()
    );
    for &d in deleted.iter() {
        if !model.contains_key(&d) {
            assert!(!ix.contains(d), "deleted id {d} is back");
        }
    }
    drop(ix);
    verify_index(dir, &Control::silent()).unwrap_or_else(|e| panic!("verify: {e}"));
}

#[test]
fn updates_survive_sigkill_at_random_moments() {
    run(
        "updates_survive_sigkill_at_random_moments",
        IndexLayout::Packed,
    );
}

#[test]
fn decoupled_updates_survive_sigkill_at_random_moments() {
    run(
        "decoupled_updates_survive_sigkill_at_random_moments",
        IndexLayout::Decoupled,
    );
}

fn run(name: &str, layout: IndexLayout) {
    LAYOUT.with(|l| l.set(layout));
    if let Ok(spec) = std::env::var("TRAWL_CRASH_CHILD") {
        let parts: Vec<&str> = spec.split('|').collect();
        child(
            Path::new(parts[0]),
            Path::new(parts[1]),
            parts[2].parse().unwrap(),
            parts[3].parse().unwrap(),
        );
        return;
    }
    let kills: usize = std::env::var("TRAWL_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let rows: Vec<f32> = (0..BASE).flat_map(|i| vector(i, 0)).collect();
    let base = Matrix::from_vec(rows, DIM).unwrap();
    let mut params = IndexParams {
        attrs: None,
        metric: Metric::L2,
        ..IndexParams::default()
    };
    params.graph.r = 24;
    params.graph.l = 48;
    params.pq.bytes_per_vector = 8;
    params.entry = None;
    build_index(&base, &dir, &params, &Control::silent()).unwrap();
    if layout == IndexLayout::Decoupled {
        let d = DiskIndex::open(&dir, opts_packed()).unwrap();
        d.write_layout(layout, &Default::default(), &Control::silent())
            .unwrap();
    }
    let mut model: Model = (0..BASE).map(|i| (i, 0)).collect();
    let mut deleted = HashSet::new();
    let mut next_id = 1_000_000u64;
    let mut rng = Rng(0x5eed_c0de);
    let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
    let state = tmp.path().join("state.txt");
    for round in 0..kills {
        let text: String = model.iter().map(|(i, v)| format!("{i} {v}\n")).collect();
        std::fs::write(&state, text).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture"])
            .env(
                "TRAWL_CRASH_CHILD",
                format!(
                    "{}|{}|{}|{next_id}",
                    dir.display(),
                    state.display(),
                    rng.next()
                ),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Three kinds of kill: (0) just after an insert, delete or upsert began (inside its log
        // append or its apply); (1) early in the second merge (before its commit); (2) late in
        // it (around or after its manifest rename), both timed from the first merge's length.
        let mode = round % 3;
        let nth_op = 1 + rng.below(60) as usize;
        let fraction = match mode {
            1 => rng.below(600) as f64 / 1000.0,
            _ => 0.6 + rng.below(450) as f64 / 1000.0,
        };
        // Mode 0 kills a fraction of a typical operation's length after it began (timed from
        // the operations acknowledged so far, like the merge kills), so the kill lands inside
        // the operation however fast the build makes operations.
        let op_fraction = rng.below(900) as f64 / 1000.0;
        let t0 = Instant::now();
        let mut lines = Vec::new();
        let (mut merges, mut ops) = (0, 0);
        let mut merge_began: Option<Instant> = None;
        let mut first_merge = Duration::from_millis(100);
        let mut op_began: Option<Instant> = None;
        let mut op_len = Duration::from_micros(500);
        let mut armed: Option<(Instant, Duration)> = None;
        loop {
            if let Some((at, after)) = armed {
                if at.elapsed() >= after {
                    break;
                }
            }
            match rx.recv_timeout(Duration::from_micros(200)) {
                Ok(l) => {
                    if l.starts_with("begin") {
                        if l.contains(" merge") {
                            merges += 1;
                            merge_began = Some(Instant::now());
                            if mode > 0 && merges == 2 {
                                armed = Some((Instant::now(), first_merge.mul_f64(fraction)));
                            }
                        } else {
                            ops += 1;
                            op_began = Some(Instant::now());
                            if mode == 0 && ops == nth_op {
                                armed = Some((Instant::now(), op_len.mul_f64(op_fraction)));
                            }
                        }
                    } else if l.starts_with("ack") {
                        if merges == 1 {
                            if let Some(b) = merge_began.take() {
                                first_merge = b.elapsed();
                            }
                        }
                        if let Some(b) = op_began.take() {
                            // The shortest acknowledged operation: a kill inside it lands
                            // inside most of them.
                            op_len = op_len.min(b.elapsed());
                        }
                    }
                    let done = l == "done";
                    lines.push(l);
                    if done {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "the child hangs");
        }
        let _ = child.kill();
        let _ = child.wait();
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        // Acknowledged operations go to the model; the one begun and not acknowledged is
        // checked whole-or-nothing.
        let mut begun: Option<(u64, Op)> = None;
        for l in &lines {
            let w: Vec<&str> = l.split(' ').collect();
            match w[0] {
                "begin" => begun = Some((w[1].parse().unwrap(), parse_op(&w[2..]))),
                "ack" => {
                    let (n, op) = begun.take().expect("ack without begin");
                    assert_eq!(n, w[1].parse::<u64>().unwrap());
                    if let Op::Insert(ids) = &op {
                        next_id = next_id.max(ids.iter().max().unwrap() + 1);
                    }
                    if let Op::Delete(ids) = &op {
                        deleted.extend(ids.iter().copied());
                    }
                    apply(&mut model, &op);
                }
                _ => {}
            }
        }
        if let Some((_, Op::Insert(ids))) = &begun {
            next_id = next_id.max(ids.iter().max().unwrap() + 1);
        }
        let staging = dir.join(".trawl-staging").exists();
        let commit = dir.join(".trawl-commit").exists();
        let seq_now = trawl::kinds::graph::Manifest::load_if_present(&dir)
            .ok()
            .flatten()
            .and_then(|m| m.log_seq);
        let kind = match (&begun, lines.last().map(String::as_str)) {
            (_, Some("done")) => "after the child finished",
            (Some((_, Op::Merge(_))), _) if commit => "in a merge, during the roll forward",
            (Some((_, Op::Merge(s))), _) if seq_now.unwrap_or(0) != *s => {
                "in a merge, after its manifest rename"
            }
            (Some((_, Op::Merge(_))), _) if staging => "in a merge, before its commit",
            (Some((_, Op::Merge(_))), _) => "in a merge, before its staging directory",
            (Some(_), _) => "in an insert, delete or upsert",
            (None, _) => "between operations",
        };
        *kinds.entry(kind).or_insert(0usize) += 1;
        eprintln!(
            "kill {round}: {} operations acknowledged; {kind}",
            lines.iter().filter(|l| l.starts_with("ack")).count()
        );
        check(&dir, &mut model, &mut deleted, begun.map(|b| b.1));
    }
    eprintln!("{kills} kills: {kinds:?}");
    let count = |k: &str| kinds.get(k).copied().unwrap_or(0);
    assert!(
        count("in an insert, delete or upsert") >= kills / 5,
        "{kinds:?}"
    );
    assert!(count("in a merge, before its commit") >= 1, "{kinds:?}");
    if kills >= 50 {
        assert!(
            count("in a merge, after its manifest rename") >= 1,
            "{kinds:?}"
        );
    }
}
