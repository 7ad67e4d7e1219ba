#!/usr/bin/env bash
# bad_inputs.sh OOMGUARD CLI_FORKS TWO_ALLOC_CONF_VARIABLES: every bad input exits 2 with one
# line on stderr that names it, before anything runs. The cases run through CLI_FORKS
# (tests/cli/cli_forks.cpp: the command line in a process forked per case, LibTorch started
# once), the first three through OOMGUARD itself too, which must answer each alike; the cases
# of the environment run OOMGUARD alone.
set -u
cli=$1
forks=$2
two_alloc_conf_variables=$3  # 1 where this LibTorch reads two allocator variables (2.9+)
# No CUDA device, even on a GPU machine: --device cuda must then be refused.
export CUDA_VISIBLE_DEVICES=
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '{"model": ' > "$dir/malformed.json"
: > "$dir/empty.txt"
printf 'one\0two\n' > "$dir/binary.txt"
printf '{"text": "one"}\n{"body": "two"}\n' > "$dir/no_text.jsonl"
printf 'a line too short for a 32-byte prompt\nshort\n' > "$dir/few_prompts.txt"
printf '{"op":"alloc","id":1,"bytes":512}\n{"op":"free","id":2}\n' > "$dir/bad_free.jsonl"
printf '{"op":"alloc","id":1,"bytes":512}\n' > "$dir/trace.jsonl"
printf '{"schema": "oomguard.report/1", "phases": []}\n' > "$dir/report.json"
printf '{"schema": "oomguard.replay/1", "trace": "%s/no/such/trace.jsonl"}\n' "$dir" > "$dir/replay_report.json"

# expected stderr part | arguments
cases=(
  "malformed JSON|run --config $dir/malformed.json"
  "--orders sets how many orders --worst-case searches|run --orders 4"
  "--orders|run --worst-case --orders 0"
  "repeat: --orders belongs to oomguard run --worst-case|repeat -n 2 --orders 4"
  "--worst-case chooses data.train_order|run --worst-case --set data.train_order=[1]"
  "data.train_order: sample 9|run --set data.file=$dir/few_prompts.txt --set generate.prompts=1 --set data.train_order=[9]"
  "data.sample_lengths|run --set data.sample_lengths=[[0,200]]"
  "model.nope|run --set model.nope=1"
  "train.steps|run --set train.steps=ten"
  "model.d_model|run --set model.d_model=0"
  "data.batch_size|run --set data.batch_size=-1"
  "model.layers|run --set model.layers=100000"
  "model.heads|run --set model.heads=3"
  "data.max_length|run --set data.max_length=1"
  "12XB|run --capacity 12XB"
  "--capacity 0|run --capacity 0"
  "--capacity 0B|run --capacity 0B"
  "budget.train|run --set budget.train=lots"
  "nograd|run --disable-guard nograd"
  "v100|run --card v100"
  "tpu|run --device tpu"
  "--device cuda|run --device cuda"
  "device cuda:x: expected auto, cpu, cuda, cuda:N|run --device cuda:x"
  "--device cuda|run --device cuda:1"
  "the jobs take a GPU each; give --device cuda|repeat -n 2 --jobs 2 --device cuda:1"
  "$dir/missing.txt|run --set data.file=$dir/missing.txt"
  "$dir/empty.txt|run --set data.file=$dir/empty.txt"
  "binary|run --set data.file=$dir/binary.txt"
  "\"text\"|run --set data.file=$dir/no_text.jsonl"
  "--seed|run --seed 5000000000"
  "--jobs|repeat -n 2 --jobs 0"
  "cannot be written|run --report $dir/no/such/dir/r.json"
  "generate.cache|run --set generate.cache=grow"
  "generate.prompts|run --set data.file=$dir/few_prompts.txt"
  "unknown option foo|run --set memory.alloc_conf=foo:1"
  "expected True or False|run --set memory.alloc_conf=expandable_segments:yes"
  "model is set to a value|run --set model=1 --set model.heads=2"
  "--card NAME or --capacity|replay $dir/trace.jsonl"
  "bad_free.jsonl:2: free of id 2|replay $dir/bad_free.jsonl --card t4"
  "$dir/missing.jsonl|replay $dir/missing.jsonl --card t4"
  "--alloc-conf|replay $dir/trace.jsonl --card t4 --alloc-conf max_split_size_mb:4"
  "cudaMallocAsync|replay $dir/trace.jsonl --card t4 --alloc-conf backend:cudaMallocAsync"
  "--capacity 0|replay $dir/trace.jsonl --capacity 0"
  "--allocator-model|run --allocator-model hip"
  "--rules: unknown rule \"flash\"|run --device cpu --allocator-model cuda --rules flash"
  "add --allocator-model cuda|run --device cpu --rules none"
  "covers 1.13 and later|replay $dir/trace.jsonl --card t4 --torch-version 1.9"
  "for LibTorch 1.13|replay $dir/trace.jsonl --card t4 --torch-version 1.13 --alloc-conf expandable_segments:True"
  "--allocator-model cuda: backend|run --device cpu --allocator-model cuda --set memory.alloc_conf=backend:cudaMallocAsync"
  "same file|repeat -n 2 --trace $dir/t.jsonl"
  "same file|repeat -n 2 --snapshot $dir/s.pickle"
  "name an .svg or an .html|plot $dir/trace.jsonl -o $dir/picture.png"
  "is a run report|plot $dir/report.json -o $dir/picture.svg"
  "no/such/trace.jsonl, cannot be opened|plot $dir/replay_report.json -o $dir/picture.svg"
  "--run-report $dir/trace.jsonl: not a run report|plot $dir/trace.jsonl --run-report $dir/trace.jsonl -o $dir/p.svg"
  "whose pages are not segments|run --device cpu --snapshot $dir/s.pickle --set memory.alloc_conf=expandable_segments:True"
  "--export-snapshot|replay $dir/trace.jsonl --card t4 --alloc-conf expandable_segments:True --export-snapshot $dir/e.pickle"
  "--trace $dir/no/such/dir/t.jsonl|run --device cpu --trace $dir/no/such/dir/t.jsonl"
  "garbage_collection_threshold on an emulated card|run --device cuda --card t4 --set memory.alloc_conf=garbage_collection_threshold:0.6"
  "backend:cudaMallocAsync: its statistics have no allocator retries|run --device cuda --set memory.alloc_conf=backend:cudaMallocAsync"
  "repeat --jobs 2 on CUDA|repeat -n 2 --jobs 2 --device cuda"
)
failed=0
for c in "${cases[@]}"; do printf '%s\n' "${c#*|}"; done > "$dir/cases.txt"
"$forks" "$cli" < "$dir/cases.txt" > "$dir/results.txt" ||
  { echo "FAIL: $forks exited $?"; exit 1; }
