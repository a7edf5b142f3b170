//! One conformance suite run against every engine (pread, io_uring with and without
//! registered buffers, io_uring above the memlock limit, each also behind a
//! [`CountingEngine`]), plus tests of the file, buffer and engine-specific behaviour.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::io::*;

/// Pages in the suite's test file.
const FILE_PAGES: u64 = 300;

/// Byte `i` of page `page` of every test file: the page number in the first 8 bytes, then a
/// pattern of the page and the byte index (so a page at the wrong offset or a shifted
/// buffer is caught).
fn pattern_byte(page: u64, i: usize) -> u8 {
    if i < 8 {
        page.to_le_bytes()[i]
    } else {
        (page.wrapping_mul(131) ^ (i as u64).wrapping_mul(7) ^ (i as u64 >> 8)) as u8
    }
}

fn page_bytes(page: u64) -> Vec<u8> {
    (0..PAGE_BYTES).map(|i| pattern_byte(page, i)).collect()
}

/// Checks that `buf` holds exactly pages `first..first + pages` of a test file.
fn check_bytes(buf: &[u8], first: u64, pages: u32, what: &str) {
    assert_eq!(
        buf.len(),
        pages as usize * PAGE_BYTES,
        "{what}: buffer length"
    );
    for (k, chunk) in buf.chunks(PAGE_BYTES).enumerate() {
        let page = first + k as u64;
        if chunk != page_bytes(page).as_slice() {
            let at = (0..PAGE_BYTES)
                .find(|&i| chunk[i] != pattern_byte(page, i))
                .unwrap_or(0);
            panic!(
                "{what}: page {page} differs at byte {at}: {} != {}",
                chunk[at],
                pattern_byte(page, at)
            );
        }
    }
}

fn write_file(path: &Path, pages: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    for p in 0..pages {
        f.write_all(&page_bytes(p)).unwrap();
    }
    f.sync_all().unwrap();
}

/// Opens with O_DIRECT where the file system allows it.
fn open(path: &Path) -> IoFile {
    match IoFile::open(path, true) {
        Ok(f) => f,
        Err(IoError::DirectUnsupported { .. }) => IoFile::open(path, false).unwrap(),
        Err(e) => panic!("open {}: {e}", path.display()),
    }
}

/// A temporary directory with a test file of `pages` pages.
struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Fixture {
    fn new(pages: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.bin");
        write_file(&path, pages);
        Self { _dir: dir, path }
    }
}

type Factory = fn(&IoFile, EngineConfig) -> Box<dyn IoEngine>;

fn pread_factory(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    Box::new(PreadEngine::new(f, cfg).unwrap())
}

fn mem_factory(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    let mut f = f.clone();
    f.load_resident().unwrap();
    Box::new(MemEngine::new(&f, cfg).unwrap())
}

fn sim_factory(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    let mut f = f.clone();
    f.load_resident().unwrap();
    let model = LatencyModel {
        latency_us: 20,
        iops: 200_000,
    };
    Box::new(MemEngine::with_model(&f, cfg, model).unwrap())
}

fn uring_factory(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    Box::new(UringEngine::new(f, cfg).unwrap())
}

fn uring_unregistered_factory(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    let cfg = EngineConfig {
        register_buffers: false,
        ..cfg
    };
    let e = UringEngine::new(f, cfg).unwrap();
    assert!(!e.info().registered_buffers);
    Box::new(e)
}

/// Whether io_uring can be set up here; prints why not.
fn uring_available() -> bool {
    let fx = Fixture::new(1);
    match UringEngine::new(&open(&fx.path), EngineConfig::default()) {
        Ok(_) => true,
        Err(IoError::UringUnavailable(e)) => {
            let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                .unwrap_or_else(|_| "?".into());
            eprintln!(
                "NOTE: io_uring unavailable ({e}; io_uring_disabled = {}), skipping",
                disabled.trim()
            );
            false
        }
        Err(e) => panic!("unexpected error setting up io_uring: {e}"),
    }
}

/// The default shape of the suite's engines.
const BASE: EngineConfig = EngineConfig {
    depth: 16,
    max_pages_per_read: 4,
    register_buffers: true,
    sqpoll: false,
    taskrun: TaskRun::Interrupt,
};

/// Slots × pages above the 8 MiB memlock limit (64 × 40 pages = 10 MiB).
const BIG: EngineConfig = EngineConfig {
    depth: 64,
    max_pages_per_read: 40,
    register_buffers: true,
    sqpoll: false,
    taskrun: TaskRun::Interrupt,
};

/// What a driver counted itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    requests: u64,
    pages: u64,
    bytes: u64,
    completions: u64,
    max_in_flight: u64,
}

/// The conformance suite: every case on a fresh engine from `make`, shaped like `base`.
fn suite(name: &str, make: Factory, base: EngineConfig) {
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    assert_eq!(file.pages(), FILE_PAGES);
    let new = || make(&file, base);
    eprintln!("{name}: {:?}", new().info());

    single_read(&mut *new(), name);
    let tally = random_reads(&mut *new(), 2000, 42, name);
    assert!(
        tally.max_in_flight as usize == base.depth,
        "{name}: queue never filled"
    );
    multi_page(&mut *new(), name);
    queue_full(&mut *new(), name);
    bad_length(&mut *new(), name);
    out_of_range(&mut *new(), name);
    poll(&mut *new(), name);
    drop_in_flight(&file, make, base, name);
    // The memory engine reads the file once, before any read is submitted: a file cut later
    // cannot shorten its reads (a file cut before is refused when it is loaded, see
    // `mem_engine_loads_whole_pages`).
    if !name.starts_with("memory") && !name.starts_with("simulated") {
        short_read(make, base, name);
    }
}

