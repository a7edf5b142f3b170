//! Crash safety of the service: a client streams inserts, deletes and merges while the test
//! SIGKILLs `trawl serve` at pseudo-random moments (5 times here; `TRAWL_SERVE_KILLS=20` for
//! the full run). After every restart each acknowledged operation is visible, and the one
//! operation in flight at the kill (not acknowledged) is applied whole or not at all.

mod server;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use server::{graph_index, values, Server};

const DIM: usize = 16;
const N: usize = 3000;

/// An operation sent and not yet acknowledged.
#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u64>),
    Delete(Vec<u64>),
}

/// What the client knows: ids acknowledged present and deleted, and the operation in flight.
#[derive(Debug, Default)]
struct Model {
    present: BTreeSet<u64>,
    deleted: BTreeSet<u64>,
    pending: Option<Op>,
    acked_ops: usize,
    merges_started: usize,
}

/// A request that may fail (the server killed under it): `None` then.
fn try_post(addr: &str, path: &str, body: &Value) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let b = body.to_string();
    let msg = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    s.write_all(msg.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let status: u16 = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split("\r\n\r\n").nth(1)?;
    Some((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// xorshift.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Streams operations until the server stops answering.
fn stream(addr: &str, model: &Mutex<Model>, stop: &AtomicBool, seed: u64, next_id: &mut u64) {
    let mut rng = Rng(seed | 1);
    // Odd rounds merge (a kill lands in a merge), even ones do not.
    let merges = seed.is_multiple_of(2);
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        if merges && i.is_multiple_of(40) {
            match try_post(addr, "/indexes/ix/merge", &json!({"threads": 1})) {
                Some((202, _)) => model.lock().unwrap().merges_started += 1,
                Some((409, _)) => {}
                Some((s, b)) => panic!("merge: {s} {b}"),
                None => return,
            }
            continue;
        }
        let op = {
            let m = model.lock().unwrap();
            if rng.next().is_multiple_of(3) && m.present.len() > 10 {
                let v: Vec<u64> = m.present.iter().copied().collect();
                let a = v[(rng.next() % v.len() as u64) as usize];
                let b = v[(rng.next() % v.len() as u64) as usize];
                if a == b {
                    continue;
                }
                Op::Delete(vec![a, b])
            } else {
                let ids: Vec<u64> = (0..3).map(|j| *next_id + j).collect();
                *next_id += 3;
                Op::Insert(ids)
            }
        };
        model.lock().unwrap().pending = Some(op.clone());
        let r = match &op {
            Op::Insert(ids) => {
                let rows: Vec<Vec<f32>> = ids.iter().map(|&id| values(id, DIM)).collect();
                try_post(
                    addr,
                    "/indexes/ix/insert",
                    &json!({"ids": ids, "vectors": rows}),
                )
            }
            Op::Delete(ids) => try_post(addr, "/indexes/ix/delete", &json!({ "ids": ids })),
        };
        let Some((status, body)) = r else {
            // Killed under the request: the operation stays pending.
            return;
        };
        assert_eq!(status, 200, "{op:?}: {body}");
        let mut m = model.lock().unwrap();
        match op {
            Op::Insert(ids) => m.present.extend(ids),
            Op::Delete(ids) => {
                for id in ids {
                    m.present.remove(&id);
                    m.deleted.insert(id);
                }
            }
        }
        m.pending = None;
        m.acked_ops += 1;
    }
}

/// Checks the restarted server against the model, and settles the pending operation.
fn check(s: &Server, m: &mut Model) {
    let ask = |ids: &[u64]| -> Vec<bool> {
        let r = s.post("/indexes/ix/contains", &[], &json!({ "ids": ids }));
        assert_eq!(r.status, 200);
        r.json()["present"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_bool().unwrap())
            .collect()
    };
    // The operation in flight first: whole or not at all, then part of the model.
    if let Some(op) = m.pending.take() {
        let (ids, insert) = match &op {
            Op::Insert(ids) => (ids.clone(), true),
            Op::Delete(ids) => (ids.clone(), false),
        };
        let got = ask(&ids);
        let applied = if insert { got[0] } else { !got[0] };
        assert!(
            got.iter().all(|&p| p == got[0]),
            "the unacknowledged {op:?} is half-applied: {got:?}"
        );
        if applied {
            m.acked_ops += 1;
            if insert {
                m.present.extend(ids);
            } else {
                for id in ids {
                    m.present.remove(&id);
                    m.deleted.insert(id);
                }
            }
        }
    }
    let present: Vec<u64> = m.present.iter().copied().collect();
    for chunk in present.chunks(5000) {
        let got = ask(chunk);
        for (id, p) in chunk.iter().zip(got) {
            assert!(p, "acknowledged id {id} is missing after the restart");
        }
    }
    let deleted: Vec<u64> = m.deleted.iter().copied().collect();
    for chunk in deleted.chunks(5000) {
        for (id, p) in chunk.iter().zip(ask(chunk)) {
            assert!(
                !p,
                "id {id}, deleted and acknowledged, is back after the restart"
            );
        }
    }
    // The vectors themselves: the newest present insert is found at distance 0.
    if let Some(&id) = m.present.iter().next_back().filter(|&&id| id >= N as u64) {
        let r = s.post(
            "/indexes/ix/search",
            &[],
            &json!({"vector": values(id, DIM), "k": 1, "params": {"L": 100}}),
        );
        assert_eq!(
            r.json()["ids"][0],
            id,
            "{}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.json()["distances"][0], 0.0);
    }
}

#[test]
fn every_acknowledged_write_survives_sigkill_and_none_is_half_applied() {
    let kills: usize = std::env::var("TRAWL_SERVE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let t = tempfile::tempdir().unwrap();
    graph_index(t.path(), "ix", N, DIM, false);
    let dir = t.path().join("ix");
    let model = Arc::new(Mutex::new(Model::default()));
    model.lock().unwrap().present = (0..N as u64).step_by(97).collect();
    let mut next_id = 1_000_000u64;
    let mut rng = Rng(0x5eed);
    let mut in_merge = 0;
    for round in 0..kills {
        let s = Server::start(
            &[dir.to_str().unwrap()],
            &t.path().join(format!("log{round}")),
        );
        s.wait_ready();
        check(&s, &mut model.lock().unwrap());
        let stop = AtomicBool::new(false);
        let wait = Duration::from_millis(100 + rng.next() % 700);
        let addr = s.addr.clone();
        std::thread::scope(|sc| {
            let m = &*model;
            let (stop, addr, next_id) = (&stop, &addr, &mut next_id);
            sc.spawn(move || stream(addr, m, stop, 77 + round as u64, next_id));
            std::thread::sleep(wait);
            let st = s.get("/indexes/ix/merge", &[]).json();
            if st["merge"]["state"] == "running" {
                in_merge += 1;
            }
            stop.store(true, Ordering::Relaxed);
            // SAFETY: kill(2) of the server's pid, not reaped yet.
            unsafe { libc::kill(s.pid() as libc::pid_t, libc::SIGKILL) };
        });
        s.crash();
    }
    let s = Server::start(&[dir.to_str().unwrap()], &t.path().join("log-last"));
    s.wait_ready();
    let mut m = model.lock().unwrap();
    check(&s, &mut m);
    assert!(s.terminate().success());
    server::trawl_ok(&["info", dir.to_str().unwrap(), "--verify"]);
    eprintln!(
        "{kills} kills ({in_merge} seen during a merge), {} operations acknowledged, {} merges started",
        m.acked_ops, m.merges_started
    );
    assert!(m.acked_ops > kills, "too few operations to test anything");
}
