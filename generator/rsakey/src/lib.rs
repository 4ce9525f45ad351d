//! RSA keys from primes found fast: a sieve and a base-2 Miller–Rabin test on fixed-size limbs
//! reject the composites, and `crypto-primes`' full BPSW test confirms the one candidate left.
//!
//! Why not `rsa::PrivateKey::new` alone: it runs its base-2 test on every candidate the sieve keeps
//! (about 35 per 1,024-bit prime) with constant-time, heap-sized arithmetic and a general
//! exponentiation, ~75 ms a key here, and RSA keys are most of `create`'s time. Here the same
//! test uses only Montgomery squarings and doublings on `[u64; N]`, which the compiler unrolls:
//! 1.7–1.9× faster a key (`examples/rsa-keygen.rs`).
//!
//! Safety of the shortcut: this code only ever *rejects* candidates early. A prime it wrongly
//! rejected would merely be skipped; a composite it wrongly passes is still refused by
//! `crypto_primes::is_prime` (BPSW), and the key is then built and validated by the `rsa` crate.
//! The tests below check this arithmetic against `crypto-bigint` on random inputs.
//!
//! Timing: the work done on a rejected candidate depends on it; that candidate is discarded.
//! The accepted prime goes through one variable-time base-2 test, in an offline command on the
//! admin's machine, as in OpenSSL's own prime generation.

use rsa::traits::PublicKeyParts;
use rsa::BoxedUint;
use std::sync::OnceLock;

/// Odd candidates examined per random start. A 1,024-bit prime is found within 2,048 odd numbers
/// of a random start with probability 1 − e^(−2048/355) ≈ 99.7% (a 2,048-bit one, 94%);
/// otherwise a new start is drawn.
const WINDOW: usize = 2048;
/// Sieve primes below this bound (so that two multiply to under 2^32): ~10% of odd candidates
/// survive, each costing one exponentiation.
const SIEVE_BOUND: u32 = 1 << 16;
/// The public exponent: a prime p with p ≡ 1 (mod e) gives no private exponent, so it is sieved out.
pub const E: u32 = 65_537;

/// The odd primes below `SIEVE_BOUND`, computed once.
fn small_primes() -> &'static [u32] {
    static PRIMES: OnceLock<Vec<u32>> = OnceLock::new();
    PRIMES.get_or_init(|| {
        let n = SIEVE_BOUND as usize;
        let mut composite = vec![false; n];
        let mut out = Vec::new();
        for i in 3..n {
            if i % 2 == 1 && !composite[i] {
                out.push(i as u32);
                for j in (i * i..n).step_by(2 * i) {
                    composite[j] = true;
                }
            }
        }
        out
    })
}

/// `x mod m` for a little-endian limb number and a small modulus.
fn rem_small<const N: usize>(x: &[u64; N], m: u32) -> u32 {
    let m = u64::from(m);
    let mut r = 0u64;
    for &limb in x.iter().rev() {
        // Two 32-bit halves keep every step in u64 (r < m < 2^32).
        r = ((r << 32) | (limb >> 32)) % m;
        r = ((r << 32) | (limb & 0xffff_ffff)) % m;
    }
    r as u32
}

/// Montgomery arithmetic modulo an odd `n` of exactly `64 * N` bits (top bit set).
struct Monty<const N: usize> {
    n: [u64; N],
    /// −n⁻¹ mod 2⁶⁴.
    n0: u64,
}

