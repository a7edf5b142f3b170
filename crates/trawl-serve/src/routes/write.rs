//! Writes — `insert`, `upsert`, `delete`, `flush` — each acknowledged only once the
//! write-ahead log holds it (synced, with the default durability); and `contains`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::OwnedSemaphorePermit;
use trawl::data::AnyMatrix;
use trawl::filter::Attributes;
use trawl::kinds::graph::updates::live::{LiveError, LiveIndex};
use trawl::kinds::AnyIndex;

use super::fields::Fields;
use super::search::vectors_and_fields;
use crate::body::{self, Expect};
use crate::error::{ApiError, ApiResult};
use crate::state::{App, Served};

/// A write slot, or `429` when `max_pending_writes` writes are waiting already.
fn permit(app: &App) -> ApiResult<OwnedSemaphorePermit> {
    app.writes.clone().try_acquire_owned().map_err(|_| {
        ApiError::overloaded(
            format!(
                "{} writes are waiting already; retry later",
                app.config.max_pending_writes
            ),
            1,
        )
    })
}

/// Runs `f` on the live index of `ix` on a blocking thread (a write syncs the log: it must not
/// hold a runtime thread).
async fn on_writer<R: Send + 'static>(
    ix: Arc<AnyIndex>,
    name: String,
    permit: OwnedSemaphorePermit,
    f: impl FnOnce(&LiveIndex) -> Result<R, LiveError> + Send + 'static,
) -> ApiResult<R> {
    // Checked before the blocking thread, so a read-only index answers at once.
    Served::writer(&ix, &name)?;
    let r = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let live = Served::writer(&ix, &name)?;
        f(live.0).map_err(ApiError::from)
    })
    .await;
    match r {
        Ok(r) => r,
        Err(e) => Err(ApiError::internal(format!("the write thread failed: {e}"))),
    }
}

fn expect(app: &App, ix: &AnyIndex) -> Expect {
    Expect {
        dtype: ix.dtype(),
        dim: ix.dim(),
        max: app.config.limits.max_vectors,
    }
}

/// Writes `m` (insert, or upsert of `ids`) with `attrs`; returns the ids.
fn write_rows(
    live: &LiveIndex,
    m: &AnyMatrix,
    ids: Option<&[u64]>,
    attrs: Option<&Attributes>,
    upsert: bool,
) -> Result<Vec<u64>, LiveError> {
    match (m, upsert) {
        (AnyMatrix::F32(m), false) => live.insert_with(ids, m.as_slice(), attrs),
        (AnyMatrix::U8(m), false) => live.insert_with(ids, m.as_slice(), attrs),
        (AnyMatrix::I8(m), false) => live.insert_with(ids, m.as_slice(), attrs),
        (AnyMatrix::F32(m), true) => live.upsert_with(ids.unwrap_or(&[]), m.as_slice(), attrs),
        (AnyMatrix::U8(m), true) => live.upsert_with(ids.unwrap_or(&[]), m.as_slice(), attrs),
        (AnyMatrix::I8(m), true) => live.upsert_with(ids.unwrap_or(&[]), m.as_slice(), attrs),
    }
}

async fn write_vectors(
    app: Arc<App>,
    name: String,
    query: Vec<(String, String)>,
    headers: HeaderMap,
    body: Body,
    upsert: bool,
) -> ApiResult<Json<Value>> {
    let ix = app.served(&name)?.ready()?;
    Served::writer(&ix, &name)?;
    let e = expect(&app, &ix);
    let (v, mut f) =
        vectors_and_fields(&app, &headers, query, body, (e, "vectors"), || Ok(())).await?;
    let ids = f.ids("ids")?;
    let attrs = f.attributes(v.n())?;
    f.finish("vectors (or vector), ids, labels, attrs, attributes")?;
    if upsert && ids.is_none() {
        return Err(ApiError::invalid("upsert needs \"ids\": one per vector"));
    }
    if let Some(ids) = &ids {
        if ids.len() != v.n() {
            return Err(ApiError::invalid(format!(
                "{} ids for {} vectors (one per vector)",
                ids.len(),
                v.n()
            )));
        }
    }
    let n = v.n();
    let p = permit(&app)?;
    let written = on_writer(ix, name.clone(), p, move |live| {
        write_rows(live, &v.matrix, ids.as_deref(), attrs.as_deref(), upsert)
    })
    .await?;
    let op = if upsert { "upsert" } else { "insert" };
    app.metrics
        .written
        .with_label_values(&[name.as_str(), op])
        .inc_by(n as u64);
    Ok(Json(json!({ "ids": written })))
}

/// `POST /indexes/{name}/insert`: `{"vectors": [[...]], "ids"?, "labels"?, "attrs"?,
/// "attributes"?}` (or a binary body, `?ids=1,2,3`) → `{"ids": [...]}`, the ids given or
/// assigned.
pub async fn insert(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    write_vectors(app, name, query, headers, body, false).await
}

/// `POST /indexes/{name}/upsert`: as insert, `ids` required; each id's vector is replaced
/// (or inserted) in one operation.
pub async fn upsert(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    write_vectors(app, name, query, headers, body, true).await
}

/// The `ids` of a JSON body.
async fn ids_body(app: &App, headers: &HeaderMap, body: Body) -> ApiResult<Vec<u64>> {
    if body::encoding(headers)? != body::Encoding::Json {
        return Err(ApiError::invalid("send the ids as JSON: {\"ids\": [...]}"));
    }
    let bytes = body::read(body, headers, app.config.limits.max_body_bytes).await?;
    let mut f = Fields::json(body::json_object(&bytes)?);
    let ids = f
        .ids("ids")?
        .ok_or_else(|| ApiError::invalid("the body has no \"ids\""))?;
    f.finish("ids")?;
    if ids.len() > app.config.limits.max_vectors {
        return Err(ApiError::too_large(format!(
            "{} ids in one request; the limit is {} (--max-vectors)",
            ids.len(),
            app.config.limits.max_vectors
        )));
    }
    Ok(ids)
}

/// `POST /indexes/{name}/delete`: `{"ids": [...]}` → `{"deleted": n}`; every id must be
/// present and given once, else nothing is deleted (`400`).
pub async fn delete(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let ix = app.served(&name)?.ready()?;
    Served::writer(&ix, &name)?;
    let ids = ids_body(&app, &headers, body).await?;
    let p = permit(&app)?;
    let r = on_writer(ix, name.clone(), p, move |live| live.delete(&ids)).await?;
    app.metrics
        .written
        .with_label_values(&[name.as_str(), "delete"])
        .inc_by(r.deleted as u64);
    Ok(Json(json!({ "deleted": r.deleted })))
}

/// `POST /indexes/{name}/flush`: syncs the write-ahead log (a no-op with the default
/// durability, where every write is synced before it is acknowledged).
pub async fn flush(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let ix = app.served(&name)?.ready()?;
    let p = permit(&app)?;
    on_writer(ix, name, p, |live| live.flush()).await?;
    Ok(Json(json!({ "flushed": true })))
}

/// `POST /indexes/{name}/contains`: `{"ids": [...]}` → `{"present": [true, false, ...]}`:
/// whether a search can return each id now.
pub async fn contains(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let ix = app.served(&name)?.ready()?;
    let ids = ids_body(&app, &headers, body).await?;
    let present: Vec<bool> = match ix.graph().and_then(|g| g.live()) {
        Some(live) => ids.iter().map(|&id| live.contains(id)).collect(),
        // Without updates, ids are the row numbers.
        None => ids.iter().map(|&id| id < ix.n() as u64).collect(),
    };
    Ok(Json(json!({ "present": present })))
}
