//! RSA key generation, `hardshift_rsakey::generate` against `rsa::PrivateKey::new`, interleaved
//! key by key so machine noise falls on both alike. Key times vary several-fold from key to key
//! (where the first prime falls), so compare means over many keys.
//!   cargo run --release -p hardshift-rsakey --example rsa-keygen -- [KEYS] [BITS]
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().map(|s| s.parse().expect("KEYS: a number")).unwrap_or(100);
    let bits: usize = args.next().map(|s| s.parse().expect("BITS: 2048 or 4096")).unwrap_or(2048);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..keys {
        let t = Instant::now();
        hardshift_rsakey::generate(bits).expect("a key");
        ours.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        rsa::PrivateKey::new(&mut getrandom::SysRng, bits).expect("a key");
        theirs.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        format!(
            "mean {mean:6.1} ms  median {:6.1} ms  p90 {:6.1} ms",
            v[v.len() / 2],
            v[v.len() * 9 / 10]
        )
    };
    let ratio = theirs.iter().sum::<f64>() / ours.iter().sum::<f64>();
    println!("rsa-{bits}, {keys} keys each, one thread");
    println!("  hardshift-rsakey       {}", stats(&mut ours));
    println!("  rsa::PrivateKey::new   {}", stats(&mut theirs));
    println!("  speed-up (means)       {ratio:.2}x");
}