impl<const N: usize> Monty<N> {
    fn new(n: &[u64; N]) -> Self {
        debug_assert!(n[0] & 1 == 1 && n[N - 1] >> 63 == 1);
        // Newton's iteration doubles the correct low bits each step: 1 → 64 in 6 steps.
        let mut inv: u64 = 1;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(n[0].wrapping_mul(inv)));
        }
        Self {
            n: *n,
            n0: inv.wrapping_neg(),
        }
    }

    /// R mod n with R = 2^(64N): since n > R/2, that is R − n.
    fn one(&self) -> [u64; N] {
        let (r, _) = sub(&[0; N], &self.n);
        r
    }

    /// a·b·R⁻¹ mod n, for a, b < n (CIOS: multiply, then reduce, limb by limb). Measured here at
    /// N = 16: 540–600 ns. A dedicated squaring (fewer limb products, triangular loops) took
    /// 630–950 ns, and one pass with two carry chains 840–960 ns: both compile worse.
    #[inline]
    fn mul(&self, a: &[u64; N], b: &[u64; N]) -> [u64; N] {
        let mut t = [0u64; N];
        let mut hi = 0u64;
        for &bi in b.iter() {
            let bi = u128::from(bi);
            let mut c = 0u128;
            for j in 0..N {
                let s = u128::from(t[j]) + u128::from(a[j]) * bi + c;
                t[j] = s as u64;
                c = s >> 64;
            }
            let s = u128::from(hi) + c;
            let (top, top_carry) = (s as u64, (s >> 64) as u64);
            let m = u128::from(t[0].wrapping_mul(self.n0));
            let mut c = (u128::from(t[0]) + m * u128::from(self.n[0])) >> 64;
            for j in 1..N {
                let s = u128::from(t[j]) + m * u128::from(self.n[j]) + c;
                t[j - 1] = s as u64;
                c = s >> 64;
            }
            let s = u128::from(top) + c;
            t[N - 1] = s as u64;
            hi = top_carry + (s >> 64) as u64;
        }
        self.reduce_once(t, hi != 0)
    }

    /// 2a mod n, for a < n.
    #[inline]
    fn double(&self, a: &[u64; N]) -> [u64; N] {
        let mut out = [0u64; N];
        let mut carry = 0u64;
        for j in 0..N {
            out[j] = (a[j] << 1) | carry;
            carry = a[j] >> 63;
        }
        self.reduce_once(out, carry != 0)
    }

    /// t − n if t (with `overflow` as bit 64N) is at least n, else t; t < 2n.
    #[inline]
    fn reduce_once(&self, t: [u64; N], overflow: bool) -> [u64; N] {
        let (d, borrow) = sub(&t, &self.n);
        if overflow || !borrow {
            d
        } else {
            t
        }
    }
}

/// a − b and whether it borrowed.
#[inline]
fn sub<const N: usize>(a: &[u64; N], b: &[u64; N]) -> ([u64; N], bool) {
    let mut out = [0u64; N];
    let mut borrow = false;
    for j in 0..N {
        let (d, b1) = a[j].overflowing_sub(b[j]);
        let (d, b2) = d.overflowing_sub(u64::from(borrow));
        out[j] = d;
        borrow = b1 || b2;
    }
    (out, borrow)
}

/// The strong probable-prime test to base 2 for an odd `n` of exactly `64 * N` bits: false means
/// `n` is certainly composite.
fn strong_probable_prime_base2<const N: usize>(n: &[u64; N]) -> bool {
    let m = Monty::new(n);
    let one = m.one();
    let (minus_one, _) = sub(n, &one);
    // n − 1 = d · 2^s with d odd.
    let mut d = *n;
    d[0] &= !1;
    let s = d
        .iter()
        .enumerate()
        .find(|(_, w)| **w != 0)
        .map(|(i, w)| i as u32 * 64 + w.trailing_zeros())
        .unwrap_or(0);
    // 2^d in Montgomery form: square for each bit of d, double for each set bit (no multiplications).
    let top = 64 * N as u32 - 1;
    let mut x = one;
    let mut started = false;
    for bit in (s..=top).rev() {
        let set = d[(bit / 64) as usize] >> (bit % 64) & 1 == 1;
        if started {
            x = m.mul(&x, &x);
        }
        if set {
            x = m.double(&x);
            started = true;
        }
    }
    if x == one || x == minus_one {
        return true;
    }
    for _ in 1..s {
        x = m.mul(&x, &x);
        if x == minus_one {
            return true;
        }
        if x == one {
            return false;
        }
    }
    false
}

