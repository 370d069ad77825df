#!/usr/bin/env bash
# Hydra benchmark driver (`make bench`). See Benchmarks/README.md.
#
# Starts a private nginx on 127.0.0.1:$BENCH_PORT serving a small JSON file,
# then for each concurrency measures GET throughput of:
#   raw-c          Benchmarks/raw/rawbench.c (libcurl multi + libuv, the floor;
#                  with --same-options and, at c=64, --keep-watches as references)
#   hydra          .build/release/hydra-bench remote (Hydra's remote worker path)
#   curl-parallel  curl --parallel over a config file of N URLs
#   aria2c         aria2c -i over a list of N URLs
# and finally Hydra's local no-op job throughput (hydra-bench local).
#
# Env knobs:
#   BENCH_PORT=18080            nginx port
#   BENCH_REQUESTS=20000        requests per run (raw-c, hydra)
#   BENCH_TOOL_REQUESTS=N       requests per run for curl-parallel and aria2c
#                               (default: BENCH_REQUESTS)
#   BENCH_CONCURRENCY="1 16 64 256"
#   BENCH_REPEAT=3              runs per (tool, concurrency); the table shows
#                               the median, results.jsonl keeps every run
#   BENCH_LOCAL_JOBS=1000000    jobs for the local no-op run
#   BENCH_RESOURCE_JOBS=200000  jobs for each resource-hits run (memory, disk)
#   BENCH_SWIFT_BUILD=1         0 = don't run `swift build`, use an existing
#                               .build/release/hydra-bench if there is one
#   BENCH_HYDRA=1               0 = skip every hydra row
#   BENCH_TOOLS=1               0 = skip the curl-parallel and aria2c rows
#   BENCH_INSTRUCTIONS=1        0 = skip the instruction rows (callgrind: per request, and the
#                               server's per job by thread)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PORT="${BENCH_PORT:-18080}"
REQUESTS="${BENCH_REQUESTS:-20000}"
TOOL_REQUESTS="${BENCH_TOOL_REQUESTS:-$REQUESTS}"
CONCURRENCY="${BENCH_CONCURRENCY:-1 16 64 256}"
REPEAT="${BENCH_REPEAT:-3}"
LOCAL_JOBS="${BENCH_LOCAL_JOBS:-1000000}"
SWIFT_BUILD="${BENCH_SWIFT_BUILD:-1}"
RUN_HYDRA="${BENCH_HYDRA:-1}"
RUN_TOOLS="${BENCH_TOOLS:-1}"

OUT_DIR="$ROOT/.build/bench"
RAWBENCH="$OUT_DIR/rawbench"
HYDRA_BENCH="$ROOT/.build/release/hydra-bench"
RESULTS_MD="$OUT_DIR/results.md"
RESULTS_JSONL="$OUT_DIR/results.jsonl"

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

for v in REQUESTS TOOL_REQUESTS REPEAT LOCAL_JOBS PORT; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer (got '${!v}')"
done
for c in $CONCURRENCY; do
    [[ "$c" =~ ^[1-9][0-9]*$ ]] || die "BENCH_CONCURRENCY entries must be positive integers (got '$c')"
done

# --- tools -------------------------------------------------------------------
SUDO=""
if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
APT_UPDATED=0
apt_install() {
    if [[ "$APT_UPDATED" == 0 ]]; then
        log "apt-get update"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
        APT_UPDATED=1
    fi
    log "apt-get install -y $*"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}
if ! pkg-config --exists libuv libcurl sqlite3 libtcmalloc_minimal libcrypto 2>/dev/null; then
    apt_install libuv1-dev libcurl4-openssl-dev libsqlite3-dev libgoogle-perftools-dev libssl-dev
fi
if ! command -v nginx >/dev/null || ! command -v aria2c >/dev/null; then
    apt_install nginx-light aria2
fi
if [[ "${BENCH_INSTRUCTIONS:-1}" != 0 ]] && ! command -v valgrind >/dev/null; then
    apt_install valgrind
fi
# nginx-light installs to /usr/sbin, which may not be on a non-root PATH.
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
for t in gcc curl python3; do
    command -v "$t" >/dev/null || die "$t is required"
done

# --- private nginx -----------------------------------------------------------
TMP="$(mktemp -d "${TMPDIR:-/tmp}/hydra-bench.XXXXXX")"
# Scratch space for aria2c's downloads: tmpfs if available.
if [[ -d /dev/shm && -w /dev/shm ]]; then
    DL_PARENT="$(mktemp -d /dev/shm/hydra-bench-dl.XXXXXX)"
else
    DL_PARENT="$TMP/dl"; mkdir -p "$DL_PARENT"
fi
NGINX_PID=""
cleanup() {
    if [[ -n "$NGINX_PID" ]]; then
        kill -TERM "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP" "$DL_PARENT"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# When nginx runs as root its worker switches to "nobody": it must be able to
# traverse the temp dir and read the document root.
chmod 755 "$TMP"
mkdir -p "$TMP/www"
printf '{"hello":"world","n":1234567890}\n' > "$TMP/www/hello.json"
cp "$TMP/www/hello.json" "$TMP/www/merged.json"
chmod 644 "$TMP/www/hello.json" "$TMP/www/merged.json"
cat > "$TMP/nginx.conf" <<EOF
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    types { }
    default_type application/json;
    keepalive_requests 1000000;
    keepalive_timeout 60;
    client_body_temp_path $TMP/tmp_body;
    proxy_temp_path $TMP/tmp_proxy;
    fastcgi_temp_path $TMP/tmp_fastcgi;
    uwsgi_temp_path $TMP/tmp_uwsgi;
    scgi_temp_path $TMP/tmp_scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $TMP/www;
        # The merged-requests row counts the requests that reach this URL.
        location = /merged.json { access_log $TMP/merged.log; }
        # The upload row's sink: nginx reads and discards the body, then 204.
        location /sink { client_max_body_size 0; return 204; }
    }
}
EOF

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "something is already listening on 127.0.0.1:$PORT (set BENCH_PORT)"
fi
URL="http://127.0.0.1:$PORT/hello.json"
log "starting nginx on 127.0.0.1:$PORT"
"$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/error.log" -g 'daemon off;' &
NGINX_PID=$!
for _ in $(seq 100); do
    if curl -sf -o /dev/null "$URL"; then break; fi
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$TMP/error.log" >&2 || true; die "nginx exited"; }
    sleep 0.05
done
curl -sf -o /dev/null "$URL" || die "nginx did not come up on $URL"

# --- builds ------------------------------------------------------------------
mkdir -p "$OUT_DIR"
log "building rawbench"
# shellcheck disable=SC2046
gcc -O2 -Wall -o "$RAWBENCH" "$ROOT/Benchmarks/raw/rawbench.c" $(pkg-config --cflags --libs libuv libcurl)
# The download row's ceiling: the same downloads in plain C, with and without
# the SHA-256 of every byte (OpenSSL's libcrypto, from libssl-dev).
RAWDOWNLOAD="$OUT_DIR/rawdownload"
# shellcheck disable=SC2046
gcc -O2 -Wall -o "$RAWDOWNLOAD" "$ROOT/Benchmarks/raw/rawdownload.c" $(pkg-config --cflags --libs libuv libcurl libcrypto)

HYDRA_OK=0
HYDRA_NOTE=""
if [[ "$RUN_HYDRA" == 0 ]]; then
    HYDRA_NOTE="skipped (BENCH_HYDRA=0)"
