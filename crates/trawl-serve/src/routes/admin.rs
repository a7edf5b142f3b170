//! Health, readiness, the API document, metrics, index descriptions, merges and verification.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use trawl::kinds::graph::updates::live::MergeOptions;
use trawl::progress::{Control, Watch};

use super::fields::Fields;
use crate::body;
use crate::error::{ApiError, ApiResult};
use crate::state::{App, IndexState, MergeJob, Served};

/// `GET /healthz`: the process answers.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: `200` once every index is open, `503` before, when one failed to open, or
/// while shutting down; the body gives each index's state, and for a ready one how far its
/// node cache has filled (`warm`: filled, total, done; an index opened with `--warm
/// background` serves while it fills, reading from disk what has not arrived).
pub async fn readyz(State(app): State<Arc<App>>) -> Response {
    let states: serde_json::Map<String, Value> = app
        .indexes
        .iter()
        .map(|(name, s)| {
            let v = match &*s.state.read() {
                IndexState::Opening => json!({"state": "opening"}),
                IndexState::Ready(ix) => {
                    let w = ix.warm_progress();
                    json!({"state": "ready", "warm": {"filled": w.filled, "total": w.total,
                        "done": w.done(), "error": w.error}})
                }
                IndexState::Failed(e) => json!({"state": "failed", "error": e}),
            };
            (name.clone(), v)
        })
        .collect();
    let ready = app.ready();
    let body = json!({
        "ready": ready,
        "stopping": app.stopping.load(Ordering::Relaxed),
        "indexes": states,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /openapi.json`.
pub async fn openapi() -> Response {
    let mut r = super::OPENAPI.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// `GET /metrics`: the Prometheus text format; per-index gauges are read now.
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    let m = &app.metrics;
    m.uptime.set(app.started.elapsed().as_secs_f64());
    for (name, s) in &app.indexes {
        let labels = [name.as_str()];
        let job = s.merge.lock().clone();
        m.merge_progress
            .with_label_values(&labels)
            .set(job.progress());
        m.merge_running
            .with_label_values(&labels)
            .set(i64::from(matches!(job, MergeJob::Running { .. })));
        let wal = std::fs::metadata(s.dir.join(trawl::kinds::graph::updates::wal::FILE_NAME))
            .map_or(0, |md| md.len());
        m.wal_bytes.with_label_values(&labels).set(wal as i64);
        let hits = m.cache_hits.with_label_values(&labels).get();
        let pages = m.pages_read.with_label_values(&labels).get();
        let ratio = if hits + pages == 0 {
            0.0
        } else {
            hits as f64 / (hits + pages) as f64
        };
        m.cache_hit_ratio.with_label_values(&labels).set(ratio);
        if let IndexState::Ready(ix) = &*s.state.read() {
            let delta = ix
                .graph()
                .and_then(|g| g.live())
                .map_or(0, |l| l.delta_len());
            m.delta_vectors.with_label_values(&labels).set(delta as i64);
            m.vectors.with_label_values(&labels).set(ix.n() as i64);
        }
    }
    let mut r = m.render().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// One index in brief.
fn brief(name: &str, s: &Served) -> Value {
    match &*s.state.read() {
        IndexState::Ready(ix) => json!({
            "name": name, "state": "ready", "kind": ix.kind().name(), "n": ix.n(),
            "dim": ix.dim(), "dtype": ix.dtype().name(), "metric": ix.metric().name(),
            "writable": Served::writer(ix, name).is_ok(),
        }),
        IndexState::Opening => json!({"name": name, "state": "opening"}),
        IndexState::Failed(e) => json!({"name": name, "state": "failed", "error": e}),
    }
}

/// `GET /indexes`.
pub async fn list(State(app): State<Arc<App>>) -> Json<Value> {
    let v: Vec<Value> = app.indexes.iter().map(|(n, s)| brief(n, s)).collect();
    Json(json!({ "indexes": v }))
}

/// `GET /indexes/{name}`: the brief, the index's description (`trawl info --json`), memory,
/// disk, the delta and the last merge.
pub async fn info(State(app): State<Arc<App>>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let s = app.served(&name)?;
    let ix = s.ready()?;
    let mut v = brief(&name, s);
    let info = ix.info()?;
    let live = ix.graph().and_then(|g| g.live());
    if let Value::Object(m) = &mut v {
        m.insert(
            "info".into(),
            serde_json::to_value(info).unwrap_or(Value::Null),
        );
        m.insert("memory_bytes".into(), json!(ix.memory_bytes()));
        m.insert("disk_bytes".into(), json!(ix.disk_bytes()));
        m.insert("delta_len".into(), json!(live.map_or(0, |l| l.delta_len())));
        m.insert("merge".into(), s.merge.lock().status());
    }
    Ok(Json(v))
}

/// `POST /indexes/{name}/merge` (`{"threads": N}` optional): starts a merge in the background
/// (`202` with its status; `409` while one runs). Searches and writes go on meanwhile;
/// `GET` on the same path reports its progress and, once done, its report.
pub async fn merge(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let s = app.served(&name)?.clone();
    let ix = s.ready()?;
    Served::writer(&ix, &name)?;
    let bytes = body::read(body, &headers, app.config.limits.max_body_bytes).await?;
    let mut f = Fields::json(body::json_object(&bytes)?);
    let threads = f.count("threads")?.unwrap_or(app.config.merge_threads);
    f.finish("threads")?;
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
        t => t,
    };
    let mut job = s.merge.lock();
    if let MergeJob::Running { .. } = &*job {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "merge_running",
            format!("a merge of {name:?} is running: see GET /indexes/{name}/merge"),
        ));
    }
    let id = job.id() + 1;
    let watch = Arc::new(Watch::default());
    *job = MergeJob::Running {
        id,
        started: Instant::now(),
        watch: watch.clone(),
    };
    let status = job.status();
    drop(job);
    s.merge_cancel.store(false, Ordering::Relaxed);
    let ctl = Control::silent()
        .with_cancel_flag(s.merge_cancel.clone())
        .with_watch(watch);
    let (s2, app2) = (s.clone(), app.clone());
    let handle = std::thread::Builder::new()
        .name(format!("trawl-merge-{name}"))
        .spawn(move || run_merge(&app2, &s2, ix, id, threads, &ctl))
        .map_err(|e| ApiError::internal(format!("starting the merge thread: {e}")))?;
    if let Some(old) = s.merge_thread.lock().replace(handle) {
        let _ = old.join();
    }
    Ok((StatusCode::ACCEPTED, Json(json!({ "merge": status }))).into_response())
}

fn run_merge(
    app: &App,
    s: &Served,
    ix: Arc<trawl::kinds::AnyIndex>,
    id: u64,
    threads: usize,
    ctl: &Control,
) {
    let t = Instant::now();
    let r = match Served::writer(&ix, &s.name) {
        Ok(live) => live
            .0
            .merge_with(
                &MergeOptions {
                    threads,
                    ..MergeOptions::default()
                },
                ctl,
            )
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.message),
    };
    let result = if r.is_ok() { "ok" } else { "failed" };
    app.metrics
        .merges
        .with_label_values(&[s.name.as_str(), result])
        .inc();
    *s.merge.lock() = match r {
        Ok(report) => {
            tracing::info!(index = %s.name, secs = t.elapsed().as_secs_f64(), "merge done");
            MergeJob::Done {
                id,
                secs: t.elapsed().as_secs_f64(),
                report: serde_json::to_value(report).unwrap_or(Value::Null),
            }
        }
        Err(error) => {
            tracing::error!(index = %s.name, %error, "merge failed");
            MergeJob::Failed { id, error }
        }
    };
}

/// `GET /indexes/{name}/merge`: the last merge's status.
pub async fn merge_status(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let s = app.served(&name)?;
    Ok(Json(json!({ "merge": s.merge.lock().status() })))
}

/// `POST /indexes/{name}/verify`: reads every file whole and checks it (may take long: it is
/// not held to the request timeout).
pub async fn verify(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let ix = app.served(&name)?.ready()?;
    let r = tokio::task::spawn_blocking(move || ix.verify(&Control::silent()))
        .await
        .map_err(|e| ApiError::internal(format!("the verify thread failed: {e}")))??;
    Ok(Json(serde_json::to_value(r).unwrap_or(Value::Null)))
}
