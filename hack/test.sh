#!/usr/bin/env bash
# Set up a fresh machine and run every test (what CI runs): format and lint first, then the
# tests, then the fuzz targets coverage-guided (hack/fuzz.sh: 20,000 inputs each from seed 1),
# then each tier of hack/tiers whose directory is given (e.g. HARDSHIFT_KUBE_BIN=/path/to/bin).
# The last lines name every tier and whether it ran: a tier that did not run is never a pass.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# How long each phase took, printed as it ends and again at the end (CI's budget is an hour on
# 2 cores: the numbers say where it goes).
start=$SECONDS phase_start=$SECONDS timings=()
took() { timings+=("$1 $((SECONDS - phase_start)) s"); echo "test.sh: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
# What building needs (a C compiler for the build scripts) first; the tests' dozens of Debian
# packages then install while fmt and clippy run, which need none of them (minutes of CI's hour).
hack/setup.sh || exit 1
setup_log=$(mktemp)
# The boot tests' machine image (coreos-installer built from crates.io, the Debian image: minutes)
# is made here too, beside the lint; tests/boot.rs finds it cached, or says why it did not build.
( hack/setup.sh --tests && { hack/boot-image.sh >/dev/null || echo "test.sh: the boot image did not build: tests/boot.rs says why"; } ) >"$setup_log" 2>&1 &
setup_pid=$!
took "set-up (build)"
# rustfmt and clippy come with the machine's rustup toolchain; say so loudly if one is missing.
for c in fmt clippy; do
  cargo "$c" --version >/dev/null 2>&1 || rustup component add "${c/fmt/rustfmt}" >/dev/null 2>&1 || true
done
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all --check || exit 1; else echo "test.sh: LINT NOT RUN: no rustfmt" >&2; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --locked -- -D warnings || exit 1
else
  echo "test.sh: LINT NOT RUN: no clippy" >&2
fi
took "format and lint"
if ! wait "$setup_pid"; then
  cat "$setup_log"; echo "test.sh: hack/setup.sh --tests failed" >&2; exit 1
fi
tail -n 3 "$setup_log"; rm -f "$setup_log"
took "set-up (tests), after lint"
# The project's own scripts: shellcheck at warning level (the generator's scripts, which reach
# every node, are checked as the bundle carries them by its unit tests).
shellcheck -S warning hack/*.sh .ci/run || exit 1
took "shellcheck"
# CI fuzzes reproducibly: a fixed seed and number of inputs per target (a time limit alone would
# explore further on a faster machine than the run that was checked).
# Disk is the scarce resource on a CI machine (a run ran out of it): no incremental caches (a
# fresh run builds once) and line tables only for the workspace's own crates (backtraces keep
# file:line; dependencies carry no debug info at all, see Cargo.toml). Same settings for every
# pass below, so no pass rebuilds what another built.
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
disk() { echo "test.sh: disk after $1: target $(du -sh target 2>/dev/null | cut -f1), $(df -h --output=avail . | tail -1 | xargs) free"; }
export HARDSHIFT_FUZZ_SECS=${HARDSHIFT_FUZZ_SECS:-60} HARDSHIFT_FUZZ_SEED=${HARDSHIFT_FUZZ_SEED:-1} HARDSHIFT_FUZZ_RUNS=${HARDSHIFT_FUZZ_RUNS:-20000}
failed=0
main=passed
# The VM boots (tests/boot.rs: QEMU under TCG, minutes) run beside the other tests, which mostly
# wait on real programs (systemd in a container, Prometheus' intervals, etcd, agents' reports):
# measured apart, those used 0.6 of a core over 14 minutes. Built first, so neither builds.
if cargo test --workspace --locked --no-run; then
  boot_tests=$(cargo test --locked --test boot -- --list 2>/dev/null | sed -n 's/: test$//p')
else
  failed=1; main=FAILED; boot_tests=""
fi
# The fuzz targets' instrumented build (its own target dir, ~330 crates a second time: the
# longest build of the run) starts now at idle CPU and I/O priority: it takes only what the tests
# leave, so no test waits on it, and the fuzzing after them finds most of it built.
fuzz_build_log=$(mktemp)
chrt --idle 0 ionice -c 3 hack/fuzz.sh --build-only >"$fuzz_build_log" 2>&1 &
fuzz_build_pid=$!
skips=()
boot_pid="" boot_log=$(mktemp)
if [ -n "$boot_tests" ]; then
  for t in $boot_tests; do skips+=(--skip "$t"); done
  cargo test --locked --no-fail-fast --test boot >"$boot_log" 2>&1 &
  boot_pid=$!
  echo "test.sh: tests/boot.rs ($(echo $boot_tests | wc -w) tests) runs beside the others; its output follows theirs"
fi
cargo test --workspace --locked --no-fail-fast -- --exact "${skips[@]}" || { failed=1; main=FAILED; }
if [ -n "$boot_pid" ]; then
  wait "$boot_pid" || { failed=1; main=FAILED; }
  echo "test.sh: tests/boot.rs:"; cat "$boot_log"
fi
rm -f "$boot_log"
disk "the tests"
took "the tests"
# Coverage-guided fuzzing (libFuzzer through bolero, on stable), HARDSHIFT_FUZZ_SECS per target.
# The rest of the instrumented build, if any, runs at normal priority now: at idle priority it
# takes only idle CPU, and beside a CPU hog (another build, stress-ng) there is none, for ever. Its
# cargo and every rustc under it are moved back (a build failure shows again below, from fuzz.sh
# itself).
descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
for p in "$fuzz_build_pid" $(descendants "$fuzz_build_pid"); do
  chrt --other -a -p 0 "$p" >/dev/null 2>&1 || true
  ionice -c 2 -n 7 -p "$p" >/dev/null 2>&1 || true
done
wait "$fuzz_build_pid"; cat "$fuzz_build_log"; rm -f "$fuzz_build_log"
took "the rest of the fuzz build"
# The FIPS build (the test target dir, which fuzzing does not lock) beside the fuzz runs, which use
# one core.
fips_build_log=$(mktemp)
( gobin=$(hack/setup-fips.sh | tail -1) && PATH="$gobin:$PATH" cargo test --locked --features fips --test fips --test pki_openssl --no-run ) >"$fips_build_log" 2>&1 &
fips_build_pid=$!
hack/fuzz.sh || { failed=1; main=FAILED; }
disk "fuzzing"
took "fuzzing"
# The instrumented build is only for fuzzing; drop it unless asked to keep it (a rerun of
# hack/fuzz.sh rebuilds it in about a minute).
[ -n "${HARDSHIFT_KEEP_FUZZ_BUILD:-}" ] || rm -rf target/fuzz-cov
# The same keys, bundle and TLS on AWS-LC's FIPS module (`--features fips`: cmake and Go, from
# hack/setup-fips.sh): fips: true honoured end to end, every key through openssl and FIPS 186-5.
fips=passed
wait "$fips_build_pid" || { tail -40 "$fips_build_log"; echo "test.sh: the FIPS build failed" >&2; }
rm -f "$fips_build_log"
if gobin=$(hack/setup-fips.sh | tail -1); then
  # RSA-4096 through openssl is checked by the pass above; here the FIPS module's RSA-2048 and
  # ECDSA keys are (a whole RSA-4096 PKI from the FIPS module costs minutes of CI's hour).
  PATH="$gobin:$PATH" cargo test --locked --no-fail-fast --features fips --test fips --test pki_openssl -- --skip rsa_4096 || { failed=1; fips=FAILED; }
else
  failed=1; fips="FAILED (hack/setup-fips.sh)"
fi
disk "the FIPS build"
took "the FIPS build"

summary=()
while IFS='|' read -r var programs targets; do
  var=$(echo "$var" | xargs); programs=$(echo "$programs" | xargs); targets=$(echo "$targets" | xargs)
  [ -z "$var" ] || [[ "$var" == \#* ]] && continue
  args=(); for t in $targets; do args+=(--test "$t"); done
  names=$(cargo test --quiet --locked "${args[@]}" -- --list --ignored 2>/dev/null | sed -n 's/: test$//p' | paste -sd, -)
  count=$(echo "$names" | tr ',' '\n' | grep -c . || true)
  # VAR may be several joined by `+`: each must be set, and each program in one of their dirs.
  dirs=(); unset_vars=()
  for v in ${var//+/ }; do
    if [ -n "${!v:-}" ]; then dirs+=("${!v}"); else unset_vars+=("$v"); fi
  done
  dir=$(IFS=' '; echo "${dirs[*]}")
  if [ ${#unset_vars[@]} -gt 0 ]; then
    summary+=("tier $var: NOT RUN (${unset_vars[*]} unset): $count tests skipped: $names")
    continue
  fi
  missing=()
  for p in $programs; do
    found=""; for d in "${dirs[@]}"; do [ -x "$d/$p" ] && found=1; done
    [ -n "$found" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    summary+=("tier $var: FAILED: $dir lacks ${missing[*]}: $count tests not run: $names")
    failed=1
    continue
  fi
  echo "test.sh: tier $var=$dir: $count tests ($targets)"
  if cargo test --locked --no-fail-fast "${args[@]}" -- --ignored; then
    summary+=("tier $var: RAN, passed: $count tests ($dir)")
  else
    summary+=("tier $var: RAN, FAILED ($dir)")
    failed=1
  fi
done < hack/tiers
took "the tiers"

echo
echo "test.sh: time: ${timings[*]/%/;} in all $((SECONDS - start)) s"
echo "test.sh: every test outside the tiers: $main"
echo "test.sh: the FIPS build (--features fips: tests/fips.rs, tests/pki_openssl.rs but RSA-4096): $fips"
for line in "${summary[@]}"; do echo "test.sh: $line"; done
exit $failed