/// A random prime of exactly `64 * N` bits with its top two bits set (so that two of them make a
/// modulus of exactly `128 * N` bits) and p ≢ 1 (mod 65537). `fill` supplies random bytes.
pub fn random_prime<const N: usize>(fill: &mut dyn FnMut(&mut [u8])) -> BoxedUint {
    let primes = small_primes();
    let mut bytes = vec![0u8; 8 * N];
    let mut composite = vec![false; WINDOW];
    loop {
        fill(&mut bytes);
        let mut start = [0u64; N];
        for (limb, chunk) in start.iter_mut().zip(bytes.chunks_exact(8)) {
            *limb = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        start[0] |= 1;
        start[N - 1] |= 0b11 << 62;
        // Candidate k is start + 2k. Mark every k where a small prime divides it, or where it is
        // 1 mod e. For an odd prime q, start + 2k ≡ 0 (mod q) ⇔ k ≡ −r·2⁻¹ (mod q).
        composite.fill(false);
        let mut mark = |q: u32, r: u32, bad: u32| {
            // start + 2k ≡ bad (mod q) ⇔ k ≡ (bad − r)·2⁻¹, and 2⁻¹ mod q is (q + 1) / 2.
            let target = (q + bad - r) % q;
            let mut k = (u64::from(target) * u64::from(q.div_ceil(2)) % u64::from(q)) as usize;
            while k < WINDOW {
                composite[k] = true;
                k += q as usize;
            }
        };
        // Two sieve primes at a time: their product is below 2^32, so one pass over the limbs
        // gives both remainders.
        for pair in primes.chunks(2) {
            let m = pair.iter().product::<u32>();
            let r = rem_small(&start, m);
            for &q in pair {
                mark(q, r % q, 0);
            }
        }
        mark(E, rem_small(&start, E), 1);
        for (k, _) in composite.iter().enumerate().filter(|(_, c)| !**c) {
            let mut cand = start;
            let (low, carry) = cand[0].overflowing_add(2 * k as u64);
            cand[0] = low;
            if carry {
                let mut j = 1;
                while j < N {
                    let (v, c) = cand[j].overflowing_add(1);
                    cand[j] = v;
                    if !c {
                        break;
                    }
                    j += 1;
                }
                if j == N || cand[N - 1] >> 62 != 0b11 {
                    break; // ran past the top: draw a new start
                }
            }
            if !strong_probable_prime_base2(&cand) {
                continue;
            }
            let p = BoxedUint::from_words(cand);
            if crypto_primes::is_prime(crypto_primes::Flavor::Any, &p) {
                return p;
            }
        }
    }
}

/// A new RSA key of `bits` (2048 or 4096) with e = 65537, from two primes of `bits / 2` drawn from
/// the OS's randomness, then built and validated by the `rsa` crate.
pub fn generate(bits: usize) -> Result<rsa::PrivateKey, String> {
    let mut fill = |b: &mut [u8]| getrandom::fill(b).expect("the OS random source");
    let prime = |fill: &mut dyn FnMut(&mut [u8])| match bits {
        2048 => Ok(random_prime::<16>(fill)),
        4096 => Ok(random_prime::<32>(fill)),
        _ => Err(format!("unsupported RSA key size {bits} (2048 or 4096)")),
    };
    loop {
        let (p, q) = (prime(&mut fill)?, prime(&mut fill)?);
        // Equal primes are a 2^-1000 event, but from_p_q must not be handed them.
        if p == q {
            continue;
        }
        let key = rsa::PrivateKey::from_p_q(p, q, BoxedUint::from(u64::from(E))).map_err(|e| e.to_string())?;
        if key.size() * 8 == bits {
            return Ok(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto_bigint::modular::{BoxedMontyForm, BoxedMontyParams};
    use crypto_bigint::{ConcatenatingMul, Odd};
    use rsa::traits::PrivateKeyParts;

    fn random<const N: usize>() -> [u64; N] {
        let mut b = [0u64; N];
        for w in b.iter_mut() {
            let mut x = [0u8; 8];
            getrandom::fill(&mut x).unwrap();
            *w = u64::from_le_bytes(x);
        }
        b
    }

    fn random_modulus<const N: usize>() -> [u64; N] {
        let mut n = random::<N>();
        n[0] |= 1;
        n[N - 1] |= 1 << 63;
        n
    }

    /// A prime from crypto-primes' own generator, independent of ours.
    fn known_prime(bits: u32) -> BoxedUint {
        crypto_primes::random_prime(&mut rsa::rand_core::UnwrapErr(getrandom::SysRng), crypto_primes::Flavor::Any, bits)
    }

    fn boxed<const N: usize>(x: &[u64; N]) -> BoxedUint {
        BoxedUint::from_words(*x)
    }

    /// Our products and doublings against crypto-bigint's, both in Montgomery form, at both sizes.
    fn check_arithmetic<const N: usize>(rounds: usize) {
        for round in 0..rounds {
            let n = random_modulus::<N>();
            let m = Monty::new(&n);
            let params = BoxedMontyParams::new(Odd::new(boxed(&n)).unwrap());
            // a, b < n: one conditional subtraction suffices since n > R/2. The first round also
            // takes the largest residue, n − 1.
            let a = if round == 0 {
                let mut one = [0u64; N];
                one[0] = 1;
                sub(&n, &one).0
            } else {
                m.reduce_once(random::<N>(), false)
            };
            let b = m.reduce_once(random::<N>(), false);
            let am = BoxedMontyForm::from_montgomery(boxed(&a), &params);
            let bm = BoxedMontyForm::from_montgomery(boxed(&b), &params);
            assert_eq!(boxed(&m.mul(&a, &b)), (&am * &bm).as_montgomery().clone());
            assert_eq!(boxed(&m.mul(&a, &a)), (&am * &am).as_montgomery().clone());
            assert_eq!(boxed(&m.double(&a)), (&am + &am).as_montgomery().clone());
            // R mod n is Montgomery's one.
            assert_eq!(boxed(&m.one()), BoxedMontyForm::one(&params).as_montgomery().clone());
        }
    }

    #[test]
    fn montgomery_arithmetic_matches_crypto_bigint() {
        check_arithmetic::<16>(300);
        check_arithmetic::<32>(100);
    }

    #[test]
    fn base2_test_agrees_with_crypto_primes() {
        use crypto_primes::hazmat::{MillerRabin, Primality};
        let mut passed = 0;
        for i in 0..3000 {
            // Mostly random odd numbers (composite); every 50th a known prime.
            let n: [u64; 16] = if i % 50 == 0 {
                let p = known_prime(1024);
                p.as_words().try_into().unwrap()
            } else {
                random_modulus::<16>()
            };
            if n[15] >> 63 == 0 {
                continue;
            }
            let ours = strong_probable_prime_base2(&n);
            let theirs = MillerRabin::new(Odd::new(boxed(&n)).unwrap()).test_base_two() != Primality::Composite;
            assert_eq!(ours, theirs, "base-2 test disagrees on {n:x?}");
            passed += usize::from(ours);
        }
        assert!(passed >= 50, "the known primes pass ({passed})");
    }

    #[test]
    fn base2_test_rejects_products_of_primes_and_accepts_2048_bit_primes() {
        for _ in 0..3 {
            let p = known_prime(1024);
            let q = known_prime(1024);
            let n = p.concatenating_mul(&q);
            let w: [u64; 32] = n.as_words().try_into().unwrap();
            if w[31] >> 63 == 1 {
                assert!(!strong_probable_prime_base2(&w));
            }
            let big = known_prime(2048);
            let w: [u64; 32] = big.as_words().try_into().unwrap();
            if w[31] >> 63 == 1 {
                assert!(strong_probable_prime_base2(&w));
            }
        }
    }

    #[test]
    fn generated_primes_are_prime_with_the_top_bits_set_and_usable_with_e() {
        let mut fill = |b: &mut [u8]| getrandom::fill(b).unwrap();
        let e = BoxedUint::from(u64::from(E));
        for _ in 0..8 {
            let p = random_prime::<16>(&mut fill);
            assert_eq!(p.bit_width(), 1024);
            let w = p.as_words();
            assert_eq!(w[15] >> 62, 0b11);
            assert!(crypto_primes::is_prime(crypto_primes::Flavor::Any, &p));
            // p ≢ 1 (mod e): gcd(e, p − 1) = 1 since e is prime.
            let r = p.rem_vartime(&crypto_bigint::NonZero::new(e.clone()).unwrap());
            assert_ne!(r, BoxedUint::one());
        }
    }

    #[test]
    fn generated_keys_are_valid_of_the_size_asked_with_e_65537() {
        for bits in [2048, 2048, 4096] {
            let k = generate(bits).unwrap();
            assert_eq!(k.size() * 8, bits);
            assert_eq!(k.e(), &BoxedUint::from(65_537u64));
            k.validate().unwrap();
            let primes = k.primes();
            assert_eq!(primes.len(), 2);
            assert_ne!(primes[0], primes[1]);
            for p in primes {
                assert_eq!(p.bit_width() as usize, bits / 2);
                assert!(crypto_primes::is_prime(crypto_primes::Flavor::Any, p.as_ref()));
            }
        }
        assert!(generate(1024).is_err());
    }

    #[test]
    fn small_primes_and_remainders_are_right() {
        let p = small_primes();
        assert_eq!(&p[..6], &[3, 5, 7, 11, 13, 17]);
        assert_eq!(*p.last().unwrap(), 65_521);
        assert_eq!(p.len(), 6541);
        for _ in 0..100 {
            let x = random::<16>();
            for q in [3u32, 65_537, 65_521, 65_519 * 65_521, u32::MAX] {
                let want = boxed(&x).rem_vartime(&crypto_bigint::NonZero::new(BoxedUint::from(u64::from(q))).unwrap());
                assert_eq!(BoxedUint::from(u64::from(rem_small(&x, q))), want);
            }
        }
    }
}
