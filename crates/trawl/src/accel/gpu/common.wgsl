// Shared by the three filter-stage kernels. The host prepends the constants that depend on the
// codes and the device (M, WPC, HASH_WG, SORT_WG, TAB_WG, TABLE_IN_WG, CHUNK).

// One batch (or one slice of a batch's queries).
struct Params {
    nq: u32,
    top_n: u32,
    // Score workgroups per query.
    chunks: u32,
    flags: u32,
}

// Where a query's data lies in the batch's buffers.
struct QInfo {
    // The query's candidates: `ids[cand_off ..][.. cand_len]`, and the same range of `cand`.
    cand_off: u32,
    cand_len: u32,
    // Its region of the global dedup hash (`hash_len` slots, a power of two), or 0: the
    // workgroup hash.
    hash_off: u32,
    hash_len: u32,
    // Its region of the global sort buffer (a power of two), or 0: the workgroup sort.
    sort_off: u32,
    sort_len: u32,
    // RaBitQ: the query's first word in `tables` (PQ tables are at `q * M * 256`).
    tab_off: u32,
    pad1: u32,
}

// Flag: sort in the global buffer even when the kept candidates fit the workgroup's.
const FLAG_GLOBAL_SORT: u32 = 1u;
// Invocations per workgroup (every kernel).
const WG: u32 = 256u;
// An empty id / the largest key.
const NONE: u32 = 0xffffffffu;
// The key of +inf (padding).
const INF_KEY: u32 = 0xff800000u;

// Workgroups are laid out in x then y (a batch may need more than a dimension's maximum).
fn linear_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// The murmur3 finaliser: spreads consecutive ids over the table.
fn hash_id(id: u32) -> u32 {
    var h = id;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    h ^= h >> 16u;
    return h;
}

// An f32 as a u32 ordered like `f32::total_cmp`: negatives have all bits flipped, the others
// their sign bit set. +inf maps to INF_KEY, above every finite distance.
fn key_of(d: f32) -> u32 {
    let b = bitcast<u32>(d);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

// (key, id) pairs in lexicographic order.
fn pair_less(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}
