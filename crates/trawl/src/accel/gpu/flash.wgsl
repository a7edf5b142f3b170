// One step of FlashANNS's batch graph search (accel/flash.rs has the contract): one workgroup
// per entry (a query whose record arrived, or a query starting). The host prepends M, WPC, L
// (list capacity), RW (a power of two >= the largest degree), H (visited-hash slots per query, a
// power of two), FMAX and CAP (0: a node is one code; else node p is the counts[p] codes from
// p * CAP, and its key the least of theirs: the page-node layout).
//
// Per query, in GPU buffers: its table (tables), its list of L candidates sorted by (key, id)
// with a chosen flag (lists, lens), its visited set (an open-addressing hash of ids, hash).

struct Params {
    // Entries in this step.
    n: u32,
    // Where the neighbour ids start in `job`.
    nbr_base: u32,
    // 1: the codes are RaBitQ's and a query's region of `tables` holds its words
    // (`rbq_distance`, gpu/rbq.wgsl); 0: PQ, the region holds its M × 256 table.
    rabitq: u32,
    p1: u32,
}

// Words per entry in `job`: slot, entry, node, node_key, nbr_off, nbr_len, fill, unused.
const EW: u32 = 8u;
// Words per entry in `out`: n_chosen, stale, scored, overflow, FMAX ids, FMAX keys.
const OW: u32 = 4u + 2u * FMAX;
const WG: u32 = 64u;
const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> job: array<u32>;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> tables: array<u32>;
@group(0) @binding(4) var<storage, read_write> lists: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> lens: array<u32>;
@group(0) @binding(6) var<storage, read_write> hash: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read_write> out: array<u32>;
@group(0) @binding(8) var<storage, read> counts: array<u32>;

// The old list (key, id, chosen) and the new candidates (key, id).
var<workgroup> wl_k: array<u32, L>;
var<workgroup> wl_i: array<u32, L>;
var<workgroup> wl_c: array<u32, L>;
var<workgroup> wn_k: array<u32, RW>;
var<workgroup> wn_i: array<u32, RW>;
var<workgroup> w_cnt: atomic<u32>;
var<workgroup> w_sc: atomic<u32>;
var<workgroup> w_u: u32;

fn hash_id(id: u32) -> u32 {
    var h = id;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    h ^= h >> 16u;
    return h;
}