else
    if [[ "$SWIFT_BUILD" != 0 ]]; then
        if ! command -v swift >/dev/null; then
            HYDRA_NOTE="skipped (no swift toolchain)"
        else
            log "swift build -c release --product hydra-bench, hydra"
            if ! { swift build -c release --product hydra-bench >&2 && swift build -c release --product hydra >&2; }; then
                # Never benchmark a stale binary from an earlier build.
                HYDRA_NOTE="skipped (swift build failed)"
            fi
        fi
    fi
    if [[ -z "$HYDRA_NOTE" ]]; then
        if [[ -x "$HYDRA_BENCH" ]]; then
            HYDRA_OK=1
        else
            HYDRA_NOTE="skipped (no .build/release/hydra-bench)"
        fi
    fi
    [[ "$HYDRA_OK" == 1 ]] || warn "hydra rows $HYDRA_NOTE"
fi

# --- runs --------------------------------------------------------------------
: > "$RESULTS_JSONL"
# Results go to results.jsonl and, as progress, to stderr; stdout gets the report.
record() { printf '%s\n' "$1" >> "$RESULTS_JSONL"; printf '    %s\n' "$1" >&2; }

# Starts the release `hydra serve` with CONFIG in the background (output in
# $TMP/NAME.out and .err) and waits until it listens on PORT; SERVED_PID is its pid.
# The server rows' configuration (the timed `hydra serve` and the counted
# `hydra-bench serve` run the same): one remote worker with 64 in flight, two
# local threads, no default headers.
server_config() { # file, port, state folder
    cat > "$1" <<EOF
{"rpc": {"listen": "127.0.0.1:$2", "maxConnections": 4096},
 "state": {"path": "$3"},
 "workers": [{"name": "rest", "kind": "remote", "maxConnections": 64, "maxHostConnections": 64, "maxActive": 64},
             {"name": "local", "kind": "local", "threads": 2}],
 "defaults": {"headers": {}}}
EOF
}

start_serve() { # config, port, name
    "$ROOT/.build/release/hydra" serve --config "$1" > "$TMP/$3.out" 2> "$TMP/$3.err" &
    SERVED_PID=$!
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return; fi
        sleep 0.05
    done
    warn "hydra serve ($3) did not listen on 127.0.0.1:$2"
}

# CPU nanoseconds each thread of process PID has used, summed by thread name,
# as one JSON object (from /proc/PID/task/*/schedstat).
thread_ns() { # pid
    python3 - "$1" <<'PY'
import json, os, sys
pid, out = sys.argv[1], {}
for t in os.listdir(f"/proc/{pid}/task"):
    try:
        name = open(f"/proc/{pid}/task/{t}/comm").read().strip()
        ns = int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
    except (OSError, ValueError, IndexError):
        continue
    out[name] = out.get(name, 0) + ns
print(json.dumps(out))
PY
}

# LINE with "serverCpuUsPerJob": the server's CPU µs per job of each thread
# between two `thread_ns` readings (jobs: the line's "jobs" or "requests").
with_server_cpu() { # line, before, after
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
line, before, after = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
jobs = line.get("jobs") or line.get("requests") or 0
if jobs:
    cpu = {name: round((ns - before.get(name, 0)) / 1000 / jobs, 2) for name, ns in after.items()}
    line["serverCpuUsPerJob"] = {k: v for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 0.05}
print(json.dumps(line, separators=(",", ":")))
PY
}

# Last line of stdout that is a JSON object with the wanted name, or nothing.
json_line() { # name, file
    python3 - "$1" "$2" <<'PY'
import json, sys
want, path = sys.argv[1], sys.argv[2]
found = ""
for line in open(path, errors="replace"):
    line = line.strip()
    if not line.startswith("{"):
        continue
    try:
        obj = json.loads(line)
    except ValueError:
        continue
    if obj.get("name") == want:
        found = json.dumps(obj, separators=(",", ":"))
print(found)
PY
}

# Builds the JSON line for a timed external tool run.
tool_json() { # name c n failed start end
    python3 - "$@" <<'PY'
import json, sys
name, c, n, failed, start, end = sys.argv[1:]
secs = float(end) - float(start)
print(json.dumps({"name": name, "concurrency": int(c), "requests": int(n),
                  "failed": int(failed), "seconds": round(secs, 6),
                  "rps": round(int(n) / secs, 1) if secs > 0 else 0.0},
                 separators=(",", ":")))
PY
}

# Input files for the external tools (generated once).
python3 - "$URL" "$TOOL_REQUESTS" "$TMP/curl.cfg" "$TMP/urls.txt" <<'PY'
import sys
url, n, cfg, urls = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(cfg, "w") as f:
    for _ in range(n):
        f.write('url = "%s"\noutput = "/dev/null"\n' % url)
with open(urls, "w") as f:
    # aria2c: one distinct output name per entry. Shared names do not work:
    # with -j > 1 every download sharing a path aborts with errorCode=13.
    for i in range(n):
        f.write("%s\n  out=r%07d.json\n" % (url, i))
PY

run_raw() { # c
    local out="$TMP/out.txt" line
    "$RAWBENCH" "$URL" "$REQUESTS" "$1" > "$out" || true
    line="$(json_line raw-c "$out")"
    [[ -n "$line" ]] || die "rawbench produced no result at concurrency $1"
    record "$line"
    "$RAWBENCH" "$URL" "$REQUESTS" "$1" --same-options > "$out" || true
    line="$(json_line raw-c-same "$out")"
    [[ -n "$line" ]] || die "rawbench --same-options produced no result at concurrency $1"
    record "$line"
    # Reference at c=64: raw C whose watches stay armed between requests, as
    # Hydra's worker keeps them (rawloop.h); the goal stays on plain raw C.
    if [[ "$1" == 64 ]]; then
        "$RAWBENCH" "$URL" "$REQUESTS" "$1" --keep-watches > "$out" || true
        line="$(json_line raw-c-armed "$out")"
        if [[ -n "$line" ]]; then record "$line"; else warn "rawbench --keep-watches produced no result"; fi
    fi
}

run_hydra() { # c
    local out="$TMP/out.txt" line
    [[ "$HYDRA_OK" == 1 ]] || return 0
    if ! "$HYDRA_BENCH" remote --url "$URL" --requests "$REQUESTS" --concurrency "$1" > "$out"; then
        warn "hydra-bench remote failed at concurrency $1"
    fi
    line="$(json_line hydra "$out")"
    if [[ -n "$line" ]]; then record "$line"; else warn "hydra-bench remote printed no result at concurrency $1"; fi
}

# Reference rows at c=64 beside the engine row, each paired with the raw C
# run before it: gperftools' tcmalloc preloaded (the allocator the release
# `hydra` links; an embedding program may link or preload it too), and two
# remote workers sharing the 64 in flight (a worker is one loop thread; this
# machine has two vCPUs). Neither replaces the one-worker row the goal is on.
TCMALLOC_SO="$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -1)"
run_hydra_reference() { # c name preload extra-args...
    local c="$1" name="$2" preload="$3" out="$TMP/out.txt" line
    shift 3
    [[ "$HYDRA_OK" == 1 && "$c" == 64 ]] || return 0
    if ! LD_PRELOAD="$preload" "$HYDRA_BENCH" remote --url "$URL" --requests "$REQUESTS" --concurrency "$c" "$@" > "$out"; then
        warn "hydra-bench remote ($name) failed at concurrency $c"
    fi
    line="$(json_line hydra "$out")"
    [[ -n "$line" ]] && record "${line/\"name\":\"hydra\"/\"name\":\"$name\"}"
}

