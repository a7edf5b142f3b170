//! Writes the valid seed inputs ([`trawl_fuzz::harness::seeds`]) to `corpus/<target>/`.
//! Run from `fuzz/`: `cargo run --bin gen_corpus`.

fn main() {
    for (i, (target, bytes)) in trawl_fuzz::harness::seeds().into_iter().enumerate() {
        let dir = std::path::Path::new("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        std::fs::write(dir.join(format!("seed-{i:03}")), bytes).expect("seed file");
    }
}