fn single_read(e: &mut dyn IoEngine, name: &str) {
    assert_eq!(e.in_flight(), 0);
    assert!(e.can_submit());
    assert_eq!(e.file_pages(), FILE_PAGES);
    e.submit(
        7,
        ReadRequest {
            first_page: 5,
            pages: 1,
        },
    )
    .unwrap();
    assert_eq!(e.in_flight(), 1);
    let mut out = Vec::new();
    assert_eq!(e.wait(1, &mut out).unwrap(), 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].tag, 7);
    assert_eq!(e.in_flight(), 0);
    check_bytes(e.buffer(out[0].slot), 5, 1, name);
    e.release(out[0].slot);
    assert!(
        e.buffer(out[0].slot).is_empty(),
        "{name}: released slot still readable"
    );
    let c = e.counters();
    assert_eq!(
        (c.requests, c.pages, c.bytes, c.completions),
        (1, 1, PAGE_BYTES as u64, 1),
        "{name}: counters"
    );
}

/// `total` random reads keeping the queue full, collected with random `min`s and released in
/// random order (some held over several rounds); checks every tag once with its bytes, and
/// that the engine's counters equal the driver's own count, which it returns.
fn random_reads(e: &mut dyn IoEngine, total: usize, seed: u64, name: &str) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let depth = e.depth();
    let max_pages = e.max_pages_per_read().min(e.file_pages() as usize);
    let file_pages = e.file_pages();
    let mut expected: HashMap<u64, ReadRequest> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut held: Vec<Completion> = Vec::new();
    let mut held_slots: HashSet<Slot> = HashSet::new();
    let mut out = Vec::new();
    let mut t = Tally::default();
    let mut next = 0usize;
    let mut outstanding = 0usize;
    let mut saw_full = false;
    while (seen.len()) < total {
        while next < total && e.can_submit() {
            let pages = rng.gen_range(1..=max_pages) as u32;
            let first_page = rng.gen_range(0..=file_pages - u64::from(pages));
            let req = ReadRequest { first_page, pages };
            // Tags unlike slot numbers, so a mix-up shows.
            let tag = 1_000_003 * next as u64 + 11;
            e.submit(tag, req).unwrap();
            expected.insert(tag, req);
            next += 1;
            outstanding += 1;
            t.requests += 1;
            t.pages += u64::from(pages);
            t.max_in_flight = t.max_in_flight.max((outstanding + held.len()) as u64);
        }
        if !e.can_submit() {
            saw_full = true;
            let r = e.submit(
                0,
                ReadRequest {
                    first_page: 0,
                    pages: 1,
                },
            );
            assert!(
                matches!(r, Err(IoError::QueueFull { depth: d }) if d == depth),
                "{name}: submit on a full queue: {r:?}"
            );
        }
        assert_eq!(e.in_flight(), outstanding, "{name}: in_flight");
        let min = if outstanding == 0 {
            0
        } else {
            rng.gen_range(1..=outstanding)
        };
        out.clear();
        let n = e.wait(min, &mut out).unwrap();
        assert_eq!(n, out.len(), "{name}: wait count");
        assert!(n >= min, "{name}: wait({min}) returned {n}");
        outstanding -= n;
        for c in &out {
            let req = expected
                .get(&c.tag)
                .unwrap_or_else(|| panic!("{name}: unknown tag {}", c.tag));
            assert!(seen.insert(c.tag), "{name}: tag {} returned twice", c.tag);
            assert!(
                held_slots.insert(c.slot),
                "{name}: slot {:?} held twice",
                c.slot
            );
            check_bytes(e.buffer(c.slot), req.first_page, req.pages, name);
            t.completions += 1;
            t.bytes += u64::from(req.pages) * PAGE_BYTES as u64;
            held.push(*c);
        }
        held.shuffle(&mut rng);
        let keep = rng.gen_range(0..=held.len());
        for c in held.drain(keep..) {
            // Still intact although other reads completed into other slots meanwhile.
            let req = expected[&c.tag];
            check_bytes(e.buffer(c.slot), req.first_page, req.pages, name);
            e.release(c.slot);
            held_slots.remove(&c.slot);
        }
    }
    for c in held.drain(..) {
        e.release(c.slot);
    }
    assert_eq!(e.in_flight(), 0);
    assert!(total <= depth || saw_full, "{name}: the queue never filled");
    assert_eq!(seen.len(), total);
    let c = e.counters();
    assert_eq!(
        (c.requests, c.pages, c.bytes, c.completions),
        (t.requests, t.pages, t.bytes, t.completions),
        "{name}: engine counters vs. independent count"
    );
    t
}

