// Kernel 2 for RaBitQ codes, `chunks` workgroups per query, each scoring up to CHUNK of its
// distinct candidates: the integer parts of the estimate from the code's bit planes and the
// query's (AND and countOneBits, exact), then the f32 operations of `RbqQuery::finish` in the
// same order. Every product goes through `exact`, which XORs its bits with a 0 the compiler
// cannot see (the header's word 6), so no product is fused into an add: the sums are rounded
// as the host rounds them, bit for bit. The host only sends queries whose integers convert to
// f32 exactly (`RbqQuery::gpu_exact`). The query's words (header, then its bit planes:
// `RbqQuery::gpu_words`) start at `tables[qinfo[q].tab_off]`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qinfo: array<QInfo>;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> tables: array<u32>;
@group(0) @binding(4) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> counts: array<u32>;

var<workgroup> unique_wg: u32;

// `x`, rounded to f32 on its own: the XOR with a runtime 0 keeps the compiler from fusing it.
fn exact(x: f32, zero: u32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ zero);
}

// The f32 value of a half float (exact; `f32_from_f16` on the host).
fn half_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) != 0u;
    let e = (h >> 10u) & 0x1fu;
    let man = h & 0x3ffu;
    if (e == 0u) {
        let v = f32(man) * (1.0 / 16777216.0);
        return select(v, -v, sign);
    }
    let s = select(0u, 0x80000000u, sign);
    if (e == 0x1fu) {
        return bitcast<f32>(s | 0x7f800000u | (man << 13u));
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (man << 13u));
}

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
    let bits = tables[qb];
    let w32 = tables[qb + 1u];
    let qbits = tables[qb + 2u];
    let flags = tables[qb + 3u];
    let sum_q = tables[qb + 4u];
    let pad = tables[qb + 5u];
    let zero = tables[qb + 6u];
    let hd = bitcast<f32>(tables[qb + 8u]);
    let hl = bitcast<f32>(tables[qb + 9u]);
    let q_const = bitcast<f32>(tables[qb + 10u]);
    let add = bitcast<f32>(tables[qb + 11u]);
    let scale = bitcast<f32>(tables[qb + 12u]);
    let fbase = tables[qb + 14u];
    let planes = qb + 16u;
    let compact = (flags & 1u) != 0u;
    let inner = (flags & 2u) != 0u;
    let two_h = (1u << bits) - 1u;
    let end = min(start + CHUNK, unique);
    let off = qinfo[q].cand_off;
    for (var k = start + lid; k < end; k += WG) {
        let id = cand[off + k].y;
        let cb = id * WPC;
        var ip = 0u;
        var su = 0u;
        for (var p = 0u; p < bits; p += 1u) {
            var s = 0u;
            var c = 0u;
            for (var w = 0u; w < w32; w += 1u) {
                let x = codes[cb + p * w32 + w];
                c += countOneBits(x);
                for (var b = 0u; b < qbits; b += 1u) {
                    s += countOneBits(x & tables[planes + b * w32 + w]) << b;
                }
            }
            ip += s << (bits - 1u - p);
            su += c << (bits - 1u - p);
        }
        let a = i32(2u * ip) - i32(two_h * sum_q);
        let bb = i32(2u * su) - i32(two_h * pad);
        let y_q = exact(hd * f32(a), zero) + exact(hl * f32(bb), zero);
        let f0 = cb + fbase;
        let norm = bitcast<f32>(codes[f0]);
        var at = f0 + 1u;
        var f_add = 0.0f;
        if (inner) {
            f_add = bitcast<f32>(codes[f0 + 1u]);
            at = f0 + 2u;
        } else {
            f_add = exact(add * exact(norm * norm, zero), zero);
        }
        var inv_yo = 0.0f;
        if (compact) {
            inv_yo = half_to_f32(codes[at] & 0xffffu);
        } else {
            inv_yo = bitcast<f32>(codes[at]);
        }
        let n = exact(scale * norm, zero);
        let f_rescale = -exact(n * inv_yo, zero);
        let est = (f_add + q_const) + exact(f_rescale * y_q, zero);
        cand[off + k] = vec2<u32>(key_of(est), id);
    }
}
