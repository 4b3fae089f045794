#!/usr/bin/env bash
# Compare purerbd's NBD server (memory export) with nbdkit's memory plugin,
# both on Unix sockets on this machine, with the same clients: fio
# (ioengine=nbd) and nbdcopy. Runs are interleaved A B A B so that drifts
# of a busy machine hit both sides; the table at the end gives the means
# and the ratio purerbd/nbdkit (above 1 means purerbd is faster).
#
# Usage: nbd/bench.sh          (from anywhere in the repository)
# Knobs: ROUNDS=2 RUNTIME=5 (seconds per fio job) COPY_MIB=512
# Needs: go, fio, nbdkit, nbdcopy (Debian: golang, fio, nbdkit, libnbd-bin).
set -euo pipefail

ROUNDS=${ROUNDS:-2}
RUNTIME=${RUNTIME:-5}
COPY_MIB=${COPY_MIB:-512}
SIZE=1G

for t in go:golang fio:fio nbdkit:nbdkit nbdcopy:libnbd-bin; do
	command -v "${t%%:*}" >/dev/null || { echo "bench.sh: ${t%%:*} missing (Debian package ${t##*:})" >&2; exit 1; }
done

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && CGO_ENABLED=0 go build -o "$work/purerbd" ./cmd/purerbd)
"$work/purerbd" nbd serve --socket "$work/purerbd.sock" --memory "$SIZE" >/dev/null &
pids+=($!)
nbdkit -f -U "$work/nbdkit.sock" memory "$SIZE" &
pids+=($!)
for s in purerbd nbdkit; do
	for _ in $(seq 100); do [ -S "$work/$s.sock" ] && break; sleep 0.05; done
	[ -S "$work/$s.sock" ] || { echo "bench.sh: $s did not start" >&2; exit 1; }
done
uri() { echo "nbd+unix:///?socket=$work/$1.sock"; }

head -c $((COPY_MIB << 20)) /dev/urandom >"$work/in.bin"

results="$work/results"
: >"$results"
record() { echo "$1 $2 $3" >>"$results"; printf '  %-8s %-14s %12.1f\n' "$1" "$2" "$3"; }

# fio NAME SERVER ARGS...: records IOPS (4k jobs) or MiB/s (1M jobs).
fio_job() {
	local name=$1 server=$2; shift 2
	local out
	out=$(fio --name="$name" --ioengine=nbd --uri="$(uri "$server")" --size="${COPY_MIB}M" \
		--time_based --runtime="$RUNTIME" --output-format=terse --terse-version=3 "$@")
	# Terse v3: 7/8 read KiB/s and IOPS, 48/49 write KiB/s and IOPS.
	echo "$out" | awk -F';' -v n="$name" -v s="$server" '
		$1 != 3 || NF < 50 { next }  # fio also prints "connected to NBD server"
		$5 != 0 { print "fio error " $5 > "/dev/stderr"; exit 1 }
		{ kib = $7 + $48; iops = $8 + $49
		  if (n ~ /4k/) print s, n "-iops", iops; else print s, n "-MiB/s", kib / 1024 }'
}

# copy SERVER: nbdcopy the random file in, and the whole export (1 GiB,
# holes included) out to null:.
copy() {
	local server=$1 t0 t1
	t0=$(date +%s.%N)
	nbdcopy --flush "$work/in.bin" "$(uri "$server")"
	t1=$(date +%s.%N)
	echo "$server nbdcopy-in-MiB/s $(awk -v a="$t0" -v b="$t1" -v m="$COPY_MIB" 'BEGIN { print m / (b - a) }')"
	t0=$(date +%s.%N)
	nbdcopy "$(uri "$server")" null:
	t1=$(date +%s.%N)
	echo "$server nbdcopy-out-GiB-MiB/s $(awk -v a="$t0" -v b="$t1" -v m=1024 'BEGIN { print m / (b - a) }')"
}

for round in $(seq "$ROUNDS"); do
	echo "round $round"
	for server in purerbd nbdkit; do
		{
			copy "$server"
			fio_job randread4k "$server" --rw=randread --bs=4k --iodepth=32
			fio_job randwrite4k "$server" --rw=randwrite --bs=4k --iodepth=32
			fio_job read1m "$server" --rw=read --bs=1M --iodepth=8
			fio_job write1m "$server" --rw=write --bs=1M --iodepth=8
		} | while read -r s m v; do record "$s" "$m" "$v"; done
	done
done

echo
printf '%-20s %12s %12s %8s\n' metric purerbd nbdkit ratio
awk '{ sum[$2 " " $1] += $3; n[$2 " " $1]++; metrics[$2] = 1 }
	END {
		for (m in metrics) {
			a = sum[m " purerbd"] / n[m " purerbd"]; b = sum[m " nbdkit"] / n[m " nbdkit"]
			printf "%-20s %12.1f %12.1f %8.2f\n", m, a, b, (b > 0 ? a / b : 0)
		}
	}' "$results" | sort
