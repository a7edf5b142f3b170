//! The accept loop (plain TCP or TLS), index opening in the background, and the graceful
//! shutdown: on SIGTERM or Ctrl-C the listener closes, requests in flight finish, the search
//! threads drain, a running merge is cancelled (its files are left as they were), every
//! writable index's log is synced, and `run` returns.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use trawl::kinds::graph::KindName;
use trawl::progress::Control;

use crate::config::ServeConfig;
use crate::metrics::Metrics;
use crate::sched::Scheduler;
use crate::state::{App, IndexState, MergeJob, Served};
use crate::ServeError;

/// Longest a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds the runtime and serves until SIGTERM or Ctrl-C; `on_bound` is called with the
/// address once listening (before the indexes are open).
pub fn run(
    config: ServeConfig,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> Result<(), ServeError> {
    config.validate().map_err(ServeError::Config)?;
    for s in &config.indexes {
        // A typo fails now, not in /readyz.
        trawl::kinds::kind_of(&s.dir)
            .map_err(|e| ServeError::Config(format!("{} ({}): {e}", s.name, s.dir.display())))?;
    }
    let tls = match &config.tls {
        Some(files) => Some(crate::tls::acceptor(files).map_err(ServeError::Config)?),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads)
        .thread_name("trawl-http")
        .enable_all()
        .build()
        .map_err(|e| ServeError::Io(format!("starting the runtime: {e}")))?;
    rt.block_on(serve(config, tls, on_bound))
}

async fn serve(
    config: ServeConfig,
    tls: Option<tokio_rustls::TlsAcceptor>,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| ServeError::Io(format!("binding {}: {e}", config.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Io(e.to_string()))?;
    let metrics = Metrics::new();
    let sched = Scheduler::start(
        config.search_threads,
        config.queue,
        config.chunk,
        metrics.clone(),
    )
    .map_err(|e| ServeError::Io(format!("starting the search threads: {e}")))?;
    let indexes: BTreeMap<String, Arc<Served>> = config
        .indexes
        .iter()
        .map(|s| {
            let served = Served {
                name: s.name.clone(),
                dir: s.dir.clone(),
                state: RwLock::new(IndexState::Opening),
                merge: Mutex::new(MergeJob::None),
                merge_cancel: Arc::new(AtomicBool::new(false)),
                merge_thread: Mutex::new(None),
            };
            (s.name.clone(), Arc::new(served))
        })
        .collect();
    let app = Arc::new(App {
        writes: Arc::new(Semaphore::new(config.max_pending_writes)),
        config,
        indexes,
        sched,
        metrics,
        stopping: AtomicBool::new(false),
        started: Instant::now(),
    });
    tracing::info!(%addr, tls = tls.is_some(), "listening");
    on_bound(addr);
    let openers = open_all(&app);
    let router = crate::routes::router(app.clone());
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(shutdown_signal());
    loop {
        tokio::select! {
            conn = listener.accept() => {
                let (stream, _peer) = match conn {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors and the like: pause instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let svc = TowerToHyperService::new(router.clone());
                let watcher = graceful.watcher();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_conn(TokioIo::new(stream), svc, watcher).await,
                        Some(acc) => match tokio::time::timeout(HEADER_TIMEOUT, acc.accept(stream)).await {
                            Ok(Ok(s)) => serve_conn(TokioIo::new(s), svc, watcher).await,
                            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        },
                    }
                });
            }
            _ = &mut stop => break,
        }
    }
    tracing::info!("shutting down: no new connections, finishing the requests in flight");
    app.stopping.store(true, Ordering::Relaxed);
    drop(listener);
    let grace = app.config.limits.request_timeout + Duration::from_secs(5);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {grace:?}: closing them");
    }
    let app2 = app.clone();
    tokio::task::spawn_blocking(move || finish(&app2, openers, grace))
        .await
        .map_err(|e| ServeError::Io(format!("shutting down: {e}")))?
}

async fn serve_conn<I>(
    io: TokioIo<I>,
    svc: TowerToHyperService<axum::Router>,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true)
        .serve_connection(io, svc);
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Opens every index on a thread of its own (the service answers meanwhile; `/readyz` says
/// when they are ready).
fn open_all(app: &Arc<App>) -> Vec<std::thread::JoinHandle<()>> {
    app.indexes
        .values()
        .filter_map(|s| {
            let (s, app) = (s.clone(), app.clone());
            std::thread::Builder::new()
                .name(format!("trawl-open-{}", s.name))
                .spawn(move || {
                    let t = Instant::now();
                    let st = match open_one(&app.config, &s) {
                        Ok(ix) => {
                            tracing::info!(index = %s.name, kind = ix.kind().label(), n = ix.n(),
                                secs = t.elapsed().as_secs_f64(), "index ready");
                            IndexState::Ready(Arc::new(ix))
                        }
                        Err(e) => {
                            tracing::error!(index = %s.name, error = %e, "opening failed");
                            IndexState::Failed(e)
                        }
                    };
                    *s.state.write() = st;
                })
                .ok()
        })
        .collect()
}

fn open_one(config: &ServeConfig, s: &Served) -> Result<trawl::kinds::AnyIndex, String> {
    let kind = trawl::kinds::kind_of(&s.dir).map_err(|e| e.to_string())?;
    let mut o = config.options.clone();
    o.writable = !config.read_only && kind == KindName::Graph;
    trawl::kinds::open_with(&s.dir, &o, &Control::silent())
        .map(|(ix, _)| ix)
        .map_err(|e| e.to_string())
}

/// After the last request: drain the search threads, cancel and join merges, sync logs.
fn finish(
    app: &App,
    openers: Vec<std::thread::JoinHandle<()>>,
    grace: Duration,
) -> Result<(), ServeError> {
    app.sched.shutdown(grace);
    for s in app.indexes.values() {
        s.merge_cancel.store(true, Ordering::Relaxed);
    }
    for s in app.indexes.values() {
        if let Some(h) = s.merge_thread.lock().take() {
            let _ = h.join();
        }
    }
    for h in openers {
        let _ = h.join();
    }
    let mut failed = None;
    for s in app.indexes.values() {
        if let IndexState::Ready(ix) = &*s.state.read() {
            if let Ok(live) = Served::writer(ix, &s.name) {
                match live.0.flush() {
                    Ok(()) => tracing::info!(index = %s.name, "log synced"),
                    Err(e) => {
                        tracing::error!(index = %s.name, error = %e, "syncing the log failed");
                        failed = Some(format!("{}: syncing the log: {e}", s.name));
                    }
                }
            }
        }
    }
    match failed {
        Some(e) => Err(ServeError::Io(e)),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}
