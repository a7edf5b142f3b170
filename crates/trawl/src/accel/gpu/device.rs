//! The device plumbing the GPU kernels share (the IVF filter's and the flash search's):
//! opening an adapter, capturing device errors, driving `wgpu` futures and uploading the
//! resident PQ codes.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use wgpu::util::DeviceExt;

use super::WG;
use crate::accel::AccelError;
use crate::quant::pq::PqCodes;

/// Drives a `wgpu` future to completion. On native backends they are ready at once.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// Captures the device errors raised while it lives (validation, out of memory, internal).
pub(crate) struct Scopes {
    guards: Vec<wgpu::ErrorScopeGuard>,
}

impl Scopes {
    pub(crate) fn push(device: &wgpu::Device) -> Self {
        let guards = [
            wgpu::ErrorFilter::Internal,
            wgpu::ErrorFilter::OutOfMemory,
            wgpu::ErrorFilter::Validation,
        ]
        .into_iter()
        .map(|f| device.push_error_scope(f))
        .collect();
        Self { guards }
    }

    /// Pops the scopes; the first error caught, if any.
    pub(crate) fn pop(mut self, what: &str) -> Result<(), AccelError> {
        let mut first = None;
        while let Some(g) = self.guards.pop() {
            if let Some(e) = block_on(g.pop()) {
                first.get_or_insert(e);
            }
        }
        match first {
            None => Ok(()),
            Some(e) => Err(AccelError::Device(format!("{what}: {e}"))),
        }
    }
}

/// The instance every device is opened through: Vulkan (the backends this build has),
/// debugging flags from the environment.
fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        flags: wgpu::InstanceFlags::empty().with_env(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// [`crate::accel::adapters`].
pub(crate) fn enumerate_adapters() -> Vec<crate::accel::AdapterSummary> {
    block_on(instance().enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(|a| {
            let ai = a.get_info();
            crate::accel::AdapterSummary {
                name: ai.name,
                backend: format!("{:?}", ai.backend),
                device_type: format!("{:?}", ai.device_type),
                driver: format!("{} ({})", ai.driver, ai.driver_info),
                vendor: ai.vendor,
                device: ai.device,
            }
        })
        .collect()
}

/// An opened device: what [`open_device`] returns.
pub(crate) struct Opened {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The adapter's name, driver and type.
    pub name: String,
    pub limits: wgpu::Limits,
    /// Device errors no error scope caught.
    pub uncaptured: Arc<Mutex<Vec<String>>>,
}

/// Opens the first high-performance adapter `wgpu` finds (software ones such as lavapipe
/// included) with its own limits; [`AccelError::NoAdapter`] when there is none or it has fewer
/// than 256 invocations per workgroup or `storage` storage buffers per shader stage.
pub(crate) fn open_device(label: &str, storage: u32) -> Result<Opened, AccelError> {
    let instance = instance();
    let adapter = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
    }))
    .map_err(|e| AccelError::NoAdapter(e.to_string()))?;
    let ai = adapter.get_info();
    let name = format!(
        "{}; driver {} ({}); {:?} device",
        ai.name, ai.driver, ai.driver_info, ai.device_type
    );
    let limits = adapter.limits();
    if limits.max_compute_invocations_per_workgroup < WG || limits.max_compute_workgroup_size_x < WG
    {
        return Err(AccelError::NoAdapter(format!(
            "{name}: fewer than 256 invocations per workgroup"
        )));
    }
    if limits.max_storage_buffers_per_shader_stage < storage {
        return Err(AccelError::NoAdapter(format!(
            "{name}: fewer than {storage} storage buffers per shader stage"
        )));
    }
    let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some(label),
        required_features: wgpu::Features::empty(),
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .map_err(|e| AccelError::NoAdapter(format!("{name}: {e}")))?;
    let uncaptured = Arc::new(Mutex::new(Vec::new()));
    {
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
    }
    Ok(Opened {
        device,
        queue,
        name,
        limits,
        uncaptured,
    })
}

/// Uploads `codes`, each code's bytes packed into `wpc` little-endian `u32` words
/// (zero-padded), into one storage buffer.
pub(crate) fn upload_codes(device: &wgpu::Device, codes: &PqCodes, wpc: usize) -> wgpu::Buffer {
    let m = codes.m();
    if m.is_multiple_of(4) && !codes.as_bytes().is_empty() {
        return device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("pq codes"),
            contents: codes.as_bytes(),
            usage: wgpu::BufferUsages::STORAGE,
        });
    }
    let bytes = codes.n() as u64 * wpc as u64 * 4;
    let mut packed = vec![0u8; padded(bytes) as usize];
    for (dst, src) in packed
        .chunks_exact_mut(wpc * 4)
        .zip(codes.as_bytes().chunks_exact(m))
    {
        dst[..m].copy_from_slice(src);
    }
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("pq codes"),
        contents: &packed,
        usage: wgpu::BufferUsages::STORAGE,
    })
}

/// `x` rounded up to a multiple of 8, at least 16 (buffers are never empty).
pub(crate) fn padded(x: u64) -> u64 {
    x.div_ceil(8).max(2) * 8
}

/// [`AccelError::Device`] for `what`, with the device errors no scope caught appended.
pub(crate) fn device_error(uncaptured: &Mutex<Vec<String>>, what: String) -> AccelError {
    let extra = uncaptured.lock().map(|v| v.join("; ")).unwrap_or_default();
    if extra.is_empty() {
        AccelError::Device(what)
    } else {
        AccelError::Device(format!("{what} ({extra})"))
    }
}
