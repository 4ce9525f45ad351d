//! etcd's disk: a bounded fdatasync probe in its data directory, written as etcd writes its WAL
//! (small sequential writes, each followed by fdatasync). etcd needs the 99th percentile under
//! 10 ms; a slower disk shows as leader elections, "apply request took too long" and a stuck
//! scale-out. The probe writes at most SAMPLES × 2300 bytes for at most BUDGET, then removes its file.

use anyhow::Context;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::Component;
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// The size etcd's documentation gives for a WAL write when measuring a disk (fio --bs=2300).
const BLOCK: usize = 2300;
pub const SAMPLES: usize = 200;
pub const BUDGET: Duration = Duration::from_secs(5);
/// etcd's own bound for the 99th percentile of WAL fdatasync.
pub const P99_LIMIT: Duration = Duration::from_millis(10);

/// Each fdatasync's duration, in order; stops at `samples` or when `budget` is spent.
pub fn fdatasync_probe(dir: &Path, samples: usize, budget: Duration) -> anyhow::Result<Vec<Duration>> {
    let path = dir.join(format!(".hardshift-fdatasync-probe-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| path.display().to_string())?;
    // Removed whatever happens below: the probe never leaves a file in etcd's directory.
    struct Remove<'a>(&'a Path);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let _guard = Remove(&path);
    let block = [0x5a_u8; BLOCK];
    let start = Instant::now();
    let mut out = Vec::with_capacity(samples);
    while out.len() < samples && start.elapsed() < budget {
        f.write_all(&block).with_context(|| path.display().to_string())?;
        let t = Instant::now();
        nix::unistd::fdatasync(&f).with_context(|| format!("fdatasync {}", path.display()))?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// The `p`-th percentile (0..=100) by nearest rank.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut v = samples.to_vec();
    v.sort();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// The `etcd-disk` component from a probe's result. Pure.
/// A measure that took no sample within its budget: the disk is that slow (measured again on the
/// hour, as a measure that worked).
const NO_SAMPLE: &str = "no sample within the budget";

/// The probe could not measure (an error, not a slow disk): tried again within a minute.
pub fn not_measured(c: &ComponentState) -> bool {
    c.state == "not measured" && c.reason != NO_SAMPLE
}

pub fn component(dir: &Path, result: &anyhow::Result<Vec<Duration>>) -> ComponentState {
    let mut c = ComponentState {
        name: Component::EtcdDisk.name().into(),
        ..Default::default()
    };
    match result {
        Err(e) => {
            c.health = Health::Unknown as i32;
            c.state = "not measured".into();
            c.reason = format!("{e:#}");
        }
        Ok(s) if s.is_empty() => {
            c.health = Health::Unknown as i32;
            c.state = "not measured".into();
            c.reason = NO_SAMPLE.into();
        }
        Ok(s) => {
            let (p50, p99) = (percentile(s, 50.0), percentile(s, 99.0));
            c.state = format!("fdatasync p99 {} ms", ms(p99));
            if p99 > P99_LIMIT {
                c.health = Health::Warning as i32;
                c.reason = format!(
                    "fdatasync p99 {} ms in {} (p50 {} ms, {} writes): etcd needs under {} ms",
                    ms(p99),
                    dir.display(),
                    ms(p50),
                    s.len(),
                    P99_LIMIT.as_millis()
                );
            } else {
                c.health = Health::Ok as i32;
            }
            c.details = HashMap::from([
                ("p50_ms".to_string(), ms(p50)),
                ("p99_ms".to_string(), ms(p99)),
                ("samples".to_string(), s.len().to_string()),
                ("dir".to_string(), dir.display().to_string()),
            ]);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v[..1], 99.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 99.0), Duration::ZERO);
    }

    #[test]
    fn a_slow_disk_is_a_warning_with_its_numbers() {
        let fast: Vec<Duration> = vec![Duration::from_micros(800); 100];
        assert_eq!(component(Path::new("/var/lib/etcd"), &Ok(fast)).health, Health::Ok as i32);
        let mut slow: Vec<Duration> = vec![Duration::from_millis(2); 95];
        slow.extend([Duration::from_millis(40); 5]);
        let c = component(Path::new("/var/lib/etcd"), &Ok(slow));
        assert_eq!(c.health, Health::Warning as i32);
        assert!(
            c.reason.contains("p99 40.00 ms") && c.reason.contains("under 10 ms"),
            "{}",
            c.reason
        );
        let c = component(
            Path::new("/var/lib/etcd"),
            &Err(anyhow::anyhow!("/var/lib/etcd: No such file or directory")),
        );
        assert_eq!((c.health, c.state.as_str()), (Health::Unknown as i32, "not measured"));
    }

    #[test]
    fn the_real_probe_is_bounded_and_leaves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let s = fdatasync_probe(t.path(), 20, Duration::from_secs(10)).unwrap();
        assert_eq!(s.len(), 20);
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0, "the probe file is removed");
        // A zero budget stops before the first write.
        assert!(fdatasync_probe(t.path(), 20, Duration::ZERO).unwrap().is_empty());
        assert!(fdatasync_probe(&t.path().join("absent"), 1, BUDGET).is_err());
    }
}
