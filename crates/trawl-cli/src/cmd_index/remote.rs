//! `trawl search --remote URL`: the same search, answered by a `trawl serve` server (the
//! queries sent raw, the answer read raw; the search flags that differ from the library's
//! defaults sent as parameters).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use trawl::data::matrix::AnyMatrix;
use trawl::kinds::{Hits, Options};
use trawl::search::QueryStats;

use std::path::Path;

use super::SearchOptions;

/// Where the server is and how to reach it.
#[derive(Debug, Clone, Copy)]
pub struct Remote<'a> {
    /// `http://host:port` or `https://...`.
    pub url: &'a str,
    /// The API key (else `$TRAWL_API_KEY`).
    pub api_key: Option<&'a str>,
    /// A CA certificate to trust besides the usual roots.
    pub ca_cert: Option<&'a Path>,
}

/// Environment variable holding the API key of `--remote` when `--api-key` is not given.
pub const KEY_ENV: &str = "TRAWL_API_KEY";

fn agent(r: &Remote<'_>) -> Result<ureq::Agent> {
    let mut b = ureq::AgentBuilder::new();
    if let Some(ca) = r.ca_cert {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(ca)
            .with_context(|| format!("reading {}", ca.display()))?;
        for c in certs {
            let c = c.with_context(|| format!("{}: not a PEM certificate", ca.display()))?;
            roots
                .add(c)
                .with_context(|| format!("{}: a certificate rustls refuses", ca.display()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        b = b.tls_config(Arc::new(cfg));
    }
    Ok(b.build())
}

/// The raw body of `m` and its dtype name.
fn raw(m: &AnyMatrix) -> (Vec<u8>, &'static str) {
    match m {
        AnyMatrix::F32(m) => (
            m.as_slice().iter().flat_map(|x| x.to_le_bytes()).collect(),
            "float32",
        ),
        AnyMatrix::U8(m) => (m.as_slice().to_vec(), "uint8"),
        AnyMatrix::I8(m) => (m.as_slice().iter().map(|&x| x as u8).collect(), "int8"),
    }
}

/// Searches `queries` for `k` neighbours (list size `l`, the search flags `o`) in the index
/// `name` of the server `r`; returns the hits (statistics summed into the first query's,
/// the wall time the request's).
pub fn search_remote(
    r: &Remote<'_>,
    name: &str,
    (k, l): (usize, Option<usize>),
    o: &SearchOptions,
    queries: &AnyMatrix,
) -> Result<Hits> {
    let url = r.url.trim_end_matches('/');
    let opts = o.options(l);
    let mut req = agent(r)?
        .post(&format!("{url}/indexes/{name}/search"))
        .set("content-type", "application/octet-stream")
        .set("accept", "application/octet-stream")
        .query("k", &k.to_string());
    let (body, dtype) = raw(queries);
    req = req.set("x-trawl-dtype", dtype).set(
        "x-trawl-shape",
        &format!("{},{}", queries.n(), queries.dim()),
    );
    for (name, v) in opts.search_params_changed(&Options::default()) {
        let text = match v {
            serde_json::Value::String(s) => s,
            v => v.to_string(),
        };
        req = req.query(&name, &text);
    }
    let f = &o.filter;
    if f.filters.is_some() {
        bail!("--remote takes one --filter for every query (per-query filters: the JSON API)");
    }
    if let Some(text) = &f.filter {
        req = req.query("filter", text);
    }
    if f.filter_plan != "auto" {
        req = req.query("filter_plan", &f.filter_plan);
    }
    let key = r
        .api_key
        .map(str::to_string)
        .or_else(|| std::env::var(KEY_ENV).ok().filter(|k| !k.is_empty()));
    if let Some(k) = key {
        req = req.set("authorization", &format!("Bearer {k}"));
    }
    let t = Instant::now();
    let resp = match req.send_bytes(&body) {
        Ok(r) => r,
        Err(ureq::Error::Status(code, r)) => {
            let text = r.into_string().unwrap_or_default();
            let msg = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            bail!("{url}: HTTP {code}: {msg}");
        }
        Err(e) => bail!("{url}: {e}"),
    };
    let shape = resp.header("x-trawl-shape").unwrap_or("0,0").to_string();
    let stats: serde_json::Value = resp
        .header("x-trawl-stats")
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut resp.into_reader(), &mut bytes)?;
    let wall_secs = t.elapsed().as_secs_f64();
    let (nq, k) = shape
        .split_once(',')
        .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
        .context("the answer has no X-Trawl-Shape")?;
    if bytes.len() != nq * k * 12 {
        bail!(
            "the answer holds {} bytes, not {nq} × {k} results",
            bytes.len()
        );
    }
    let (ib, db) = bytes.split_at(nq * k * 8);
    let mut st = vec![QueryStats::default(); nq];
    if let Some(first) = st.first_mut() {
        let n = |key: &str| stats[key].as_u64().unwrap_or(0);
        first.io.pages_read = n("pages_read");
        first.io.io_requests = n("io_requests");
        first.traversal.cache_hits = n("cache_hits");
        first.traversal.hops = n("hops");
    }
    Ok(Hits {
        k,
        ids: ib
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect(),
        dists: db
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect(),
        stats: st,
        wall_secs,
    })
}
