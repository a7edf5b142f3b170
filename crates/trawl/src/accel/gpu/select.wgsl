// Kernel 3, one workgroup per query: keeps the query's top_n distinct candidates by
// (distance key, id) and writes them sorted, padded with (INF_KEY, NONE), to its range of
// `outbuf`.
//
// When it has more distinct candidates than top_n, a radix select (8 bits a round, the key's
// bytes then the id's, most significant first, with a histogram in workgroup memory) finds
// the top_n-th pair; the rounds stop as soon as the pairs left in the chosen bucket are all
// kept. The kept pairs (exactly min(top_n, distinct), keys being unique) are then gathered
// and bitonic-sorted in workgroup memory when they fit (SORT_WG), else in the query's region
// of the global sort buffer.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qinfo: array<QInfo>;
@group(0) @binding(2) var<storage, read> cand: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> counts: array<u32>;
@group(0) @binding(4) var<storage, read_write> sortbuf: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> outbuf: array<vec2<u32>>;

var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> srt: array<vec2<u32>, SORT_WG>;
var<workgroup> wunique: u32;
// The bucket a round picked: (digit, pairs in lower buckets, pairs in it).
var<workgroup> wpick: vec3<u32>;
var<workgroup> wtaken: atomic<u32>;

@compute @workgroup_size(256)
fn select_top(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let q = linear_group(wid, nwg);
    if (q >= params.nq) {
        return;
    }
    // The pipeline skips the zero-initialisation of workgroup memory: everything is written
    // before it is read.
    if (lid == 0u) {
        wunique = counts[q];
        atomicStore(&wtaken, 0u);
    }
    let unique = workgroupUniformLoad(&wunique);
    let top_n = params.top_n;
    let keep = min(top_n, unique);
    let off = qinfo[q].cand_off;

    // Pairs <= thr are kept.
    var thr = vec2<u32>(NONE, NONE);
    if (keep < unique) {
        // The rank (from 0) of the last kept pair among those matching the prefix.
        var rank = keep - 1u;
        var pre = vec2<u32>(0u, 0u);
        for (var r = 0u; r < 8u; r += 1u) {
            let sh = 24u - 8u * (r & 3u);
            let in_id = r >= 4u;
            // Bits of the refined word already fixed by earlier rounds.
            var fixed = 0u;
            if (sh < 24u) {
                fixed = ~((1u << (sh + 8u)) - 1u);
            }
            atomicStore(&hist[lid], 0u);
            workgroupBarrier();
            for (var i = lid; i < unique; i += WG) {
                let e = cand[off + i];
                var hit = false;
                var digit = 0u;
                if (in_id) {
                    hit = e.x == pre.x && (e.y & fixed) == pre.y;
                    digit = (e.y >> sh) & 255u;
                } else {
                    hit = (e.x & fixed) == pre.x;
                    digit = (e.x >> sh) & 255u;
                }
                if (hit) {
                    atomicAdd(&hist[digit], 1u);
                }
            }
            workgroupBarrier();
            if (lid == 0u) {
                var below = 0u;
                var bin = 0u;
                loop {
                    let c = atomicLoad(&hist[bin]);
                    if (below + c > rank || bin == 255u) {
                        wpick = vec3<u32>(bin, below, c);
                        break;
                    }
                    below += c;
                    bin += 1u;
                }
            }
            let pick = workgroupUniformLoad(&wpick);
            rank -= pick.y;
            let rest = (1u << sh) - 1u;
            if (in_id) {
                pre.y |= pick.x << sh;
            } else {
                pre.x |= pick.x << sh;
            }
            if (rank + 1u == pick.z) {
                // Every pair of the bucket is kept.
                if (in_id) {
                    thr = vec2<u32>(pre.x, pre.y | rest);
                } else {
                    thr = vec2<u32>(pre.x | rest, NONE);
                }
                break;
            }
        }
    }

    let in_wg = keep <= SORT_WG && (params.flags & FLAG_GLOBAL_SORT) == 0u;
    // The sort's size: keep rounded up to a power of two.
    var p = 0u;
    if (keep > 0u) {
        p = 1u << (32u - countLeadingZeros(keep - 1u));
    }
    let sbase = qinfo[q].sort_off;
    for (var i = lid; i < unique; i += WG) {
        let e = cand[off + i];
        if (!pair_less(thr, e)) {
            let slot = atomicAdd(&wtaken, 1u);
            if (slot < keep) {
                if (in_wg) {
                    srt[slot] = e;
                } else {
                    sortbuf[sbase + slot] = e;
                }
            }
        }
    }
    for (var i = keep + lid; i < p; i += WG) {
        if (in_wg) {
            srt[i] = vec2<u32>(NONE, NONE);
        } else {
            sortbuf[sbase + i] = vec2<u32>(NONE, NONE);
        }
    }

    let half = p >> 1u;
    if (in_wg) {
        for (var k = 2u; k <= p; k <<= 1u) {
            for (var j = k >> 1u; j > 0u; j >>= 1u) {
                workgroupBarrier();
                for (var t = lid; t < half; t += WG) {
                    let a = ((t & ~(j - 1u)) << 1u) | (t & (j - 1u));
                    let b = a + j;
                    let x = srt[a];
                    let y = srt[b];
                    if (pair_less(y, x) == ((a & k) == 0u)) {
                        srt[a] = y;
                        srt[b] = x;
                    }
                }
            }
        }
        workgroupBarrier();
    } else {
        for (var k = 2u; k <= p; k <<= 1u) {
            for (var j = k >> 1u; j > 0u; j >>= 1u) {
                storageBarrier();
                for (var t = lid; t < half; t += WG) {
                    let a = sbase + (((t & ~(j - 1u)) << 1u) | (t & (j - 1u)));
                    let b = a + j;
                    let x = sortbuf[a];
                    let y = sortbuf[b];
                    if (pair_less(y, x) == (((a - sbase) & k) == 0u)) {
                        sortbuf[a] = y;
                        sortbuf[b] = x;
                    }
                }
            }
        }
        storageBarrier();
    }

    let obase = q * top_n;
    for (var i = lid; i < top_n; i += WG) {
        var e = vec2<u32>(INF_KEY, NONE);
        if (i < keep) {
            if (in_wg) {
                e = srt[i];
            } else {
                e = sortbuf[sbase + i];
            }
        }
        outbuf[obase + i] = e;
    }
}