fn key_of(d: f32) -> u32 {
    let b = bitcast<u32>(d);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

fn less(ak: u32, ai: u32, bk: u32, bi: u32) -> bool {
    return ak < bk || (ak == bk && ai < bi);
}

// PQ-ADC in the order of `adc_distance`: four accumulators, subspace s into s % 4.
fn adc(tb: u32, id: u32) -> f32 {
    let cb = id * WPC;
    var a0 = 0.0f;
    var a1 = 0.0f;
    var a2 = 0.0f;
    var a3 = 0.0f;
    for (var w = 0u; w < M / 4u; w += 1u) {
        let word = codes[cb + w];
        let s = tb + w * 1024u;
        a0 += bitcast<f32>(tables[s + (word & 255u)]);
        a1 += bitcast<f32>(tables[s + 256u + ((word >> 8u) & 255u)]);
        a2 += bitcast<f32>(tables[s + 512u + ((word >> 16u) & 255u)]);
        a3 += bitcast<f32>(tables[s + 768u + (word >> 24u)]);
    }
    if (M % 4u != 0u) {
        let word = codes[cb + M / 4u];
        let s = tb + (M / 4u) * 1024u;
        a0 += bitcast<f32>(tables[s + (word & 255u)]);
        if (M % 4u > 1u) {
            a1 += bitcast<f32>(tables[s + 256u + ((word >> 8u) & 255u)]);
        }
        if (M % 4u > 2u) {
            a2 += bitcast<f32>(tables[s + 512u + ((word >> 16u) & 255u)]);
        }
    }
    return (a0 + a1) + (a2 + a3);
}

// Visits `id` in the hash at `hb`: 1 newly visited, 0 seen before, 2 the hash is full.
// The distance of the query whose region of `tables` starts at `tb` to code `id`.
fn score(tb: u32, id: u32) -> f32 {
    if (params.rabitq != 0u) {
        return rbq_distance(tb, id * WPC);
    }
    return adc(tb, id);
}

// Node `id`'s key (x) and the codes scored for it (y).
fn score_node(tb: u32, id: u32) -> vec2<u32> {
    if (CAP == 0u) {
        return vec2<u32>(key_of(score(tb, id)), 1u);
    }
    let c = counts[id];
    var best = 0xffffffffu;
    for (var j = 0u; j < c; j += 1u) {
        best = min(best, key_of(score(tb, id * CAP + j)));
    }
    return vec2<u32>(best, c);
}

fn visit(hb: u32, id: u32) -> u32 {
    var h = hash_id(id) & (H - 1u);
    var probes = 0u;
    var result = 2u;
    loop {
        let r = atomicCompareExchangeWeak(&hash[hb + h], NONE, id);
        if (r.exchanged) {
            result = 1u;
            break;
        }
        if (r.old_value == id) {
            result = 0u;
            break;
        }
        if (r.old_value != NONE) {
            h = (h + 1u) & (H - 1u);
            probes += 1u;
            if (probes >= H) {
                break;
            }
        }
    }
    return result;
}

// Entries of the sorted new candidates ordered before (k, i).
fn below_new(k: u32, i: u32, n: u32) -> u32 {
    var lo = 0u;
    var hi = n;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (less(wn_k[mid], wn_i[mid], k, i)) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// Entries of the old list ordered before (k, i).
fn below_old(k: u32, i: u32, n: u32) -> u32 {
    var lo = 0u;
    var hi = n;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (less(wl_k[mid], wl_i[mid], k, i)) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

@compute @workgroup_size(64)
fn step(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let ei = wid.x + wid.y * nwg.x;
    if (ei >= params.n) {
        return;
    }
    let eb = ei * EW;
    let slot = job[eb];
    let node = job[eb + 2u];
    let node_key = job[eb + 3u];
    let nbr_off = params.nbr_base + job[eb + 4u];
    let nbr_len = job[eb + 5u];
    let fill = job[eb + 6u];
    let hb = slot * H;
    let lb = slot * L;
    let tb = slot * (M * 256u);
    let ob = ei * OW;

    if (lid == 0u) {
        atomicStore(&w_cnt, 0u);
        atomicStore(&w_sc, 0u);
        w_u = job[eb + 1u];
    }
    let entry = workgroupUniformLoad(&w_u);
    if (entry != NONE) {
        // A new query: empty visited set, the start node alone in the list.
        for (var i = lid; i < H; i += WG) {
            atomicStore(&hash[hb + i], NONE);
        }
        storageBarrier();
        if (lid == 0u) {
            _ = visit(hb, entry);
            let s = score_node(tb, entry);
            lists[lb] = vec4<u32>(s.x, entry, 0u, 0u);
            lens[slot] = 1u;
            atomicAdd(&w_sc, s.y);
        }
        storageBarrier();
    }
    if (lid == 0u) {
        w_u = lens[slot];
        out[ob + 3u] = 0u;
    }
    let n_old = workgroupUniformLoad(&w_u);
    for (var i = lid; i < n_old; i += WG) {
        let c = lists[lb + i];
        wl_k[i] = c.x;
        wl_i[i] = c.y;
        wl_c[i] = c.z;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var stale = 0u;
        if (node != NONE) {
            for (var i = 0u; i < n_old; i += 1u) {
                if (wl_c[i] == 0u) {
                    if (less(wl_k[i], wl_i[i], node_key, node)) {
                        stale = 1u;
                    }
                    break;
                }
            }
        }
        out[ob + 1u] = stale;
    }
    // Visit and score the neighbours.
    for (var j = lid; j < nbr_len; j += WG) {
        let id = job[nbr_off + j];
        let v = visit(hb, id);
        if (v == 1u) {
            let s = score_node(tb, id);
            atomicAdd(&w_sc, s.y);
            let at = atomicAdd(&w_cnt, 1u);
            wn_k[at] = s.x;
            wn_i[at] = id;
        } else if (v == 2u) {
            out[ob + 3u] = 1u;
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        w_u = atomicLoad(&w_cnt);
    }
    let n_new = workgroupUniformLoad(&w_u);
    var p = 1u;
    while (p < n_new) {
        p = p << 1u;
    }
    for (var i = n_new + lid; i < p; i += WG) {
        wn_k[i] = NONE;
        wn_i[i] = NONE;
    }
    workgroupBarrier();
    // Bitonic sort of the new candidates by (key, id).
    for (var k = 2u; k <= p; k = k << 1u) {
        for (var j = k >> 1u; j > 0u; j = j >> 1u) {
            for (var i = lid; i < p; i += WG) {
                let x = i ^ j;
                if (x > i) {
                    let up = (i & k) == 0u;
                    if (less(wn_k[x], wn_i[x], wn_k[i], wn_i[i]) == up) {
                        let tk = wn_k[i];
                        let ti = wn_i[i];
                        wn_k[i] = wn_k[x];
                        wn_i[i] = wn_i[x];
                        wn_k[x] = tk;
                        wn_i[x] = ti;
                    }
                }
            }
            workgroupBarrier();
        }
    }
    // Merge: every candidate's rank in the union; the first L are the new list.
    for (var i = lid; i < n_old; i += WG) {
        let r = i + below_new(wl_k[i], wl_i[i], n_new);
        if (r < L) {
            lists[lb + r] = vec4<u32>(wl_k[i], wl_i[i], wl_c[i], 0u);
        }
    }
    for (var j = lid; j < n_new; j += WG) {
        let r = j + below_old(wn_k[j], wn_i[j], n_old);
        if (r < L) {
            lists[lb + r] = vec4<u32>(wn_k[j], wn_i[j], 0u, 0u);
        }
    }
    storageBarrier();
    if (lid == 0u) {
        let len = min(L, n_old + n_new);
        lens[slot] = len;
        var c = 0u;
        for (var i = 0u; i < len && c < fill; i += 1u) {
            let x = lists[lb + i];
            if (x.z == 0u) {
                lists[lb + i].z = 1u;
                out[ob + 4u + c] = x.y;
                out[ob + 4u + FMAX + c] = x.x;
                c += 1u;
            }
        }
        out[ob] = c;
        out[ob + 2u] = atomicLoad(&w_sc);
    }
}
