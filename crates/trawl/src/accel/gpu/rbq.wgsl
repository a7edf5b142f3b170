// RaBitQ's estimate on the GPU (shared by the filter stage's `score_rbq` and the flash step):
// the integer parts from the code's bit planes and the query's (AND and countOneBits, exact),
// then the f32 operations of `RbqQuery::distance_factors` in the same order. Every product goes
// through `exact`, which XORs its bits with a 0 the compiler cannot see (the query header's
// word 6), so no product is fused into an add: the sums are rounded as the host rounds them,
// bit for bit. The host only sends queries whose integers convert to f32 exactly
// (`RbqQuery::gpu_exact`). The query's words (`RbqQuery::gpu_words`: a 16-word header, then its
// bit planes) start at `tables[qb]`; the code's at `codes[cb]`. The kernel declares `tables`
// and `codes` as arrays of u32.

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

fn rbq_distance(qb: u32, cb: u32) -> f32 {
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
    return (f_add + q_const) + exact(f_rescale * y_q, zero);
}