run_curl() { # c
    local c="$1" start end failed
    start="$(date +%s.%N)"
    curl -s --no-progress-meter --parallel --parallel-max "$c" -K "$TMP/curl.cfg" \
        -w '%{http_code}\n' > "$TMP/codes.txt" 2> "$TMP/curl.err" || true
    end="$(date +%s.%N)"
    failed=$(( TOOL_REQUESTS - $(grep -c '^200$' "$TMP/codes.txt" || true) ))
    (( failed == 0 )) || warn "curl --parallel: $failed failures at concurrency $c"
    record "$(tool_json curl-parallel "$c" "$TOOL_REQUESTS" "$failed" "$start" "$end")"
}

run_aria2() { # c
    local c="$1" start end failed dl rc
    dl="$(mktemp -d "$DL_PARENT/c$c.XXXXXX")"
    start="$(date +%s.%N)"
    aria2c -d "$dl" -i "$TMP/urls.txt" -j "$c" -x 1 --max-connection-per-server=1 \
        --allow-overwrite=true --auto-file-renaming=false --file-allocation=none \
        --console-log-level=error --summary-interval=0 -q \
        --save-session="$TMP/aria2.session" > "$TMP/aria2.out" 2>&1 && rc=0 || rc=$?
    end="$(date +%s.%N)"
    # The session file lists every download that did not complete.
    if [[ -f "$TMP/aria2.session" ]]; then
        failed=$(grep -c '^[a-z]*://' "$TMP/aria2.session" || true)
    else
        failed=0
    fi
    if (( rc != 0 && failed == 0 )); then
        warn "aria2c exited with status $rc: $(head -c 500 "$TMP/aria2.out")"
        failed=$TOOL_REQUESTS
    fi
    (( failed == 0 )) || warn "aria2c: $failed failures at concurrency $c"
    rm -rf "$dl" "$TMP/aria2.session"
    record "$(tool_json aria2c "$c" "$TOOL_REQUESTS" "$failed" "$start" "$end")"
}

# Warn if the machine is busy right now (CPU use over one second, not the
# load average, which still remembers a previous benchmark run).
BUSY="$(python3 - <<'PY'
import time
def sample():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]  # total, idle + iowait
t0, i0 = sample(); time.sleep(1); t1, i1 = sample()
print(round(100 * (1 - (i1 - i0) / max(1, t1 - t0))))
PY
)"
if (( BUSY > 20 )); then
    warn "CPUs are ${BUSY}% busy before the benchmark started: something else is running, numbers will be noisy"
fi

cpu_model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
MACHINE="$(cat <<EOF
Machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, Linux $(uname -r)
Versions: $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'), $(curl --version | head -1 | cut -d' ' -f1-2), libcurl $(pkg-config --modversion libcurl), libuv $(pkg-config --modversion libuv), $(aria2c --version | head -1)
Load average at start: $(cut -d' ' -f1-3 /proc/loadavg); CPU busy in the second before: ${BUSY}%
Requests per run: $REQUESTS (raw C, hydra), $TOOL_REQUESTS (curl --parallel, aria2c); URL $URL (33-byte JSON, keep-alive)
Each cell: median req/s of $REPEAT run(s); ratios are to the raw C median at the same concurrency.
EOF
)"

for c in $CONCURRENCY; do
    for r in $(seq "$REPEAT"); do
        # Interleaved, so slow drift on a shared machine hits every tool alike.
        log "concurrency $c, run $r/$REPEAT"
        run_raw "$c"
        run_hydra "$c"
        [[ -n "$TCMALLOC_SO" ]] && run_hydra_reference "$c" hydra-tcmalloc "$TCMALLOC_SO"
        run_hydra_reference "$c" hydra-2workers "" --workers 2
        if [[ "$RUN_TOOLS" != 0 ]]; then
            run_curl "$c"
            run_aria2 "$c"
        fi
    done
done

if [[ "$HYDRA_OK" == 1 ]]; then
    log "local no-op jobs"
    if ! "$HYDRA_BENCH" local --jobs "$LOCAL_JOBS" > "$TMP/out.txt"; then
        warn "hydra-bench local failed"
    fi
    line="$(json_line local-noop "$TMP/out.txt")"
    if [[ -n "$line" ]]; then record "$line"; else warn "hydra-bench local printed no result"; fi

    # Resource jobs of one 4 KiB file from the repository (issue 13): memory
    # hits (ratio to the local no-op row above) and disk hits (memory tier off).
    head -c 4096 /dev/zero | tr '\0' 'r' > "$TMP/www/r4k.bin"
    chmod 644 "$TMP/www/r4k.bin"
    for tier in memory disk; do
        log "resource $tier hits"
        memflag=1; [[ "$tier" == disk ]] && memflag=0
        if ! "$HYDRA_BENCH" resource-hits --url "http://127.0.0.1:$PORT/r4k.bin" --jobs "${BENCH_RESOURCE_JOBS:-200000}" \
            --memory "$memflag" > "$TMP/out.txt"; then
            warn "hydra-bench resource-hits ($tier) failed"
        fi
        line="$(json_line "resource-$tier-hits" "$TMP/out.txt")"
        if [[ -n "$line" ]]; then record "$line"; else warn "hydra-bench resource-hits ($tier) printed no result"; fi
    done

    # Downloads of 2,000 distinct 256 KiB files (hard links of one random
    # file: distinct URLs, one page-cache copy) at 16 in flight, each kept in
    # the repository, paired with `curl --parallel` of the same URLs saving
    # each to a file; then 20,000 distinct 64 KiB resources through a 64 MiB memory
    # tier, and the process's RSS over its idle RSS.
    python3 - "$TMP/www" <<'PY'
import os, sys
www = sys.argv[1]
for folder, size, count in (("dl", 262144, 2000), ("mem", 65536, 20000)):
    os.makedirs(os.path.join(www, folder), exist_ok=True)
    first = os.path.join(www, folder, "0")
    with open(first, "wb") as f:
        f.write(os.urandom(size))
    os.chmod(first, 0o644)
    names = [str(i) for i in range(1, count)] + ["warm-%d" % i for i in range(16)]
    for name in names:
        os.link(first, os.path.join(www, folder, name))
    os.chmod(os.path.join(www, folder), 0o755)