fn multi_page(e: &mut dyn IoEngine, name: &str) {
    let max = e.max_pages_per_read() as u32;
    let reqs = [
        (0, max),
        (FILE_PAGES - u64::from(max), max),
        (17, max.min(3)),
        (FILE_PAGES / 2, max),
    ];
    let mut out = Vec::new();
    let mut done = 0;
    for batch in (0..reqs.len()).collect::<Vec<_>>().chunks(e.depth()) {
        for &i in batch {
            let (first_page, pages) = reqs[i];
            e.submit(i as u64, ReadRequest { first_page, pages })
                .unwrap();
        }
        out.clear();
        assert_eq!(e.wait(batch.len(), &mut out).unwrap(), batch.len());
        for c in &out {
            let (first, pages) = reqs[c.tag as usize];
            check_bytes(e.buffer(c.slot), first, pages, name);
            e.release(c.slot);
            done += 1;
        }
    }
    assert_eq!(done, reqs.len());
}

fn queue_full(e: &mut dyn IoEngine, name: &str) {
    let depth = e.depth();
    let req = |p: u64| ReadRequest {
        first_page: p % FILE_PAGES,
        pages: 1,
    };
    for i in 0..depth {
        e.submit(i as u64, req(i as u64)).unwrap();
    }
    assert!(!e.can_submit());
    assert!(matches!(
        e.submit(99, req(0)),
        Err(IoError::QueueFull { .. })
    ));
    let mut out = Vec::new();
    assert_eq!(e.wait(depth, &mut out).unwrap(), depth);
    // Completed but not released: still busy.
    assert!(!e.can_submit(), "{name}");
    assert!(matches!(
        e.submit(99, req(0)),
        Err(IoError::QueueFull { .. })
    ));
    let first = out[0];
    e.release(first.slot);
    // Releasing twice (or releasing a free slot) is ignored, not a second free slot.
    e.release(first.slot);
    e.release(Slot(depth as u32 + 5));
    assert!(e.can_submit());
    e.submit(FILE_PAGES + 3, req(3)).unwrap();
    assert!(!e.can_submit(), "{name}: a double release freed two slots");
    let mut more = Vec::new();
    assert_eq!(e.wait(1, &mut more).unwrap(), 1);
    check_bytes(e.buffer(more[0].slot), 3, 1, name);
    for c in out[1..].iter().chain(&more) {
        check_bytes(e.buffer(c.slot), c.tag % FILE_PAGES, 1, name);
        e.release(c.slot);
    }
    // Exactly `depth` slots are free again.
    for i in 0..depth {
        e.submit(i as u64, req(i as u64)).unwrap();
    }
    assert!(!e.can_submit());
    out.clear();
    assert_eq!(e.wait(depth, &mut out).unwrap(), depth);
    for c in &out {
        e.release(c.slot);
    }
}

fn bad_length(e: &mut dyn IoEngine, name: &str) {
    let max = e.max_pages_per_read();
    for pages in [0u32, max as u32 + 1, u32::MAX] {
        let r = e.submit(
            1,
            ReadRequest {
                first_page: 0,
                pages,
            },
        );
        assert!(
            matches!(r, Err(IoError::BadLength { pages: p, max: m }) if p == pages && m == max),
            "{name}: {pages} pages: {r:?}"
        );
    }
    assert_eq!(e.in_flight(), 0);
    assert_eq!(e.counters(), EngineCounters::default());
    single_read(e, name);
}

fn out_of_range(e: &mut dyn IoEngine, name: &str) {
    let max = e.max_pages_per_read() as u32;
    let mut cases = vec![(FILE_PAGES, 1), (u64::MAX, 1), (u64::MAX - 1, max)];
    if max >= 2 {
        cases.push((FILE_PAGES - 1, 2));
    }
    for (first_page, pages) in cases {
        let r = e.submit(1, ReadRequest { first_page, pages });
        assert!(
            matches!(r, Err(IoError::OutOfRange { first, file_pages, .. })
                if first == first_page && file_pages == FILE_PAGES),
            "{name}: pages {first_page}+{pages}: {r:?}"
        );
    }
    assert_eq!(e.in_flight(), 0);
    // The last page itself is fine.
    e.submit(
        9,
        ReadRequest {
            first_page: FILE_PAGES - 1,
            pages: 1,
        },
    )
    .unwrap();
    let mut out = Vec::new();
    e.wait(1, &mut out).unwrap();
    check_bytes(e.buffer(out[0].slot), FILE_PAGES - 1, 1, name);
    e.release(out[0].slot);
}

