#!/usr/bin/env bash
# Coverage-guided fuzzing on stable Rust: the bolero targets of fuzz-targets/tests/targets.rs
# built with LLVM's sanitizer coverage and run under libFuzzer (bolero's engine), each for
# HARDSHIFT_FUZZ_SECS seconds (default 20) from its corpus in fuzz-targets/tests/__fuzz__/.
# HARDSHIFT_FUZZ_SEED and HARDSHIFT_FUZZ_RUNS make a run reproducible (a fixed seed and number of
# inputs: the same exploration on any machine, whatever its speed); hack/test.sh sets both.
# New inputs go to a scratch corpus (the repository's is read only); a crash fails the run and
# its input is kept in target/fuzz-crashes/<target>/ (add it to the corpus once fixed).
#   hack/fuzz.sh [TARGET...]      (default: every target)
#   hack/fuzz.sh --build-only     (the instrumented build alone: hack/test.sh runs it at idle
#                                  priority beside the tests, which mostly wait)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${HARDSHIFT_FUZZ_SECS:-20}
build_only=""
[ "${1:-}" != "--build-only" ] || { build_only=1; shift; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_manifest_layer_paths fuzz_layer_extraction fuzz_yaml_front_end fuzz_collector_message_path fuzz_agent_config fuzz_crd_files fuzz_cel_rules fuzz_renders_record fuzz_render_outputs fuzz_data_url fuzz_csr_subject fuzz_inventory)
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module --cfg fuzzing_libfuzzer -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth"
# With --target, RUSTFLAGS instrument the targets only, not build scripts and proc macros.
t0=$SECONDS
host=$(rustc -vV | sed -n 's/^host: //p')
build=$(cargo test --locked --profile fuzz -p hardshift-fuzz-targets --test targets --target "$host" --target-dir target/fuzz-cov --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="targets": print(m["executable"])' | tail -1)
[ -x "$build" ] || { echo "fuzz.sh: the instrumented build failed" >&2; cargo test --locked --profile fuzz -p hardshift-fuzz-targets --test targets --target "$host" --target-dir target/fuzz-cov --no-run >&2; exit 1; }
echo "fuzz.sh: the instrumented build took $((SECONDS - t0)) s"
[ -z "$build_only" ] || exit 0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  seeds=fuzz-targets/tests/__fuzz__/$name/corpus
  crashes=target/fuzz-crashes/$t
  mkdir -p "$scratch/$name" "$crashes" "$seeds"
  log=$scratch/$name.log
  t0=$SECONDS
  if BOLERO_TEST_NAME=$t BOLERO_LIBTEST_HARNESS=1 \
     BOLERO_LIBFUZZER_ARGS="$scratch/$name $seeds -artifact_prefix=$crashes/ -timeout=10 -max_total_time=$secs -print_final_stats=1${HARDSHIFT_FUZZ_SEED:+ -seed=$HARDSHIFT_FUZZ_SEED}${HARDSHIFT_FUZZ_RUNS:+ -runs=$HARDSHIFT_FUZZ_RUNS}" \
     "$build" "$t" --exact --nocapture --quiet --test-threads 1 >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
    echo "fuzz.sh: $t: ${runs:-?} runs (at most ${secs}s), coverage ${cov:-?} edges, $(ls "$scratch/$name" | wc -l) new inputs, no crash, $((SECONDS - t0)) s"
  else
    echo "fuzz.sh: $t: CRASH (inputs in $crashes):" >&2
    tail -30 "$log" >&2
    failed=1
  fi
done
exit $failed
