//! Helpers of the service's tests: the real `trawl serve` process on a loopback port the
//! system chooses, and a small HTTP/1.1 client over a plain socket (so a test controls every
//! byte it sends: malformed JSON, binary bodies, missing headers).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `trawl serve`.
pub struct Server {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Where its stderr (the log) goes.
    pub log: PathBuf,
}

/// An answer.
#[derive(Debug)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The error message of an error answer.
    pub fn message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

impl Server {
    /// Starts `trawl serve ARGS --listen 127.0.0.1:0` (logs into `log`) and waits for its
    /// address line.
    pub fn start(args: &[&str], log: &Path) -> Server {
        Self::start_env(args, log, &[])
    }

    /// [`Server::start`] with environment variables.
    pub fn start_env(args: &[&str], log: &Path, env: &[(&str, &str)]) -> Server {
        let mut c = Command::new(env!("CARGO_BIN_EXE_trawl"));
        c.arg("serve").args(args);
        if !args.contains(&"--listen") {
            c.args(["--listen", "127.0.0.1:0"]);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let err = std::fs::File::create(log).unwrap();
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        let addr = line
            .split("://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!(
                    "trawl serve {args:?} did not start: {line:?}\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            })
            .to_string();
        Server {
            child: Some(child),
            addr,
            log: log.to_path_buf(),
        }
    }

    /// Waits until `/readyz` answers 200 (over TLS when `tls`: then by the log line).
    pub fn wait_ready_with(&self, tls: bool) {
        if !tls {
            return self.wait_ready();
        }
        let t = Instant::now();
        while !self.log_text().contains("index ready") {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "not ready: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `/readyz` answers 200.
    pub fn wait_ready(&self) {
        let t = Instant::now();
        loop {
            if self.get("/readyz", &[]).status == 200 {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "not ready: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One request; `Connection: close`.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        request(&self.addr, method, path, headers, body)
    }

    /// `GET path`.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        self.request("GET", path, headers, b"")
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Resp {
        let mut h = vec![("content-type", "application/json")];
        h.extend_from_slice(headers);
        self.request("POST", path, &h, body.to_string().as_bytes())
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let mut c = self.child.take().unwrap();
        // SAFETY: kill(2) with the child's pid, which has not been reaped yet.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        c.wait().unwrap()
    }

    /// SIGKILL (a crash), and reaps the process.
    pub fn crash(mut self) {
        let mut c = self.child.take().unwrap();
        let _ = c.kill();
        let _ = c.wait();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One HTTP/1.1 request to `addr` (`Connection: close`).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut msg = head.into_bytes();
    msg.extend_from_slice(body);
    // The server may answer (and close) before reading a refused body: a failed write is
    // then not the test's failure, the answer is.
    let _ = s.write_all(&msg);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Resp {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let len = usize::from_str_radix(String::from_utf8_lossy(&b[..nl]).trim(), 16).unwrap_or(0);
        if len == 0 {
            return out;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + len]);
        b = &b[nl + 2 + len + 2..];
    }
}

/// A `.npy` array of f32 of `shape` (`(n, d)` or `(d,)`).
pub fn npy_f32(values: &[f32], shape: &str) -> Vec<u8> {
    npy(
        "<f4",
        shape,
        &values
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>(),
    )
}

/// A `.npy` array of `descr` and `shape` holding `payload`.
pub fn npy(descr: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
    trawl_serve::body::encode_npy(descr, shape, payload)
}

/// Seeded pseudo-random values in [-1, 1) (xorshift).
pub fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Runs `trawl --quiet ARGS`, which must succeed; returns stdout.
pub fn trawl_ok(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .arg("--quiet")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "trawl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes an fbin file.
pub fn write_fbin(path: &Path, dim: usize, values: &[f32]) {
    let mut b = Vec::new();
    b.extend_from_slice(&((values.len() / dim) as u32).to_le_bytes());
    b.extend_from_slice(&(dim as u32).to_le_bytes());
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// A graph index of `n` seeded vectors of dimension `dim` in `dir/name` (labels `even` / `odd`
/// by row, and `a` on every third row, when `labels`); returns the vectors.
pub fn graph_index(dir: &Path, name: &str, n: usize, dim: usize, labels: bool) -> Vec<f32> {
    let data = values(7, n * dim);
    let base = dir.join(format!("{name}.fbin"));
    write_fbin(&base, dim, &data);
    let ix = dir.join(name);
    let mut args = vec![
        "build".to_string(),
        base.to_str().unwrap().to_string(),
        ix.to_str().unwrap().to_string(),
        "--metric".into(),
        "l2".into(),
        "-R".into(),
        "24".into(),
        "-L".into(),
        "48".into(),
        "--pq-bytes".into(),
        "8".into(),
    ];
    if labels {
        let text: String = (0..n)
            .map(|i| {
                let mut l = vec![if i % 2 == 0 { "even" } else { "odd" }];
                if i % 3 == 0 {
                    l.push("a");
                }
                l.join(",") + "\n"
            })
            .collect();
        let lf = dir.join(format!("{name}.labels"));
        std::fs::write(&lf, text).unwrap();
        args.push("--labels".into());
        args.push(lf.to_str().unwrap().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    trawl_ok(&args);
    data
}