fn poll(e: &mut dyn IoEngine, name: &str) {
    let mut out = Vec::new();
    let t0 = Instant::now();
    assert_eq!(e.wait(0, &mut out).unwrap(), 0);
    // `min` above what is in flight is clamped, not a hang.
    assert_eq!(e.wait(3, &mut out).unwrap(), 0);
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "{name}: wait(0) blocked"
    );
    e.submit(
        4,
        ReadRequest {
            first_page: 8,
            pages: 1,
        },
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.is_empty() {
        e.wait(0, &mut out).unwrap();
        assert!(Instant::now() < deadline, "{name}: polling never completed");
        if out.is_empty() {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    assert_eq!(out.len(), 1);
    assert_eq!(e.in_flight(), 0);
    check_bytes(e.buffer(out[0].slot), 8, 1, name);
    e.release(out[0].slot);
    assert_eq!(e.wait(0, &mut out).unwrap(), 0);
}

/// Drops engines with every slot in flight (some harvested, some not): no crash, and memory
/// allocated right after stays untouched.
fn drop_in_flight(file: &IoFile, make: Factory, base: EngineConfig, name: &str) {
    for round in 0..20 {
        let mut e = make(file, base);
        let depth = e.depth();
        let pages = e.max_pages_per_read() as u32;
        for i in 0..depth {
            let first_page = (i as u64 * 7 + round) % (FILE_PAGES - u64::from(pages));
            e.submit(i as u64, ReadRequest { first_page, pages })
                .unwrap();
        }
        if round % 2 == 1 {
            let mut out = Vec::new();
            e.wait(0, &mut out).unwrap();
        }
        drop(e);
        let total = base.total_buffer_bytes().unwrap();
        let fresh = AlignedBuf::new(total).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert!(
            fresh.as_slice().iter().all(|&b| b == 0),
            "{name}: memory written after the engine was dropped"
        );
    }
}

/// A file that shrinks under an open engine: reading its cut last page is an error (from
/// `submit` or from `wait`), never a panic or a partial page, and the slot comes back.
fn short_read(make: Factory, base: EngineConfig, name: &str) {
    const PAGES: u64 = 8;
    // Cut inside the last page (a partial read) and before it (nothing to read).
    for cut in [
        PAGES * PAGE_BYTES as u64 - 100,
        (PAGES - 1) * PAGE_BYTES as u64 - 100,
    ] {
        let fx = Fixture::new(PAGES);
        let file = open(&fx.path);
        let mut e = make(&file, base);
        OpenOptions::new()
            .write(true)
            .open(&fx.path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let req = ReadRequest {
            first_page: PAGES - 1,
            pages: 1,
        };
        let mut out = Vec::new();
        let res = e.submit(3, req).and_then(|()| e.wait(1, &mut out));
        if let Err(err) = &res {
            eprintln!("{name}: file cut to {cut} bytes: {err}");
        }
        match res {
            Err(IoError::ShortRead {
                offset,
                expected,
                got,
            }) => {
                assert_eq!(offset, (PAGES - 1) * PAGE_BYTES as u64, "{name}");
                assert_eq!(expected, PAGE_BYTES, "{name}");
                assert!(got < PAGE_BYTES, "{name}");
            }
            Err(IoError::Read { .. }) => {}
            other => panic!("{name}: read past a truncated end: {other:?}"),
        }
        assert!(out.is_empty(), "{name}: a failed read was delivered");
        assert_eq!(e.in_flight(), 0, "{name}");
        // Every slot is free again, and the intact pages still read.
        let depth = e.depth();
        for i in 0..depth {
            let first_page = i as u64 % (PAGES - 2);
            e.submit(
                i as u64,
                ReadRequest {
                    first_page,
                    pages: 1,
                },
            )
            .unwrap();
        }
        assert_eq!(e.wait(depth, &mut out).unwrap(), depth);
        for c in &out {
            check_bytes(e.buffer(c.slot), c.tag % (PAGES - 2), 1, name);
            e.release(c.slot);
        }
    }
}

fn counting<const W: u8>(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    let inner = match W {
        0 => pread_factory(f, cfg),
        1 => uring_factory(f, cfg),
        _ => uring_unregistered_factory(f, cfg),
    };
    Box::new(CountingEngine::new(inner))
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn pread_conformance() {
    suite("pread", pread_factory, BASE);
    suite("pread big", pread_factory, BIG);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn mem_conformance() {
    suite("memory", mem_factory, BASE);
    suite("memory big", mem_factory, BIG);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn sim_conformance() {
    suite("simulated", sim_factory, BASE);
    suite("simulated big", sim_factory, BIG);
}

/// The modelled device: nothing completes before its latency, `wait(min)` waits for the
/// `min` oldest, completions come in submission order, and the throughput ceiling spaces them.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn sim_engine_follows_its_model() {
    let fx = Fixture::new(64);
    let mut file = open(&fx.path);
    file.load_resident().unwrap();
    let latency = Duration::from_millis(20);
    let kind: EngineKind = "sim:20000:200".parse().unwrap();
    assert_eq!(
        kind,
        EngineKind::Simulated(LatencyModel {
            latency_us: 20_000,
            iops: 200
        })
    );
    let mut e = file.engine(kind, BASE).unwrap();
    assert_eq!(e.info().name, "simulated");
    let t0 = Instant::now();
    for i in 0..3u64 {
        e.submit(
            i,
            ReadRequest {
                first_page: 10 + i,
                pages: 1,
            },
        )
        .unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(e.wait(0, &mut out).unwrap(), 0, "nothing is ready at once");
    assert_eq!(e.in_flight(), 3);
    // The first completes after the latency; at 200 IOPS the next two 5 ms apart.
    assert_eq!(e.wait(1, &mut out).unwrap(), 1);
    assert!(t0.elapsed() >= latency);
    assert_eq!(out[0].tag, 0);
    assert_eq!(e.wait(2, &mut out).unwrap(), 2);
    assert!(t0.elapsed() >= latency + Duration::from_millis(10));
    assert_eq!(out.iter().map(|c| c.tag).collect::<Vec<_>>(), [0, 1, 2]);
    for c in &out {
        check_bytes(e.buffer(c.slot), 10 + c.tag, 1, "simulated");
        e.release(c.slot);
    }
    assert_eq!(e.in_flight(), 0);
    assert_eq!(e.counters().requests, 3);
    // A file not loaded into memory is refused, as for the memory engine.
    assert!(matches!(
        open(&fx.path).engine(kind, BASE),
        Err(IoError::BadConfig(_))
    ));
    for bad in [
        "sim:",
        "sim:0",
        "sim:x",
        "sim:10:y",
        "sim:10:5:1",
        "sim:2000000",
    ] {
        assert!(bad.parse::<EngineKind>().is_err(), "{bad} was accepted");
    }
    assert_eq!(
        "sim:80".parse::<EngineKind>().unwrap(),
        EngineKind::Simulated(LatencyModel {
            latency_us: 80,
            iops: 0
        })
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn mem_engine_loads_whole_pages() {
    let fx = Fixture::new(8);
    let file = open(&fx.path);
    assert!(
        matches!(MemEngine::new(&file, BASE), Err(IoError::BadConfig(_))),
        "an engine over a file not loaded is refused"
    );
    let mut loaded = file.clone();
    loaded.load_resident().unwrap();
    let mut e = file.engine(EngineKind::Memory, BASE);
    assert!(e.is_err());
    e = loaded.engine(EngineKind::Memory, BASE);
    let e = e.unwrap();
    assert_eq!(e.info().name, "memory");
    assert_eq!(e.file_pages(), 8);
    // A file that shrank between open and load: the load is a short read.
    let fx = Fixture::new(8);
    let mut file = open(&fx.path);
    OpenOptions::new()
        .write(true)
        .open(&fx.path)
        .unwrap()
        .set_len(5 * PAGE_BYTES as u64 - 10)
        .unwrap();
    assert!(matches!(
        file.load_resident(),
        Err(IoError::ShortRead { .. }) | Err(IoError::Read { .. })
    ));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn pread_counting_conformance() {
    suite("counting pread", counting::<0>, BASE);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_conformance() {
    if uring_available() {
        suite("uring", uring_factory, BASE);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_counting_conformance() {
    if uring_available() {
        suite("counting uring", counting::<1>, BASE);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_unregistered_conformance() {
    if uring_available() {
        suite("uring unregistered", uring_unregistered_factory, BASE);
        suite("counting uring unregistered", counting::<2>, BASE);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_big_conformance() {
    if uring_available() {
        suite("uring 64x40", uring_factory, BIG);
        suite("counting uring 64x40", counting::<1>, BIG);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_depth_one_and_odd_depth() {
    if !uring_available() {
        return;
    }
    for depth in [1, 3, 33] {
        let cfg = EngineConfig { depth, ..BASE };
        suite(&format!("uring depth {depth}"), uring_factory, cfg);
    }
}

/// Capabilities of the calling thread (capget/capset, version 3).
mod caps {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }

    const VERSION_3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;

    fn get() -> Option<[Data; 2]> {
        let mut hdr = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data::default(); 2];
        // SAFETY: capget reads one header and writes two data structs (version 3), both
        // valid, correctly laid out and live for the call.
        let rc =
            unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) };
        (rc == 0).then_some(data)
    }

    fn set(data: &[Data; 2]) -> bool {
        let mut hdr = Header {
            version: VERSION_3,
            pid: 0,
        };
        // SAFETY: capset reads one header and two data structs (version 3), all valid and
        // live for the call; pid 0 changes only the calling thread.
        let rc = unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut Header, data.as_ptr()) };
        rc == 0
    }

    /// While alive, the calling thread lacks CAP_IPC_LOCK in its effective set (so io_uring
    /// accounts registered buffers against RLIMIT_MEMLOCK, as for an unprivileged user).
    pub struct WithoutIpcLock {
        saved: [Data; 2],
    }

    impl WithoutIpcLock {
        /// `None` when the capabilities cannot be read or changed.
        pub fn new() -> Option<Self> {
            let saved = get()?;
            let mut data = saved;
            data[0].effective &= !(1 << CAP_IPC_LOCK);
            set(&data).then_some(Self { saved })
        }

        /// Whether the thread had CAP_IPC_LOCK before.
        pub fn had_it(&self) -> bool {
            self.saved[0].effective & (1 << CAP_IPC_LOCK) != 0
        }
    }

    impl Drop for WithoutIpcLock {
        fn drop(&mut self) {
            set(&self.saved);
        }
    }
}

fn memlock_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into a valid, live struct.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    if rc == 0 {
        r.rlim_cur
    } else {
        u64::MAX
    }
}

/// Registered buffers above the memlock limit: the kernel refuses (for a thread without
/// CAP_IPC_LOCK), the engine falls back to plain reads and passes the suite.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_memlock_fallback() {
    if !uring_available() {
        return;
    }
    let guard = caps::WithoutIpcLock::new();
    let limit = memlock_limit();
    let bytes = BIG.total_buffer_bytes().unwrap() as u64;
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    let e = UringEngine::new(&file, BIG).unwrap();
    let registered = e.info().registered_buffers;
    eprintln!(
        "memlock limit {limit} B, buffers {bytes} B, CAP_IPC_LOCK dropped: {}, registered: {registered}",
        guard.is_some()
    );
    if guard.is_some() && limit < bytes {
        assert!(
            !registered,
            "buffers above the memlock limit were registered"
        );
    }
    drop(e);
    suite("uring above memlock", uring_factory, BIG);
    suite("counting uring above memlock", counting::<1>, BIG);
    // Small buffers register within the limit.
    let small = UringEngine::new(&file, BASE).unwrap();
    if guard.as_ref().is_some_and(|g| g.had_it()) && limit >= 4 << 20 {
        assert!(small.info().registered_buffers);
    }
    drop(small);
    drop(guard);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_sqpoll() {
    if !uring_available() {
        return;
    }
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    let cfg = EngineConfig {
        sqpoll: true,
        ..BASE
    };
    match UringEngine::new(&file, cfg) {
        Ok(e) => {
            assert!(e.info().sqpoll);
            let mut e: Box<dyn IoEngine> = Box::new(e);
            single_read(&mut *e, "uring sqpoll");
            fn sqpoll_factory(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
                uring_factory(
                    f,
                    EngineConfig {
                        sqpoll: true,
                        ..cfg
                    },
                )
            }
            suite("uring sqpoll", sqpoll_factory, BASE);
        }
        Err(IoError::UringUnavailable(err)) => {
            eprintln!("NOTE: SQPOLL refused: {err}");
            assert!(!err.to_string().is_empty());
        }
        Err(e) => panic!("SQPOLL: unexpected error {e}"),
    }
}

fn uring_taskrun_factory<const M: u8>(f: &IoFile, cfg: EngineConfig) -> Box<dyn IoEngine> {
    let taskrun = [TaskRun::Coop, TaskRun::Defer][M as usize];
    Box::new(UringEngine::new(f, EngineConfig { taskrun, ..cfg }).unwrap())
}

/// The coop and defer rings pass the conformance suite (polling included: their completions
/// are posted only when the engine asks) and report the mode they run in; a kernel that
/// refuses a mode falls back to the default, which the engine reports.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_taskrun_modes() {
    if !uring_available() {
        return;
    }
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    let factories: [(TaskRun, Factory); 2] = [
        (TaskRun::Coop, uring_taskrun_factory::<0>),
        (TaskRun::Defer, uring_taskrun_factory::<1>),
    ];
    for (mode, make) in factories {
        let got = make(&file, BASE).info().taskrun;
        if got != mode {
            assert_eq!(got, TaskRun::Interrupt, "a refused mode falls back");
            eprintln!("NOTE: the kernel refused task-run mode {mode}");
            continue;
        }
        suite(&format!("uring {mode}"), make, BASE);
        suite(&format!("uring {mode} above memlock"), make, BIG);
    }
    assert_eq!(
        UringEngine::new(&file, BASE).unwrap().info().taskrun,
        TaskRun::Interrupt
    );
    assert_eq!("defer".parse::<TaskRun>(), Ok(TaskRun::Defer));
    assert!("sometimes".parse::<TaskRun>().is_err());
}

/// A defer ring belongs to the thread that made it. An engine handed to another thread
/// between reads rebuilds its ring there and reads on; one moved with a read in flight gets
/// an error there (not a hang), and collects the read once back in its own thread.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_defer_engine_follows_its_thread() {
    if !uring_available() {
        return;
    }
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    let cfg = EngineConfig {
        taskrun: TaskRun::Defer,
        ..BASE
    };
    let mut e = UringEngine::new(&file, cfg).unwrap();
    if e.info().taskrun != TaskRun::Defer {
        eprintln!("NOTE: the kernel refused task-run mode defer");
        return;
    }
    let registered = e.info().registered_buffers;
    single_read(&mut e, "defer, own thread");
    // A batch of `depth` reads, collected one `wait` at a time, bytes checked.
    let batch = |e: &mut UringEngine, first: u64, name: &str| {
        for i in 0..BASE.depth as u64 {
            let req = ReadRequest {
                first_page: first + i,
                pages: 1 + (i % 3) as u32,
            };
            e.submit(i, req).unwrap();
        }
        let mut out = Vec::new();
        while out.len() < BASE.depth {
            e.wait(1, &mut out).unwrap();
        }
        for c in &out {
            check_bytes(
                e.buffer(c.slot),
                first + c.tag,
                1 + (c.tag % 3) as u32,
                name,
            );
            e.release(c.slot);
        }
    };
    let mut e = std::thread::spawn(move || {
        batch(&mut e, 11, "defer, second thread");
        assert_eq!(e.info().taskrun, TaskRun::Defer);
        assert_eq!(e.info().registered_buffers, registered);
        e
    })
    .join()
    .unwrap();
    // Back in the first thread: the ring follows again.
    batch(&mut e, 40, "defer, back");
    assert_eq!(e.counters().completions, 1 + 2 * BASE.depth as u64);
    e.submit(
        9,
        ReadRequest {
            first_page: 3,
            pages: 2,
        },
    )
    .unwrap();
    let mut e = std::thread::spawn(move || {
        let mut out = Vec::new();
        let err = e.wait(1, &mut out).unwrap_err();
        assert!(err.to_string().contains("another thread"), "{err}");
        assert_eq!(e.in_flight(), 1);
        e
    })
    .join()
    .unwrap();
    // The failed wait made no system call: the read is still queued in the ring, and its own
    // thread submits and collects it.
    let mut out = Vec::new();
    assert_eq!(e.wait(1, &mut out).unwrap(), 1);
    assert_eq!(out[0].tag, 9);
    check_bytes(e.buffer(out[0].slot), 3, 2, "defer, collected at home");
}

/// `drain_ring` (what `Drop` runs) leaves nothing in the ring, and the drained completions
/// are still delivered with the right bytes.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn uring_drain_keeps_completions() {
    if !uring_available() {
        return;
    }
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    let mut e = UringEngine::new(&file, BIG).unwrap();
    for i in 0..BIG.depth as u64 {
        e.submit(
            i,
            ReadRequest {
                first_page: i * 3,
                pages: 40,
            },
        )
        .unwrap();
    }
    assert_eq!(e.in_ring(), BIG.depth);
    assert!(e.drain_ring());
    assert_eq!(e.in_ring(), 0);
    assert_eq!(e.in_flight(), BIG.depth);
    let mut out = Vec::new();
    assert_eq!(e.wait(0, &mut out).unwrap(), BIG.depth);
    for c in &out {
        check_bytes(e.buffer(c.slot), c.tag * 3, 40, "drain");
    }
}

/// The wrapper's own counts equal the driver's, including the largest number in flight and
/// a failed read.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn counting_counts() {
    let fx = Fixture::new(FILE_PAGES);
    let file = open(&fx.path);
    let mut makers: Vec<(&str, Factory)> = vec![("pread", pread_factory)];
    if uring_available() {
        makers.push(("uring", uring_factory));
        makers.push(("uring unregistered", uring_unregistered_factory));
    }
    for (name, make) in makers {
        let mut e = CountingEngine::new(make(&file, BASE));
        let t = random_reads(&mut e, 1500, 7, name);
        let c = e.counts();
        assert_eq!(
            c,
            CountedIo {
                requests: t.requests,
                pages: t.pages,
                bytes: t.bytes,
                completions: t.completions,
                max_in_flight: t.max_in_flight,
            },
            "{name}"
        );
        assert_eq!(c.max_in_flight, BASE.depth as u64, "{name}");
        assert_eq!(e.outstanding(), 0, "{name}");
        let ec = e.counters();
        assert_eq!(
            (ec.requests, ec.pages, ec.bytes, ec.completions),
            (c.requests, c.pages, c.bytes, c.completions),
            "{name}"
        );
        assert_eq!(e.info().name, name.split(' ').next().unwrap());

        // A read that fails after submission (io_uring) is no longer outstanding.
        let small = Fixture::new(4);
        let sfile = open(&small.path);
        let mut e = CountingEngine::new(make(&sfile, BASE));
        OpenOptions::new()
            .write(true)
            .open(&small.path)
            .unwrap()
            .set_len(100)
            .unwrap();
        let mut out = Vec::new();
        let r = e
            .submit(
                1,
                ReadRequest {
                    first_page: 2,
                    pages: 1,
                },
            )
            .and_then(|()| e.wait(1, &mut out));
        assert!(r.is_err(), "{name}");
        assert_eq!(e.outstanding(), 0, "{name}");
        assert_eq!(e.counts().completions, 0, "{name}");
        assert_eq!(
            e.failed() + e.counts().requests,
            2 * e.counts().requests,
            "{name}"
        );
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn engine_kinds() {
    let fx = Fixture::new(16);
    let file = open(&fx.path);
    let p = file.engine(EngineKind::Pread, BASE).unwrap();
    assert_eq!(p.info().name, "pread");
    assert_eq!(p.info().direct, file.is_direct());
    let a = file.engine(EngineKind::Auto, BASE).unwrap();
    let uring = uring_available();
    assert_eq!(a.info().name, if uring { "uring" } else { "pread" });
    match file.engine(EngineKind::Uring, BASE) {
        Ok(u) => assert_eq!(u.info().name, "uring"),
        Err(e) => assert!(!uring && matches!(e, IoError::UringUnavailable(_))),
    }
    assert_eq!("io_uring".parse::<EngineKind>().unwrap(), EngineKind::Uring);
    assert_eq!("memory".parse::<EngineKind>().unwrap(), EngineKind::Memory);
    assert!("aio".parse::<EngineKind>().is_err());
    // Bad configurations are typed errors for every kind.
    for kind in [EngineKind::Auto, EngineKind::Uring, EngineKind::Pread] {
        for cfg in [
            EngineConfig { depth: 0, ..BASE },
            EngineConfig {
                max_pages_per_read: 0,
                ..BASE
            },
            EngineConfig {
                depth: MAX_DEPTH + 1,
                ..BASE
            },
            EngineConfig {
                max_pages_per_read: MAX_PAGES_PER_READ + 1,
                ..BASE
            },
        ] {
            let r = file.engine(kind, cfg);
            assert!(
                matches!(r, Err(IoError::BadConfig(_))),
                "{kind:?} {cfg:?}: {:?}",
                r.map(|e| e.info())
            );
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn io_file_open_and_read_pages() {
    let dir = tempfile::tempdir().unwrap();
    let missing = IoFile::open(&dir.path().join("missing"), true);
    assert!(matches!(missing, Err(IoError::Open { .. })), "{missing:?}");
    let as_dir = IoFile::open(dir.path(), false);
    assert!(matches!(as_dir, Err(IoError::Open { .. })), "{as_dir:?}");

    let path = dir.path().join("f.bin");
    write_file(&path, 10);
    let file = open(&path);
    assert_eq!((file.len(), file.pages()), (10 * PAGE_BYTES as u64, 10));
    assert_eq!(file.path(), path.as_path());
    let clone = file.clone();
    let t = std::thread::spawn(move || {
        let mut buf = AlignedBuf::with_pages(3).unwrap();
        clone.read_pages(7, &mut buf).unwrap();
        check_bytes(buf.as_slice(), 7, 3, "read_pages in a thread");
    });
    t.join().unwrap();
    let mut buf = AlignedBuf::with_pages(2).unwrap();
    file.read_pages(0, &mut buf).unwrap();
    check_bytes(buf.as_slice(), 0, 2, "read_pages");
    assert!(matches!(
        file.read_pages(9, &mut buf),
        Err(IoError::OutOfRange {
            first: 9,
            end: 11,
            file_pages: 10
        })
    ));
    // The file shrinks: a short read, not a panic.
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(10 * PAGE_BYTES as u64 - 100)
        .unwrap();
    let r = file.read_pages(8, &mut buf);
    assert!(
        matches!(r, Err(IoError::ShortRead { offset, expected, got })
            if offset == 8 * PAGE_BYTES as u64 && expected == 2 * PAGE_BYTES
                && got == 2 * PAGE_BYTES - 100),
        "{r:?}"
    );
    // A length that is not a whole number of pages rounds down.
    let reopened = open(&path);
    assert_eq!(reopened.pages(), 9);
    let mut one = AlignedBuf::with_pages(1).unwrap();
    reopened.read_pages(8, &mut one).unwrap();
    check_bytes(one.as_slice(), 8, 1, "after truncation");
}

#[test]
fn aligned_buf() {
    for pages in [0usize, 1, 3, 40] {
        let mut b = AlignedBuf::with_pages(pages).unwrap();
        assert_eq!(b.len(), pages * PAGE_BYTES);
        assert_eq!(b.pages(), pages);
        assert_eq!(b.is_empty(), pages == 0);
        assert_eq!(b.as_ptr() as usize % PAGE_BYTES, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = i as u8);
        assert!(b.as_slice().iter().enumerate().all(|(i, &x)| x == i as u8));
        assert_eq!(b.as_mut_ptr() as usize % PAGE_BYTES, 0);
    }
    assert!(matches!(AlignedBuf::new(100), Err(IoError::BadConfig(_))));
    assert!(matches!(
        AlignedBuf::with_pages(usize::MAX),
        Err(IoError::BadConfig(_))
    ));
    fn send_sync<T: Send + Sync>() {}
    send_sync::<AlignedBuf>();
    send_sync::<IoFile>();
    fn send<T: Send>() {}
    send::<UringEngine>();
    send::<PreadEngine>();
    send::<CountingEngine<Box<dyn IoEngine>>>();
}

/// A concatenation reads each file's pages at their place in the joint page space, through
/// every engine, and refuses a read that spans two files.
#[test]
#[cfg_attr(
    miri,
    ignore = "file I/O, io_uring or pread: system calls Miri cannot run"
)]
fn concatenated_files_read_as_one_page_space() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_file(&a, 10);
    let mut f = std::fs::File::create(&b).unwrap();
    for p in 10..25 {
        f.write_all(&page_bytes(p)).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    let joint = IoFile::concat(&[open(&a), open(&b)]).unwrap();
    assert_eq!((joint.pages(), joint.part_count()), (25, 2));
    let mut factories: Vec<(&str, Factory)> = vec![("pread", pread_factory), ("mem", mem_factory)];
    if uring_available() {
        factories.push(("uring", uring_factory));
        factories.push(("uring-unregistered", uring_unregistered_factory));
    }
    for (name, make) in factories {
        let cfg = EngineConfig {
            depth: 4,
            max_pages_per_read: 3,
            ..EngineConfig::default()
        };
        let mut e = make(&joint, cfg);
        let mut out = Vec::new();
        for (first, pages) in [(0u64, 1u32), (7, 3), (10, 1), (22, 3), (9, 1)] {
            e.submit(
                first,
                ReadRequest {
                    first_page: first,
                    pages,
                },
            )
            .unwrap();
            out.clear();
            e.wait(1, &mut out).unwrap();
            let c = out[0];
            check_bytes(
                &e.buffer(c.slot)[..pages as usize * PAGE_BYTES],
                first,
                pages,
                name,
            );
            e.release(c.slot);
        }
        let err = e
            .submit(
                0,
                ReadRequest {
                    first_page: 9,
                    pages: 2,
                },
            )
            .unwrap_err();
        assert!(matches!(err, IoError::OutOfRange { .. }), "{name}: {err}");
    }
    let mut buf = AlignedBuf::with_pages(2).unwrap();
    joint.read_pages(23, &mut buf).unwrap();
    check_bytes(buf.as_slice(), 23, 2, "read_pages");
    assert!(joint.read_pages(9, &mut buf).is_err());
}