PY
    # Both write every file on the same filesystem ($DL_PARENT: tmpfs when
    # there is one, so this VM's disk is not what is measured): curl one file
    # per URL, Hydra its repository (TMPDIR). curl to /dev/null is kept as a
    # reference row (no file, no digest). Outputs are removed between runs,
    # outside the timed part.
    : > "$TMP/dl.cfg"; : > "$TMP/dl-null.cfg"
    for i in $(seq 0 1999); do
        printf 'url = "http://127.0.0.1:%s/dl/%s"\noutput = "%s/curl/%s"\n' "$PORT" "$i" "$DL_PARENT" "$i" >> "$TMP/dl.cfg"
        printf 'url = "http://127.0.0.1:%s/dl/%s"\noutput = "/dev/null"\n' "$PORT" "$i" >> "$TMP/dl-null.cfg"
    done
    timed_curl() { # row name, config
        local start end
        start="$(date +%s.%N)"
        curl -s --parallel --parallel-max 16 -K "$2" || warn "curl --parallel downloads ($1) failed"
        end="$(date +%s.%N)"
        record "$(python3 -c 'import json,sys; s=float(sys.argv[3])-float(sys.argv[2]); b=2000*262144; print(json.dumps({"name":sys.argv[1],"bytes":b,"seconds":round(s,3),"mbps":round(b/1048576/s,3)}))' "$1" "$start" "$end")"
    }
    for r in $(seq "$REPEAT"); do
        log "resource downloads: 2,000 x 256 KiB at 16 in flight, run $r/$REPEAT: curl --parallel to files, then hydra, then curl to /dev/null, then plain C (files; files + SHA-256 on the loop; on a thread pool)"
        rm -rf "$DL_PARENT/curl"; mkdir -p "$DL_PARENT/curl"
        timed_curl curl-download "$TMP/dl.cfg"
        rm -rf "$DL_PARENT/curl"
        if TMPDIR="$DL_PARENT/" "$HYDRA_BENCH" resource-download --prefix "http://127.0.0.1:$PORT/dl/" --files 2000 --concurrency 16 > "$TMP/out.txt"; then
            line="$(json_line resource-download "$TMP/out.txt")"; [[ -n "$line" ]] && record "$line"
        else
            warn "hydra-bench resource-download failed"
        fi
        timed_curl curl-download-null "$TMP/dl-null.cfg"
        for mode in none inline pool; do
            mkdir -p "$DL_PARENT/raw"
            if "$RAWDOWNLOAD" "http://127.0.0.1:$PORT/dl/" 2000 16 "$DL_PARENT/raw" "$mode" > "$TMP/out.txt"; then
                line="$(json_line "raw-download-$mode" "$TMP/out.txt")"; [[ -n "$line" ]] && record "$line"
            else
                warn "rawdownload $mode failed"
            fi
            rm -rf "$DL_PARENT/raw"
        done
    done
    # The memory row is the server's RSS (resources.md's words): a `hydra serve`
    # of its own (release, state on $DL_PARENT, a 64 MiB tier, 16 in flight)
    # fetches 20,000 distinct 64 KiB resources over RPC; its VmRSS once warm
    # and its VmHWM after, from /proc.
    log "resource memory: 20,000 x 64 KiB through hydra serve with a 64 MiB memory tier"
    MEM_PORT="$(( ${BENCH_RPC_PORT:-17400} + 2 ))"
    mkdir -p "$DL_PARENT/mem-state"
    cat > "$TMP/mem.json" <<EOF
{"rpc": {"listen": "127.0.0.1:$MEM_PORT"}, "state": {"path": "$DL_PARENT/mem-state"},
 "workers": [{"name": "rest", "kind": "remote", "maxConnections": 16, "maxHostConnections": 16, "maxActive": 16},
             {"name": "local", "kind": "local"}],
 "defaults": {"headers": {}}, "resources": {"memoryBytes": 67108864, "maxBytes": 4294967296}}
EOF
    start_serve "$TMP/mem.json" "$MEM_PORT" mem
    MEM_PID=$SERVED_PID
    if "$HYDRA_BENCH" resource-memory --connect "127.0.0.1:$MEM_PORT" --pid "$MEM_PID" \
        --prefix "http://127.0.0.1:$PORT/mem/" --files 20000 > "$TMP/out.txt"; then
        line="$(json_line resource-memory "$TMP/out.txt")"; [[ -n "$line" ]] && record "$line"
    else
        warn "hydra-bench resource-memory failed"
    fi
    kill -TERM "$MEM_PID" 2>/dev/null || true
    wait "$MEM_PID" 2>/dev/null || true
    rm -rf "$DL_PARENT/mem-state"
fi

# --- instructions per request (callgrind) -------------------------------------
# The machine's noise does not reach instruction counts: raw C, raw C with
# Hydra's options and `hydra-bench remote` each run under callgrind with 5,000
# and with 15,000 requests at c=64; the difference is the cost of 10,000
# requests without start-up. Hydra's threads are counted apart (the busiest
# one limits throughput). BENCH_INSTRUCTIONS=0 skips it.
if [[ "$HYDRA_OK" == 1 && "${BENCH_INSTRUCTIONS:-1}" != 0 ]] && command -v valgrind >/dev/null; then
    log "instructions per request at c=64 (callgrind: 5,000 and 15,000 requests, subtracted)"
    # valgrind cannot read the Swift binary's debug info: it runs a stripped copy.
    strip -o "$TMP/hydra-bench-stripped" "$HYDRA_BENCH"
    callgrind_total() { # out prefix, command...: the per-thread totals, one per line
        local prefix="$1"; shift
        rm -f "$prefix".*
        valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$prefix" "$@" > /dev/null 2> "$prefix.log" || true
        for f in "$prefix"-*; do awk '/^totals:/ {print $2}' "$f"; done
    }
    instructions_json="$(
        for n in 5000 15000; do
            echo "raw-c $n $(callgrind_total "$TMP/cg-raw-$n" "$RAWBENCH" "$URL" "$n" 64 | paste -sd' ')"
            echo "raw-c-same $n $(callgrind_total "$TMP/cg-same-$n" "$RAWBENCH" "$URL" "$n" 64 --same-options | paste -sd' ')"
            echo "hydra $n $(callgrind_total "$TMP/cg-hydra-$n" "$TMP/hydra-bench-stripped" remote --url "$URL" --requests "$n" --concurrency 64 | paste -sd' ')"
        done | python3 -c '
import json, sys
totals = {}
for line in sys.stdin:
    name, n, *threads = line.split()
    totals[(name, int(n))] = [int(t) for t in threads]
out = {"name": "instructions", "concurrency": 64, "requests": 10000}
for name in ("raw-c", "raw-c-same", "hydra"):
    a, b = totals.get((name, 5000)), totals.get((name, 15000))
    if not a or not b or len(a) != len(b):
        continue
    per_thread = [(y - x) / 10000 for x, y in zip(a, b)]
    out[name] = round(sum(per_thread))
    if name == "hydra":
        out["hydraBusiestThread"] = round(max(per_thread))
print(json.dumps(out, separators=(",", ":")))
'
    )"
    if [[ "$instructions_json" == *'"hydra":'* ]]; then record "$instructions_json"; else warn "callgrind printed no instruction counts"; fi
fi

