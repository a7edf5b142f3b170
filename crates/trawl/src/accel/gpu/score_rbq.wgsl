// Kernel 2 for RaBitQ codes, `chunks` workgroups per query, each scoring up to CHUNK of its
// distinct candidates with `rbq_distance` (gpu/rbq.wgsl, appended by the host) and storing the
// estimate's order-preserving key. The query's words start at `tables[qinfo[q].tab_off]`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qinfo: array<QInfo>;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> tables: array<u32>;
@group(0) @binding(4) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> counts: array<u32>;

var<workgroup> unique_wg: u32;

@compute @workgroup_size(256)
fn score_rbq(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lin = linear_group(wid, nwg);
    let q = lin / params.chunks;
    let chunk = lin % params.chunks;
    if (q >= params.nq) {
        return;
    }
    if (lid == 0u) {
        unique_wg = counts[q];
    }
    let unique = workgroupUniformLoad(&unique_wg);
    let start = chunk * CHUNK;
    if (start >= unique) {
        return;
    }
    let qb = qinfo[q].tab_off;
    let end = min(start + CHUNK, unique);
    let off = qinfo[q].cand_off;
    for (var k = start + lid; k < end; k += WG) {
        let id = cand[off + k].y;
        let cb = id * WPC;
        let est = rbq_distance(qb, cb);
        cand[off + k] = vec2<u32>(key_of(est), id);
    }
}
