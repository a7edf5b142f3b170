//! `POST /indexes/{name}/search`: one vector or a batch, JSON or binary, answered as JSON or
//! (with `Accept: application/octet-stream`) as raw ids and distances.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use trawl::data::AnyMatrix;
use trawl::kinds::{Hits, HOLE};

use super::fields::Fields;
use crate::body::{self, Encoding, Expect, Vectors};
use crate::error::{ApiError, ApiResult};
use crate::sched::SearchJob;
use crate::state::App;

const SEARCH_FIELDS: &str = "vectors (or vector), k, params, filter, filter_plan";

/// The vectors and fields of a request to an index of `e`'s type: from a JSON body (the
/// vectors in `field` or, as one vector, `vector`), or from a binary body (fields in the
/// query string). `admit` runs once the body is read, before it is decoded (a search refused
/// for a full queue is refused cheaply, its connection kept).
pub(super) async fn vectors_and_fields(
    app: &App,
    headers: &HeaderMap,
    query: Vec<(String, String)>,
    body: Body,
    (e, field): (Expect, &str),
    admit: impl FnOnce() -> ApiResult<()>,
) -> ApiResult<(Vectors, Fields)> {
    let enc = body::encoding(headers)?;
    let bytes = body::read(body, headers, app.config.limits.max_body_bytes).await?;
    admit()?;
    match enc {
        Encoding::Json => {
            if !query.is_empty() {
                return Err(ApiError::invalid(
                    "a JSON body carries every field: the query string is for binary bodies",
                ));
            }
            let mut f = Fields::json(body::json_object(&bytes)?);
            let v = match (f.take(field), f.take("vector")) {
                (Some(v), None) => body::from_json(&v, field, e)?,
                (None, Some(v)) => {
                    let one = body::from_json(&v, "vector", e)?;
                    if !one.single {
                        return Err(ApiError::invalid(
                            "\"vector\" holds one vector (an array of numbers); give a batch \
                             as \"vectors\"",
                        ));
                    }
                    one
                }
                (Some(_), Some(_)) => {
                    return Err(ApiError::invalid(format!(
                        "give either \"{field}\" or \"vector\", not both"
                    )))
                }
                (None, None) => {
                    return Err(ApiError::invalid(format!(
                        "the body has no \"{field}\" (or \"vector\")"
                    )))
                }
            };
            Ok((v, f))
        }
        Encoding::Npy => Ok((body::from_npy(&bytes, e)?, Fields::query(query)?)),
        Encoding::Raw => Ok((body::from_raw(&bytes, headers, e)?, Fields::query(query)?)),
    }
}

/// Checks every query's values (finite, not too large), naming the first bad one.
fn check_values(m: &AnyMatrix) -> ApiResult<()> {
    fn go<T: trawl::Element>(m: &trawl::data::Matrix<T>) -> ApiResult<()> {
        for (i, row) in m.rows().enumerate() {
            trawl::search::check_query_values(row, i)
                .map_err(|e| ApiError::invalid(e.to_string()))?;
        }
        Ok(())
    }
    match m {
        AnyMatrix::F32(m) => go(m),
        AnyMatrix::U8(m) => go(m),
        AnyMatrix::I8(m) => go(m),
    }
}

