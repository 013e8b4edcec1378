#!/usr/bin/env bash
# Runs a command on the GPU machine while nvidia-smi samples the GPU's SM
# clock, power draw and throttle reasons every 50 ms, then prints the
# command's output and one line: the median and minimum SM clock, median
# and maximum power over the samples taken while the GPU was busy
# (utilization above 50%), and the throttle reasons seen. For telling a
# slower kernel from a GPU that lowered its clocks (power or thermal cap).
#   bash scripts/device_clocks.sh COMMAND [ARGS...]
set -uo pipefail
samples=$(mktemp)
# Drivers before 535 name the throttle reasons differently.
reasons=clocks_event_reasons.active
nvidia-smi --query-gpu=$reasons --format=csv > /dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw,$reasons \
  --format=csv,noheader,nounits -lms 50 > "$samples" 2>/dev/null &
sampler=$!
"$@"
rc=$?
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
python3 - "$samples" <<'PY'
import statistics, sys
busy = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        util, clock, power = float(f[0]), float(f[1]), float(f[2])
    except (ValueError, IndexError):
        continue
    if util > 50:
        busy.append((clock, power, f[3] if len(f) > 3 else ""))
if not busy:
    print("clocks: no busy samples")
else:
    clocks, powers = [b[0] for b in busy], [b[1] for b in busy]
    reasons = sorted({b[2] for b in busy})
    print("clocks: %d busy samples, SM MHz median %.0f min %.0f, power W median %.0f max %.0f, "
          "throttle reasons %s" % (len(busy), statistics.median(clocks), min(clocks),
                                    statistics.median(powers), max(powers), " ".join(reasons)))
PY
rm -f "$samples"
exit "$rc"
