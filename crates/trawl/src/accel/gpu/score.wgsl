// Kernel 2, `chunks` workgroups per query, each scoring up to CHUNK of its distinct candidates:
// PQ-ADC against the query's table, read from workgroup memory when it fits (TABLE_IN_WG) or
// from the storage buffer, summed exactly as `adc_distance` on the host (four accumulators,
// subspace s into accumulator s % 4 in increasing s, then (a0 + a1) + (a2 + a3)). Writes the
// distance's order-preserving key into `cand[..].x`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qinfo: array<QInfo>;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> tables: array<u32>;
@group(0) @binding(4) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> counts: array<u32>;

// The table's f32 bits (tab[0] first carries the distinct count to every invocation). The
// pipeline skips the zero-initialisation of workgroup memory: tab is written before it is read.
var<workgroup> tab: array<u32, TAB_WG>;

fn entry(tbase: u32, s: u32, c: u32) -> f32 {
    if (TABLE_IN_WG) {
        return bitcast<f32>(tab[s * 256u + c]);
    }
    return bitcast<f32>(tables[tbase + s * 256u + c]);
}

@compute @workgroup_size(256)
fn score(
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
        tab[0] = counts[q];
    }
    let unique = workgroupUniformLoad(&tab[0]);
    let start = chunk * CHUNK;
    if (start >= unique) {
        return;
    }
    let tbase = q * (M * 256u);
    if (TABLE_IN_WG) {
        // Every invocation has read tab[0] before anyone overwrites it.
        workgroupBarrier();
        for (var i = lid; i < M * 256u; i += WG) {
            tab[i] = tables[tbase + i];
        }
        workgroupBarrier();
    }
    let end = min(start + CHUNK, unique);
    let off = qinfo[q].cand_off;
    for (var k = start + lid; k < end; k += WG) {
        let id = cand[off + k].y;
        let cb = id * WPC;
        var a0 = 0.0f;
        var a1 = 0.0f;
        var a2 = 0.0f;
        var a3 = 0.0f;
        for (var w = 0u; w < M / 4u; w += 1u) {
            let word = codes[cb + w];
            let s = w * 4u;
            a0 += entry(tbase, s, word & 255u);
            a1 += entry(tbase, s + 1u, (word >> 8u) & 255u);
            a2 += entry(tbase, s + 2u, (word >> 16u) & 255u);
            a3 += entry(tbase, s + 3u, word >> 24u);
        }
        if (M % 4u != 0u) {
            let word = codes[cb + M / 4u];
            let s = (M / 4u) * 4u;
            a0 += entry(tbase, s, word & 255u);
            if (M % 4u > 1u) {
                a1 += entry(tbase, s + 1u, (word >> 8u) & 255u);
            }
            if (M % 4u > 2u) {
                a2 += entry(tbase, s + 2u, (word >> 16u) & 255u);
            }
        }
        cand[off + k] = vec2<u32>(key_of((a0 + a1) + (a2 + a3)), id);
    }
}