[ "$(wc -l < "$dir/results.txt")" = "${#cases[@]}" ] ||
  { echo "FAIL: $forks answered $(wc -l < "$dir/results.txt") of ${#cases[@]} cases"; exit 1; }
i=0
while IFS=$'\t' read -r rc err; do
  c=${cases[$i]}
  i=$((i + 1))
  want=${c%%|*}
  read -r -a args <<< "${c#*|}"
  err=${err//\\n/$'\n'}
  while [[ "$err" == *$'\n' ]]; do err=${err%$'\n'}; done  # as $(...) strips them
  if [ "$i" -le 3 ]; then  # the executable itself answers as its forked cli_main did
    real=$("$cli" "${args[@]}" 2>&1 >/dev/null < /dev/null); real_rc=$?
    if [ "$real_rc" != "$rc" ] || [ "$real" != "$err" ]; then
      echo "FAIL: oomguard ${args[*]}: exit $real_rc, $real; forked: exit $rc, $err"
      failed=1
    fi
  fi
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] || [[ "$err" != *"$want"* ]]; then
    echo "FAIL: oomguard ${args[*]}: exit $rc, $lines line(s): $err"
    failed=1
  else
    echo "ok: ${args[*]} -> $err"
  fi
done < "$dir/results.txt"
# The device from the environment, as the GoogleTest layer reads it: a bad one is named, and
# cuda without a usable device says why.
for c in "OOMGUARD_DEVICE=tpu|OOMGUARD_DEVICE: device tpu" "OOMGUARD_DEVICE=cuda|OOMGUARD_DEVICE: device cuda: "; do
  err=$(env "${c%%|*}" "$cli" run 2>&1 >/dev/null); rc=$?
  if [ "$rc" != 2 ] || [[ "$err" != *"${c#*|}"* ]]; then
    echo "FAIL: ${c%%|*} oomguard run: exit $rc: $err"; failed=1
  else
    echo "ok: ${c%%|*} run -> $err"
  fi
done
# Where LibTorch reads two allocator variables, a CUDA run given two values is refused before
# it looks for the device, naming both.
if [ "$two_alloc_conf_variables" = 1 ]; then
  err=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTORCH_ALLOC_CONF=expandable_segments:False \
    "$cli" run --device cuda 2>&1 >/dev/null); rc=$?
  want="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and PYTORCH_ALLOC_CONF=expandable_segments:False disagree"
  if [ "$rc" != 2 ] || [[ "$err" != *"$want"* ]]; then
    echo "FAIL: two allocator variables that disagree: exit $rc: $err"; failed=1
  else
    echo "ok: two allocator variables that disagree -> $err"
  fi
fi
exit $failed
