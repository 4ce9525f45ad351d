//! A mutation fuzzer small enough to run in every CI job on stable Rust (cargo-fuzz needs a
//! nightly toolchain, which this project's machines cannot fetch). It starts from a corpus kept in
//! the repo (`fuzz/corpus/<target>/`), mutates with byte edits, splices and the target's own
//! tokens, and calls the target under `catch_unwind` for a time budget. A panic is a failure: the
//! input is saved to `target/fuzz-crashes/` and named in the message, so it can be added to the
//! corpus once fixed. There is no coverage feedback; the tokens stand in for it.
//!
//! The budget per target is `HARDSHIFT_FUZZ_SECS` (default 10); the seed is printed and can be
//! fixed with `HARDSHIFT_FUZZ_SEED` to replay a run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// xorshift64*: deterministic from a seed, which is all a replay needs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// One mutation of `input`: a byte flip, an insertion or deletion, a chunk duplicated, a splice
/// from another corpus entry, or one of the target's tokens inserted.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], tokens: &[&[u8]]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, rng.next_u64() as u8),
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                let n = rng.below(16).min(v.len() - i);
                v.drain(i..i + n);
            }
            3 if !v.is_empty() => {
                let i = rng.below(v.len());
                let n = rng.below(64).min(v.len() - i);
                let chunk = v[i..i + n].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, chunk);
            }
            4 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let i = rng.below(other.len() + 1);
                let n = rng.below(128).min(other.len() - i);
                v.splice(at..at, other[i..i + n].iter().copied());
            }
            5 | 6 if !tokens.is_empty() => {
                let t = tokens[rng.below(tokens.len())];
                v.splice(at..at, t.iter().copied());
            }
            _ => {}
        }
    }
    // Bound the size: the targets cap their inputs anyway, and big inputs only slow the loop.
    v.truncate(64 << 10);
    v
}

/// The corpus of `target`: every file in `fuzz/corpus/<target>/`.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files.into_iter().map(|p| std::fs::read(p).unwrap()).collect()
}

thread_local! {
    /// Set while this thread runs fuzz inputs: their caught panics are not printed.
    static FUZZING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Install, once, a panic hook that is silent on fuzzing threads and the usual one elsewhere
/// (tests run in parallel threads of one process; the hook is shared by all of them).
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let usual = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !FUZZING.with(|f| f.get()) {
                usual(info);
            }
        }));
    });
}

/// Run `f` on the corpus, then on mutations of it until the budget is spent; returns how many
/// inputs ran. Panics (failing the test) on the first input that makes `f` panic.
pub fn run(target: &str, tokens: &[&[u8]], f: impl Fn(&[u8]) + std::panic::RefUnwindSafe) -> u64 {
    run_with(target, Vec::new(), tokens, f)
}

/// `run`, with more seeds than the corpus directory holds (built by the caller, e.g. encoded
/// messages of every kind).
pub fn run_with(target: &str, seeds: Vec<Vec<u8>>, tokens: &[&[u8]], f: impl Fn(&[u8]) + std::panic::RefUnwindSafe) -> u64 {
    let mut corpus = corpus(target);
    corpus.extend(seeds);
    assert!(!corpus.is_empty(), "fuzz/corpus/{target}/ is empty");
    let secs: u64 = std::env::var("HARDSHIFT_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let seed: u64 = std::env::var("HARDSHIFT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("fuzz {target}: seed {seed} (HARDSHIFT_FUZZ_SEED={seed} replays), {secs} s");
    let mut rng = Rng::new(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut runs = 0u64;
    let try_one = |input: &[u8], runs: &mut u64| {
        *runs += 1;
        if std::panic::catch_unwind(|| f(input)).is_err() {
            FUZZING.with(|f| f.set(false));
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-crashes");
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join(format!("{target}-{seed}-{runs}"));
            let _ = std::fs::write(&path, input);
            panic!("fuzz {target}: input {runs} (seed {seed}) panicked; saved to {}", path.display());
        }
    };
    quiet_panics();
    FUZZING.with(|f| f.set(true));
    for c in &corpus {
        try_one(c, &mut runs);
    }
    while Instant::now() < deadline {
        let base = &corpus[rng.below(corpus.len())];
        let mut input = mutate(&mut rng, base, &corpus, tokens);
        // Stack a few rounds now and then, to get further from the corpus.
        for _ in 0..rng.below(3) {
            input = mutate(&mut rng, &input, &corpus, tokens);
        }
        try_one(&input, &mut runs);
    }
    FUZZING.with(|f| f.set(false));
    eprintln!("fuzz {target}: {runs} inputs, no panic");
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_from_the_seed() {
        let corpus = vec![b"a: 1\nb: [2]\n".to_vec()];
        let gen = |seed| {
            let mut r = Rng::new(seed);
            (0..50).map(|_| mutate(&mut r, &corpus[0], &corpus, &[b"&x "])).collect::<Vec<_>>()
        };
        assert_eq!(gen(7), gen(7));
        assert_ne!(gen(7), gen(8));
    }

    #[test]
    fn a_panicking_target_fails_with_the_input_saved() {
        std::env::set_var("HARDSHIFT_FUZZ_SECS", "1");
        let r = std::panic::catch_unwind(|| run("selftest", &[b"BOOM"], |i| assert!(!i.windows(4).any(|w| w == b"BOOM"))));
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<String>().unwrap();
        assert!(msg.contains("fuzz selftest: input") && msg.contains("fuzz-crashes"), "{msg}");
    }
}