# --- a 50,000-step concurrent graph through `hydra run` ------------------------
# One process from start to exit (parsing the spec, running, writing the result),
# timed against raw C doing as many requests at c=64 right before it.
HYDRA_BIN="$ROOT/.build/release/hydra"
if [[ "$HYDRA_OK" == 1 && -x "$HYDRA_BIN" && "${BENCH_GRAPH:-1}" != 0 ]]; then
    GRAPH_STEPS="${BENCH_GRAPH_STEPS:-50000}"
    [[ "$GRAPH_STEPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_GRAPH_STEPS must be a positive integer (got '$GRAPH_STEPS')"
    python3 - "$URL" "$GRAPH_STEPS" > "$TMP/graph.json" <<'PY'
import json, sys
url, n = sys.argv[1], int(sys.argv[2])
print(json.dumps({"type": "concurrent", "maxConcurrency": 64,
                  "steps": [{"type": "remote", "url": url} for _ in range(n)]}))
PY
    cat > "$TMP/graph-config.json" <<EOF
{"state": {"path": "$TMP/graph-state"},
 "workers": [{"name": "rest", "kind": "remote", "maxConnections": 64, "maxHostConnections": 64, "maxActive": 64},
             {"name": "local", "kind": "local", "threads": 1}],
 "defaults": {"headers": {}}, "limits": {"maxResultBytes": 1073741824}}
EOF
    for r in $(seq "$REPEAT"); do
        log "concurrent graph of $GRAPH_STEPS remote steps through hydra run, run $r/$REPEAT, after raw C at c=64"
        "$RAWBENCH" "$URL" "$GRAPH_STEPS" 64 > "$TMP/out.txt" || true
        line="$(json_line raw-c "$TMP/out.txt")"
        [[ -n "$line" ]] && record "${line/\"name\":\"raw-c\"/\"name\":\"raw-c-graph\"}"
        # The whole process is timed; its threads' CPU is read from /proc every
        # 20 ms (the last reading before each thread ends).
        line="$(python3 - "$HYDRA_BIN" "$TMP/graph.json" "$TMP/graph-config.json" "$GRAPH_STEPS" <<'PY'
import json, os, subprocess, sys, threading, time
binary, spec, config, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = time.monotonic()
p = subprocess.Popen([binary, "run", spec, "--config", config], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
cpu = {}
def sample():
    try:
        tasks = os.listdir(f"/proc/{p.pid}/task")
    except OSError:
        return
    for t in tasks:
        try:
            name = open(f"/proc/{p.pid}/task/{t}/comm").read().strip()
            ns = int(open(f"/proc/{p.pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        cpu[(name, t)] = ns
head = b""
def drain():
    # The result is the output's one line: {"jobId":…,"state":…,"result":…}.
    global head
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            return
        if len(head) < 4096:
            head += chunk[:4096]
reader = threading.Thread(target=drain)
reader.start()
while p.poll() is None:
    sample()
    time.sleep(0.02)
reader.join()
seconds = time.monotonic() - start
by_name = {}
for (name, _), ns in cpu.items():
    by_name[name] = by_name.get(name, 0) + ns
print(json.dumps({"name": "graph", "steps": steps, "seconds": round(seconds, 3), "rps": round(steps / seconds, 1),
                  "exit": p.returncode, "succeeded": b'"state":"succeeded"' in head,
                  "cpuUsPerStep": {k: round(v / 1000 / steps, 2) for k, v in by_name.items() if v / 1000 / steps >= 0.05}},
                 separators=(",", ":")))
PY
)"
        if [[ -n "$line" ]]; then record "$line"; else warn "the graph run printed no result"; fi
    done
fi

# --- hydra serve over JSON-RPC ---------------------------------------------------
# The real server (release build) with its state in a temp folder; clients
# from hydra-bench. Remote jobs go to the same nginx, 64 in flight, so the
# ratio is to raw C at concurrency 64 from the runs above.
if [[ "$HYDRA_OK" == 1 && -x "$HYDRA_BIN" && "${BENCH_SERVER:-1}" != 0 ]]; then
    RPC_PORT="${BENCH_RPC_PORT:-17400}"
    server_config "$TMP/hydra.json" "$RPC_PORT" "$TMP/state"
    log "starting hydra serve on 127.0.0.1:$RPC_PORT"
    start_serve "$TMP/hydra.json" "$RPC_PORT" serve
    SERVE_PID=$SERVED_PID
    rpc_run() { # name, args...
        local name="$1" line before after; shift
        before="$(thread_ns "$SERVE_PID")"
        if "$HYDRA_BENCH" "$@" --connect "127.0.0.1:$RPC_PORT" > "$TMP/out.txt"; then
            after="$(thread_ns "$SERVE_PID")"
            line="$(json_line "$name" "$TMP/out.txt")"
            [[ -n "$line" ]] && line="$(with_server_cpu "$line" "$before" "$after")"
            if [[ -n "$line" ]]; then record "$line"; else warn "hydra-bench $name printed no result"; fi
        else
            warn "hydra-bench $* failed"
        fi
    }
    RPC_JOBS="${BENCH_RPC_JOBS:-20000}"
    for clients in 1 16; do
        # The goal row (16 clients, single calls) runs REPEAT times and reports the
        # median: one run of 20,000 submits lasts under a second, a noisy minute's length.
        runs=1; [[ "$clients" == 16 ]] && runs="$REPEAT"
        for r in $(seq "$runs"); do
            log "durable submits over RPC: $clients client(s), single calls, run $r/$runs"
            rpc_run rpc-submit rpc-submit --jobs "$RPC_JOBS" --clients "$clients" --batch 1
        done
        log "durable submits over RPC: $clients client(s), batches of 500"
        rpc_run rpc-submit rpc-submit --jobs "$((RPC_JOBS * 5))" --clients "$clients" --batch 500
    done
    for r in $(seq "$REPEAT"); do
        # raw C right before each run: the ratio of the pair is taken at the same moment
        # (on a shared machine raw C alone varies by a third from one minute to the next).
        log "remote jobs over RPC (batches of 500, 64 in flight), run $r/$REPEAT, after raw C at c=64"
        "$RAWBENCH" "$URL" "$REQUESTS" 64 > "$TMP/out.txt" || true
        line="$(json_line raw-c "$TMP/out.txt")"
        [[ -n "$line" ]] && record "${line/\"name\":\"raw-c\"/\"name\":\"raw-c-paired\"}"
        rpc_run rpc-remote rpc-remote --url "$URL" --jobs "$REQUESTS" --clients 1 --batch 500
    done
    log "event fan-out to 100 subscribers"
    rpc_run fanout fanout --subscribers 100 --jobs 2000
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
fi

# --- the server's instructions per job (callgrind) ------------------------------
# The two server rows' per-thread CPU moves with the host by more than most
# changes do; instruction counts do not. `hydra-bench serve` (the store,
# service and RPC server of `hydra serve`, in a process Valgrind can run: it
# dies where `hydra serve`'s async main parks in libdispatch's sigsuspend)
# runs under callgrind for 1,000 and for 3,000 jobs of each row: the
# difference is the cost of 2,000 jobs without start-up, by thread. The
# kernel's share (the RPC thread's sockets, the writer's files) is not in it.
# Batching differs from a real run (Valgrind runs one thread at a time): the
# writer's count moves with its commits' sizes (76-86k per durable submit),
# the others' by about 1%.
if [[ "$HYDRA_OK" == 1 && "${BENCH_INSTRUCTIONS:-1}" != 0 ]] && command -v valgrind >/dev/null; then
    log "server instructions per job (callgrind: 1,000 and 3,000 jobs, subtracted)"
    # Debug info out (Valgrind 3.19 cannot read it), symbols kept: they tell the threads apart.
    strip --strip-debug -o "$TMP/hydra-bench-symbols" "$HYDRA_BENCH"
    CG_PORT=$(( ${BENCH_RPC_PORT:-17400} + 1 ))
    server_counts() { # mode (durable|remote), jobs: one line per thread, "name instructions"
        local dir="$TMP/cg-serve-$1-$2" pid
        rm -rf "$dir"; mkdir -p "$dir"
        server_config "$dir/h.json" "$CG_PORT" "$dir/state"
        valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/cg" \
            "$TMP/hydra-bench-symbols" serve --config "$dir/h.json" > /dev/null 2> "$dir/log" &
        pid=$!
        for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$CG_PORT") 2>/dev/null && break; sleep 0.1; done
        if [[ "$1" == durable ]]; then
            "$HYDRA_BENCH" rpc-submit --connect "127.0.0.1:$CG_PORT" --jobs "$2" --clients 16 --batch 1 > "$dir/client" || true
        else
            # Asked every second, not every 2 ms: each hydra.stats would count as the RPC thread's work.
            "$HYDRA_BENCH" rpc-remote --connect "127.0.0.1:$CG_PORT" --url "$URL" --jobs "$2" --clients 1 --batch 500 \
                --poll-ms 1000 > "$dir/client" || true
        fi
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        grep -q '"failed":0' "$dir/client" || warn "server instructions ($1, $2 jobs): $(cat "$dir/client")"
        # Threads are told apart by a function only each one runs (callgrind files carry no thread names).
        python3 - "$dir" <<'PY'
import glob, sys
marks = [("main", "ServeB0O5serve"), ("hydra-store", "WriterC3run"), ("hydra-checkpt", "CheckpointerC"),
         ("hydra-rpc", "RPCServerRuntime"), ("hydra-coordinator", "CoordinatorRuntimeC6handle"),
         ("hydra-rest", "curl_multi_socket_action"), ("hydra-local", "HydraLocal")]
totals = {}
for path in glob.glob(sys.argv[1] + "/cg-*"):
    text = open(path, errors="replace").read()
    name = next((n for n, m in marks if m in text), "other")
    count = next((int(l.split()[1]) for l in text.splitlines() if l.startswith("totals:")), 0)
    totals[name] = totals.get(name, 0) + count
for name, count in totals.items():
    print(name, count)
PY
    }
    server_json="$(
        for mode in durable remote; do
            for n in 1000 3000; do server_counts "$mode" "$n" | sed "s/^/$mode $n /"; done
        done | python3 -c '
import json, sys
counts = {}
for line in sys.stdin:
    mode, n, name, value = line.split()
    counts.setdefault(mode, {}).setdefault(int(n), {})[name] = int(value)
out = {"name": "server-instructions", "jobs": 2000}
for mode, key in (("durable", "durableSubmit"), ("remote", "remoteJobOverRPC")):
    a, b = counts.get(mode, {}).get(1000), counts.get(mode, {}).get(3000)
    if not a or not b:
        continue
    per = {t: round((b.get(t, 0) - a.get(t, 0)) / 2000) for t in set(a) | set(b) if t != "main"}
    out[key] = {t: v for t, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 100}
print(json.dumps(out, separators=(",", ":")))
'
    )"
    if [[ "$server_json" == *'"durableSubmit"'* ]]; then record "$server_json"; else warn "callgrind printed no server instruction counts"; fi
fi

# --- the REST manager's second half (rest.md, issue 14) -------------------------
# Auth on vs off in pairs at c=64; 10,000 identical GETs merged vs unmerged
# (the requests that reach nginx counted from its access log); one bodyFile
# upload of BENCH_UPLOAD_MB (1024) MiB to nginx's discarding sink, paired with
# `curl -T` of the same file, and the engine's peak RSS growth.
if [[ "$HYDRA_OK" == 1 && "${BENCH_REST:-1}" != 0 ]]; then
    log "auth: a bearer session vs none at c=64, in pairs (ABBA)"
    if "$HYDRA_BENCH" auth --url "$URL" --requests "$REQUESTS" --concurrency 64 --pairs "$(( REPEAT < 6 ? 6 : REPEAT ))" > "$TMP/out.txt"; then
        line="$(json_line auth-bearer "$TMP/out.txt")"; [[ -n "$line" ]] && record "$line"
    else
        warn "hydra-bench auth failed"
    fi
    log "merged requests: 10,000 identical GETs at once"
    if "$HYDRA_BENCH" merged --url "http://127.0.0.1:$PORT/merged.json" --log "$TMP/merged.log" \
        --jobs "${BENCH_MERGED_JOBS:-10000}" > "$TMP/out.txt"; then
        line="$(json_line merged "$TMP/out.txt")"; [[ -n "$line" ]] && record "$line"
    else
        warn "hydra-bench merged failed"
    fi
    UPLOAD_MB="${BENCH_UPLOAD_MB:-1024}"
    [[ "$UPLOAD_MB" =~ ^[1-9][0-9]*$ ]] || die "BENCH_UPLOAD_MB must be a positive integer (got '$UPLOAD_MB')"
    mkdir -p "$TMP/upload-state"
    head -c "$((UPLOAD_MB * 1048576))" /dev/urandom > "$TMP/upload-state/big.bin"
    for r in $(seq "$REPEAT"); do
        log "upload of $UPLOAD_MB MiB, run $r/$REPEAT: curl -T, then hydra"
        read -r seconds bytes < <(curl -s -T "$TMP/upload-state/big.bin" "http://127.0.0.1:$PORT/sink" -o /dev/null \
            -w '%{time_total} %{size_upload}\n')
        record "$(python3 -c 'import json,sys; s,b=float(sys.argv[1]),int(float(sys.argv[2])); print(json.dumps({"name":"curl-upload","bytes":b,"seconds":s,"mbps":round(b/1048576/s,3)}))' "$seconds" "$bytes")"
        if "$HYDRA_BENCH" upload --file big.bin --state "$TMP/upload-state" --url "http://127.0.0.1:$PORT/sink" > "$TMP/out.txt"; then
            line="$(json_line upload "$TMP/out.txt")"; [[ -n "$line" ]] && record "$line"
        else
            warn "hydra-bench upload failed"
        fi
    done
    rm -f "$TMP/upload-state/big.bin"
fi

# --- report ------------------------------------------------------------------
python3 - "$RESULTS_JSONL" "$RESULTS_MD" "$HYDRA_NOTE" "$RUN_TOOLS" "$MACHINE" <<'PY'
import json, statistics, sys
jsonl, md_path, hydra_note, run_tools, machine = sys.argv[1:]
rows = [json.loads(l) for l in open(jsonl) if l.strip()]
runs = {}
for r in rows:
    if "concurrency" in r and "rps" in r:
        runs.setdefault(r["concurrency"], {}).setdefault(r["name"], []).append(r)
by = {}
for c, names in runs.items():
    for name, rs in names.items():
        threads = sorted({t for x in rs for t in x.get("cpuUsPerJob", {})})
        by.setdefault(c, {})[name] = {
            "rps": statistics.median(x["rps"] for x in rs),
            "failed": sum(x.get("failed", 0) for x in rs),
            "requests": rs[0]["requests"],
            # CPU µs per request by thread, median over runs (hydra rows only).
            "cpu": {t: statistics.median(x["cpuUsPerJob"][t] for x in rs if t in x.get("cpuUsPerJob", {}))
                    for t in threads},
        }
local = next((r for r in rows if r.get("name") == "local-noop"), None)
raw_n = next((r["requests"] for r in rows if r.get("name") == "raw-c"), None)

def fmt(r, base, missing):
    if r is None:
        return missing
    s = f"{r['rps']:,.0f}"
    if base:
        s += f" ({r['rps'] / base:.2f}×)"
    if r.get("failed"):
        s += f" [{r['failed']} failed]"
    if raw_n is not None and r["requests"] != raw_n:
        s += f" (N={r['requests']})"
    return s

tools_missing = "–" if run_tools != "0" else "skipped (BENCH_TOOLS=0)"
out = [machine, "",
       "| concurrency | raw C req/s | raw C, Hydra's options req/s (× raw C) | hydra req/s (× raw C) | hydra × raw C with Hydra's options | curl --parallel req/s (× raw C) | aria2c req/s (× raw C) |",
       "|---:|---:|---:|---:|---:|---:|---:|"]
for c in sorted(by):
    g = by[c]
    raw = g.get("raw-c")
    base = raw["rps"] if raw and raw["rps"] > 0 else None
    same = g.get("raw-c-same")
    hydra = g.get("hydra")
    same_ratio = "–"
    if same and hydra and same["rps"] > 0:
        same_ratio = f"{hydra['rps'] / same['rps']:.2f}×"
    out.append("| %d | %s | %s | %s | %s | %s | %s |" % (
        c, fmt(raw, None, "–"), fmt(same, base, "–"),
        fmt(hydra, base, hydra_note or "–"), same_ratio,
        fmt(g.get("curl-parallel"), base, tools_missing),
        fmt(g.get("aria2c"), base, tools_missing)))
out.append("")
cpu_lines = []
for c in sorted(by):
    cpu = (by[c].get("hydra") or {}).get("cpu") or {}
    if cpu:
        cpu_lines.append("c=%d: " % c + ", ".join("%s %.1f" % (t, v) for t, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
# Each hydra run follows a raw C run at the same concurrency: the median of the
# per-pair ratios is less sensitive to the machine's drift than a ratio of medians.
pair_lines = []
for c in sorted(runs):
    raws, hydras = runs[c].get("raw-c", []), runs[c].get("hydra", [])
    pairs = [h["rps"] / r["rps"] for r, h in zip(raws, hydras) if r["rps"] > 0]
    if pairs:
        pair_lines.append("c=%d %.2f× (%s)" % (c, statistics.median(pairs), ", ".join("%.2f" % p for p in pairs)))
if pair_lines:
    out.append("hydra ÷ raw C, run by run (median of the pairs, then each pair): " + "; ".join(pair_lines))
    out.append("")
armed = runs.get(64, {}).get("raw-c-armed", [])
if armed:
    raws64, hydras64 = runs[64].get("raw-c", []), runs[64].get("hydra", [])
    armed_pairs = [a["rps"] / r["rps"] for r, a in zip(raws64, armed) if r["rps"] > 0]
    hydra_armed = [h["rps"] / a["rps"] for a, h in zip(armed, hydras64) if a["rps"] > 0]
    out.append("Raw C at c=64 keeping each socket's watch armed between requests, as Hydra's worker does "
               "(reference; the goal is on plain raw C): %s req/s, %.2f× raw C by pairs (%s); hydra %.2f× of it (%s)" % (
                   f"{statistics.median(x['rps'] for x in armed):,.0f}",
                   statistics.median(armed_pairs) if armed_pairs else 0, ", ".join("%.2f" % p for p in armed_pairs),
                   statistics.median(hydra_armed) if hydra_armed else 0, ", ".join("%.2f" % p for p in hydra_armed)))
    out.append("")
for name, what in (("hydra-tcmalloc", "with tcmalloc preloaded (the allocator the release `hydra` links)"),
                   ("hydra-2workers", "with two remote workers, 32 in flight each (reference; the goal is on one worker)")):
    ref = runs.get(64, {}).get(name, [])
    if not ref:
        continue
    ref_pairs = [h["rps"] / r["rps"] for r, h in zip(runs[64].get("raw-c", []), ref) if r["rps"] > 0]
    out.append("The same at c=64 %s: %s req/s, %.2f× raw C by pairs (%s); busiest thread %.1f µs per request" % (
                   what, f"{statistics.median(x['rps'] for x in ref):,.0f}", statistics.median(ref_pairs) if ref_pairs else 0,
                   ", ".join("%.2f" % p for p in ref_pairs),
                   statistics.median(max(x.get("cpuUsPerJob", {"?": 0}).values()) for x in ref)))
    out.append("")
if cpu_lines:
    out.append("Hydra CPU µs per request by thread (median of runs; the busiest thread limits throughput): "
               + "; ".join(cpu_lines))
    out.append("")
if local:
    cpu = local.get("cpuUsPerJob") or {}
    out.append("Local no-op: %s jobs in %.3f s = %s jobs/s, p50 %s µs, p99 %s µs%s" % (
        f"{local['jobs']:,}", local["seconds"], f"{local['rps']:,.0f}",
        local.get("p50us", "?"), local.get("p99us", "?"),
        "; CPU µs per job: " + ", ".join("%s %.2f" % (t, v) for t, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
        if cpu else ""))
else:
    out.append("Local no-op: " + (hydra_note or "no result"))

ins = next((r for r in rows if r.get("name") == "instructions"), None)
if ins and ins.get("hydra"):
    same = f", raw C with Hydra's options {ins['raw-c-same'] / 1000:.1f}k" if ins.get("raw-c-same") else ""
    out += ["", "Instructions per request at c=64 (callgrind; the cost of 10,000 requests, start-up excluded, "
            "the same whatever the machine's noise): raw C %.1fk%s, hydra %.1fk (its busiest thread %.1fk): "
            "raw C ÷ hydra %.2f, ÷ hydra's busiest thread %.2f" % (
                ins["raw-c"] / 1000, same, ins["hydra"] / 1000, ins["hydraBusiestThread"] / 1000,
                ins["raw-c"] / ins["hydra"], ins["raw-c"] / ins["hydraBusiestThread"])]

graphs = [r for r in rows if r.get("name") == "graph"]
if graphs:
    raws = [r for r in rows if r.get("name") == "raw-c-graph"]
    pairs = [g["rps"] / r["rps"] for r, g in zip(raws, graphs) if r["rps"] > 0]
    med = statistics.median(g["rps"] for g in graphs)
    cpu = {}
    for g in graphs:
        for t, v in (g.get("cpuUsPerStep") or {}).items():
            cpu.setdefault(t, []).append(v)
    bad = [g for g in graphs if g.get("exit") != 0 or not g.get("succeeded")]
    out += ["", "Concurrent graph of %s remote steps (maxConcurrency 64) through `hydra run`, whole process: "
            "%s steps/s, median of pairs %s× the raw C run just before (%s; raw C %s req/s)%s; CPU µs per step: %s" % (
                f"{graphs[0]['steps']:,}", f"{med:,.0f}",
                "%.2f" % statistics.median(pairs) if pairs else "?", "/".join("%.2f" % p for p in pairs),
                "/".join(f"{r['rps']:,.0f}" for r in raws),
                " [%d runs failed]" % len(bad) if bad else "",
                ", ".join("%s %.1f" % (t, statistics.median(v)) for t, v in sorted(cpu.items(), key=lambda kv: -statistics.median(kv[1]))))]

submits = [r for r in rows if r.get("name") == "rpc-submit"]
remote_rpc = [r for r in rows if r.get("name") == "rpc-remote"]
fan = next((r for r in rows if r.get("name") == "fanout"), None)
if submits or remote_rpc or fan:
    out += ["", "hydra serve over JSON-RPC (durable: each submit answered after its SQLite commit):", "",
            "| measure | clients | per call | result |", "|---|---:|---:|---:|"]
    shapes = []
    for r in submits:
        if (r["clients"], r["batch"]) not in shapes: shapes.append((r["clients"], r["batch"]))
    for clients, batch in shapes:
        runs = [r for r in submits if (r["clients"], r["batch"]) == (clients, batch)]
        failed = sum(r.get("failed", 0) for r in runs)
        rate = f"{statistics.median(r['rps'] for r in runs):,.0f} jobs/s"
        if len(runs) > 1: rate += " (median of %s)" % "/".join(f"{r['rps']:,}" for r in runs)
        out.append("| durable submits | %d | %d | %s%s |" % (clients, batch, rate, f" [{failed} failed]" if failed else ""))
    if remote_rpc:
        med = statistics.median(r["rps"] for r in remote_rpc)
        raw64 = by.get(64, {}).get("raw-c")
        ratio = f" ({med / raw64['rps']:.2f}× the raw C median at c=64" if raw64 and raw64["rps"] else " ("
        paired = [r for r in rows if r.get("name") == "raw-c-paired"]
        if len(paired) == len(remote_rpc):
            pairs = [h["rps"] / r["rps"] for r, h in zip(paired, remote_rpc) if r["rps"] > 0]
            if pairs:
                ratio += "%s%.2f× raw C run just before, median of pairs %s; raw C %s req/s" % (
                    "; " if raw64 else "", statistics.median(pairs), "/".join("%.2f" % p for p in pairs),
                    "/".join(f"{r['rps']:,.0f}" for r in paired))
        ratio = ratio + ")" if ratio != " (" else ""
        failed = sum(r.get("failed", 0) for r in remote_rpc)
        out.append("| remote jobs end to end, 64 in flight | 1 | %d | %s jobs/s%s%s |" % (
            remote_rpc[0]["batch"], f"{med:,.0f}", ratio, f" [{failed} failed]" if failed else ""))
    if fan:
        out.append("| event fan-out, %d subscribers | 1 | 500 | %s events/s delivered (%s of %s) |" % (
            fan["subscribers"], f"{fan['eventsPerSecond']:,}", f"{fan['events']:,}", f"{fan['expected']:,}"))
    # The server's own threads, CPU µs per job (median of the runs), busiest first.
    def server_cpu(runs):
        cpu = {}
        for r in runs:
            for t, v in r.get("serverCpuUsPerJob", {}).items(): cpu.setdefault(t, []).append(v)
        return ", ".join("%s %.1f" % (t, statistics.median(v)) for t, v in
                         sorted(cpu.items(), key=lambda kv: -statistics.median(kv[1])) if statistics.median(v) >= 0.1)
    lines = []
    for label, runs in (("durable submits, 16 clients, single calls", [r for r in submits if (r["clients"], r["batch"]) == (16, 1)]),
                        ("remote jobs end to end", remote_rpc)):
        text = server_cpu(runs)
        if text: lines.append("%s: %s" % (label, text))
    if lines:
        out += ["", "Server CPU µs per job by thread (median of runs): " + "; ".join(lines)]
server_ins = next((r for r in rows if r.get("name") == "server-instructions"), None)
if server_ins:
    parts = []
    for key, label in (("durableSubmit", "durable submits, 16 clients, single calls"),
                       ("remoteJobOverRPC", "remote jobs over RPC, batches of 500")):
        threads = server_ins.get(key)
        if threads:
            parts.append("%s: %s, total %.1fk" % (label, ", ".join("%s %.1fk" % (t, v / 1000) for t, v in threads.items()),
                                                 sum(threads.values()) / 1000))
    if parts:
        out += ["", "Server instructions per job by thread (callgrind, `hydra-bench serve`; 3,000 jobs minus 1,000, "
                "user space only, the same whatever the machine's noise): " + "; ".join(parts)]
auth = next((r for r in rows if r.get("name") == "auth-bearer"), None)
merged = next((r for r in rows if r.get("name") == "merged"), None)
uploads = [r for r in rows if r.get("name") == "upload"]
curl_uploads = [r for r in rows if r.get("name") == "curl-upload"]
hits = {r["name"]: r for r in rows if r.get("name", "").startswith("resource-") and r["name"].endswith("-hits")}
if auth or merged or uploads or hits or any(r.get("name", "").startswith("resource-") for r in rows):
    out += ["", "| rest.md / resources.md row | result | goal |", "|---|---|---|"]
    if auth:
        header = " (the same header set by the job, no session: %.1f µs)" % auth["headerOnlyWorkerUs"] if "headerOnlyWorkerUs" in auth else ""
        out.append("| remote jobs with a bearer session, c=64 | %s jobs/s vs %s without: %.3f× (pairs %s); worker CPU %.1f vs %.1f µs per job%s | ≥ 0.95× |" % (
            f"{auth['authRps']:,}", f"{auth['plainRps']:,}", auth["ratio"], "/".join("%.3f" % x for x in auth["ratios"]),
            auth.get("authWorkerUs", 0), auth.get("plainWorkerUs", 0), header))
    if merged:
        out.append("| %s identical GETs, coalesce | %d reached nginx (%.2f%%), %.3f s; unmerged: %d requests, %.3f s | ≤ 1%%, faster |" % (
            f"{merged['jobs']:,}", merged["reached"], merged["reachedPercent"], merged["seconds"],
            merged["unmergedReached"], merged["unmergedSeconds"]))
    if uploads:
        pairs = [u["mbps"] / c["mbps"] for c, u in zip(curl_uploads, uploads) if c["mbps"] > 0]
        out.append("| bodyFile upload of %d MiB to a sink | %.0f MB/s vs curl -T %.0f MB/s: %s× (pairs %s); peak RSS growth %.1f MiB | ≥ 0.8×, < 64 MiB |" % (
            uploads[0]["bytes"] // 1048576, statistics.median(u["mbps"] for u in uploads),
            statistics.median(c["mbps"] for c in curl_uploads) if curl_uploads else 0,
            "%.2f" % statistics.median(pairs) if pairs else "?", "/".join("%.2f" % p for p in pairs),
            max(u["peakGrowthKiB"] for u in uploads) / 1024))
    downloads = [r for r in rows if r.get("name") == "resource-download"]
    curl_downloads = [r for r in rows if r.get("name") == "curl-download"]
    null_downloads = [r for r in rows if r.get("name") == "curl-download-null"]
    if downloads:
        pairs = [d["mbps"] / c["mbps"] for c, d in zip(curl_downloads, downloads) if c["mbps"] > 0]
        null_pairs = [d["mbps"] / c["mbps"] for c, d in zip(null_downloads, downloads) if c["mbps"] > 0]
        out.append("| 2,000 distinct 256 KiB resources, 16 in flight, kept on disk | %.0f MB/s vs curl --parallel saving files %.0f MB/s: %s× (pairs %s); vs curl to /dev/null %.0f MB/s: %s× | ≥ 0.8× |" % (
            statistics.median(d["mbps"] for d in downloads),
            statistics.median(c["mbps"] for c in curl_downloads) if curl_downloads else 0,
            "%.2f" % statistics.median(pairs) if pairs else "?", "/".join("%.2f" % p for p in pairs),
            statistics.median(c["mbps"] for c in null_downloads) if null_downloads else 0,
            "%.2f" % statistics.median(null_pairs) if null_pairs else "?"))
        # The ceiling: plain C doing the same downloads, paired with the same curl runs.
        raw = {mode: [r for r in rows if r.get("name") == "raw-download-" + mode] for mode in ("none", "inline", "pool")}
        if raw["pool"]:
            def vs_curl(runs):
                ratios = [r["mbps"] / c["mbps"] for c, r in zip(curl_downloads, runs) if c["mbps"] > 0]
                return "%.2f× (pairs %s)" % (statistics.median(ratios), "/".join("%.2f" % x for x in ratios)) if ratios else "?"
            hydra_vs_pool = [d["mbps"] / p["mbps"] for p, d in zip(raw["pool"], downloads) if p["mbps"] > 0]
            out.append("| the same in plain C (libcurl + libuv; OpenSSL SHA-256): files only; + digest on the loop; + digest on a thread pool | %s; %s; %s the curl runs; CPU %s s; Hydra %s× the thread-pool C | the row's ceiling here |" % (
                vs_curl(raw["none"]), vs_curl(raw["inline"]), vs_curl(raw["pool"]),
                "/".join("%.2f" % statistics.median(r["cpuSeconds"] for r in raw[m]) for m in ("none", "inline", "pool") if raw[m]),
                "%.2f" % statistics.median(hydra_vs_pool) if hydra_vs_pool else "?"))
    held = next((r for r in rows if r.get("name") == "resource-memory"), None)
    if held:
        out.append("| 20,000 distinct 64 KiB resources through hydra serve, memoryBytes 64 MiB | server RSS %.1f MiB idle, %.1f MiB at peak: +%.1f MiB | < idle + 96 MiB |" % (
            held["idleRssKiB"] / 1024, held["peakRssKiB"] / 1024, (held["peakRssKiB"] - held["idleRssKiB"]) / 1024))
    for name in sorted(hits):
        r = hits[name]
        anchor = " (%.2f× the local no-op rate)" % (r["rps"] / local["rps"]) if local and local.get("rps") else ""
        out.append("| %s of a 4 KiB resource | %s jobs/s%s | %s |" % (
            name, f"{r.get('rps', 0):,}", anchor, "≥ 300k" if "memory" in name else "≥ 50k"))
text = "\n".join(out) + "\n"
open(md_path, "w").write(text)
sys.stdout.write("\n" + text)
PY
log "wrote $RESULTS_MD and $RESULTS_JSONL"
