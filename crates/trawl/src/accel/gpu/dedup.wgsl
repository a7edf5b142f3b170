// Kernel 1, one workgroup per query: deduplicates the query's candidate ids with an
// open-addressing hash (linear probing, slots hold id + 1, 0 is empty) in workgroup memory, or
// in the query's region of a global hash when its candidates exceed half the workgroup's
// slots. The first invocation to claim an id appends it to the query's range of `cand`
// (`.y`); `counts[q]` is the number of distinct ids.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qinfo: array<QInfo>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> ghash: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> counts: array<u32>;

var<workgroup> whash: array<atomic<u32>, HASH_WG>;
var<workgroup> wfound: atomic<u32>;

@compute @workgroup_size(256)
fn dedup(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let q = linear_group(wid, nwg);
    if (q >= params.nq) {
        return;
    }
    let info = qinfo[q];
    if (info.hash_len == 0u) {
        let mask = HASH_WG - 1u;
        for (var i = lid; i < info.cand_len; i += WG) {
            let id = ids[info.cand_off + i];
            var slot = hash_id(id) & mask;
            loop {
                let r = atomicCompareExchangeWeak(&whash[slot], 0u, id + 1u);
                if (r.exchanged) {
                    let k = atomicAdd(&wfound, 1u);
                    cand[info.cand_off + k] = vec2<u32>(0u, id);
                    break;
                }
                if (r.old_value == id + 1u) {
                    break;
                }
                // A weak exchange may fail spuriously on an empty slot: try it again.
                if (r.old_value != 0u) {
                    slot = (slot + 1u) & mask;
                }
            }
        }
    } else {
        let mask = info.hash_len - 1u;
        for (var i = lid; i < info.cand_len; i += WG) {
            let id = ids[info.cand_off + i];
            var slot = hash_id(id) & mask;
            loop {
                let r = atomicCompareExchangeWeak(&ghash[info.hash_off + slot], 0u, id + 1u);
                if (r.exchanged) {
                    let k = atomicAdd(&wfound, 1u);
                    cand[info.cand_off + k] = vec2<u32>(0u, id);
                    break;
                }
                if (r.old_value == id + 1u) {
                    break;
                }
                if (r.old_value != 0u) {
                    slot = (slot + 1u) & mask;
                }
            }
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        counts[q] = atomicLoad(&wfound);
    }
}