/// `POST /indexes/{name}/search`.
pub async fn search(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let served = app.served(&name)?.clone();
    let ix = served.ready()?;
    let e = Expect {
        dtype: ix.dtype(),
        dim: ix.dim(),
        max: app.config.limits.max_vectors,
    };
    let (v, mut f) = vectors_and_fields(&app, &headers, query, body, (e, "vectors"), || {
        app.sched.check_room()
    })
    .await?;
    let k = f.count("k")?.unwrap_or(10);
    if k == 0 || k > app.config.limits.max_k {
        return Err(ApiError::invalid(format!(
            "k = {k} must be between 1 and {} (--max-k)",
            app.config.limits.max_k
        )));
    }
    let (filters, filter_params) = f.filters(v.n())?;
    let opts = f.options(&app.config.options)?;
    f.finish(SEARCH_FIELDS)?;
    check_values(&v.matrix)?;
    let kind_params = opts.params(&ix, k)?;
    let deadline = Instant::now() + app.config.limits.request_timeout;
    let single = v.single;
    let rx = app.sched.submit(SearchJob {
        name: name.clone(),
        index: ix,
        queries: v.matrix,
        params: kind_params,
        filters,
        filter_params,
        interleave: opts.interleave.max(1),
        deadline,
    })?;
    let answer = match tokio::time::timeout_at(deadline.into(), rx).await {
        Ok(Ok(r)) => r?,
        Ok(Err(_)) => return Err(ApiError::internal("the search thread dropped the request")),
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "the search took longer than the server's limit of {:.1} s \
                     (--request-timeout)",
                    app.config.limits.request_timeout.as_secs_f64()
                ),
            ))
        }
    };
    let mut r = if wants_binary(&headers) {
        binary(&answer.hits)
    } else {
        json(&answer.hits, single)
    };
    let timing = format!(
        "queue;dur={:.3}, search;dur={:.3}",
        answer.queue_secs * 1e3,
        answer.search_secs * 1e3
    );
    if let Ok(v) = HeaderValue::from_str(&timing) {
        r.headers_mut().insert("server-timing", v);
    }
    Ok(r)
}

fn wants_binary(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/octet-stream"))
}

/// Raw answer: `nq × k` little-endian u64 ids (`2^64 - 1` missing), then `nq × k` f32
/// distances (`inf` missing); `X-Trawl-Shape: nq,k`.
fn binary(h: &Hits) -> Response {
    let mut out = Vec::with_capacity(h.ids.len() * 12);
    for id in &h.ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    for d in &h.dists {
        out.extend_from_slice(&d.to_le_bytes());
    }
    let mut r = (StatusCode::OK, out).into_response();
    let hs = r.headers_mut();
    hs.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("{},{}", h.nq(), h.k)) {
        hs.insert("x-trawl-shape", v);
    }
    if let Ok(v) = HeaderValue::from_str(&stats(h)) {
        hs.insert("x-trawl-stats", v);
    }
    r
}

/// The batch's summed statistics, as JSON (the JSON answer's `stats`; the binary answer's
/// `X-Trawl-Stats` header).
fn stats(h: &Hits) -> String {
    let t = h.total();
    format!(
        "{{\"queries\":{},\"pages_read\":{},\"io_requests\":{},\"cache_hits\":{},\"hops\":{}}}",
        h.nq(),
        t.io.pages_read,
        t.io.io_requests,
        t.traversal.cache_hits,
        t.traversal.hops
    )
}

/// JSON answer: `{"ids": [[...]], "distances": [[...]], "stats": {...}}` (one vector: flat
/// lists); a missing result is `null` in both.
fn json(h: &Hits, single: bool) -> Response {
    let mut s = String::with_capacity(32 + h.ids.len() * 24);
    let rows = |s: &mut String, f: &dyn Fn(&mut String, usize)| {
        if !single {
            s.push('[');
        }
        for q in 0..h.nq() {
            if q > 0 {
                s.push(',');
            }
            s.push('[');
            for j in 0..h.k {
                if j > 0 {
                    s.push(',');
                }
                f(s, q * h.k + j);
            }
            s.push(']');
        }
        if !single {
            s.push(']');
        }
    };
    s.push_str("{\"ids\":");
    rows(&mut s, &|s, i| match h.ids[i] {
        HOLE => s.push_str("null"),
        id => {
            let _ = write!(s, "{id}");
        }
    });
    s.push_str(",\"distances\":");
    rows(&mut s, &|s, i| {
        if h.ids[i] == HOLE || !h.dists[i].is_finite() {
            s.push_str("null");
        } else {
            let _ = write!(s, "{}", h.dists[i]);
        }
    });
    let _ = write!(s, ",\"stats\":{}}}", stats(h));
    let mut r = (StatusCode::OK, s).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
