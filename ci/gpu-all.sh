#!/usr/bin/env bash
# One GPU-machine call: the checks of issues 2, 3, 4, 5 and 7, logs packed into one
# archive (the device tool returns at most 8 files). usage: ci/gpu-all.sh DIST OUT
set -u
D=$1; O=$2; W=$(mktemp -d)
bash "$(dirname "$0")/gpu-generator-reference.sh" "$D" "$W"
bash "$(dirname "$0")/gpu-other-collectives.sh" "$D" "$W" > "$W/issue3-rc.txt" 2>&1
bash "$(dirname "$0")/gpu-multi-process.sh" "$D" "$W" > "$W/issue4-rc.txt" 2>&1
bash "$(dirname "$0")/gpu-timing-options.sh" "$D" "$W" > "$W/issue5-rc.txt" 2>&1
[ -f "$(dirname "$0")/gpu-validation-faults.sh" ] && bash "$(dirname "$0")/gpu-validation-faults.sh" "$D" "$W" > "$W/issue7-rc.txt" 2>&1
tar czf "$O/logs.tgz" -C "$W" .
cat "$W/summary.txt"; grep -E "passed|mismatch|rc=" "$W/gpu_generator.txt" | tail -5
grep -E "trace|Elapsed|Maximum resident|8589934592" "$W/ar_sweep_trace.out"
cat "$W/errors.txt" "$W/overhead.txt" "$W/issue3-rc.txt" "$W/issue4-rc.txt" "$W/issue5-checks.txt" "$W/issue7-rc.txt" 2>/dev/null
