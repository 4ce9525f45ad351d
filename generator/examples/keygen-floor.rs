//! The key-generation floor of `create`: AWS-LC (aws-lc-rs) making the keys a bundle needs, on
//! every core, and nothing else. `hack/bench-create.sh` sets `create` against it.
//!
//!   cargo run --release -p hardshift-generator --example keygen-floor -- RSA2048 ECDSA [ROUNDS]
//!
//! Prints the median wall time of ROUNDS rounds (5 by default) of RSA2048 RSA-2048 keys and ECDSA
//! P-256 keys made in parallel, and the single-thread CPU time per RSA-2048 key.

use aws_lc_rs::encoding::AsDer;
use rayon::prelude::*;
use std::time::Instant;

fn rsa(size: aws_lc_rs::rsa::KeySize) {
    let k = aws_lc_rs::rsa::KeyPair::generate(size).expect("an RSA key");
    std::hint::black_box(k.as_der().expect("PKCS#8"));
}

fn ecdsa() {
    let k = aws_lc_rs::signature::EcdsaKeyPair::generate(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING).expect("a P-256 key");
    std::hint::black_box(k.to_pkcs8v1().expect("PKCS#8"));
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let (n_rsa, n_ec, rounds) = (
        args.first().copied().unwrap_or(27),
        args.get(1).copied().unwrap_or(0),
        args.get(2).copied().unwrap_or(5),
    );
    let mut walls = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        // One task per key, as `create` schedules them: RSA keys take from 20 to 300 ms each.
        (0..n_rsa + n_ec).into_par_iter().with_max_len(1).for_each(|i| {
            if i < n_rsa {
                rsa(aws_lc_rs::rsa::KeySize::Rsa2048)
            } else {
                ecdsa()
            }
        });
        walls.push(t.elapsed().as_secs_f64());
    }
    let mut one = Vec::new();
    for _ in 0..n_rsa.max(20) {
        let t = Instant::now();
        rsa(aws_lc_rs::rsa::KeySize::Rsa2048);
        one.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let mean = one.iter().sum::<f64>() / one.len() as f64;
    println!(
        "keygen floor: {n_rsa} RSA-2048 + {n_ec} P-256 keys on {} threads: {:.3} s (median of {rounds}); one RSA-2048 key: {mean:.1} ms mean, {:.1} ms median ({} keys, {})",
        rayon::current_num_threads(),
        median(walls),
        median(one.clone()),
        one.len(),
        hardshift_crypto::module()
    );
}
