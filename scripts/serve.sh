#!/bin/sh
# Serve Attention Explorer to a class: N app processes behind nginx, with sticky sessions.
#
#   sh scripts/serve.sh                      2 replicas, the balancer on port 8501
#   sh scripts/serve.sh --replicas 4 --port 8080 --address 0.0.0.0
#   sh scripts/serve.sh --per-client-connections 80 --per-client-rate 300 --per-client-burst 100
#                                            a class of 30 behind one NAT address (README)
#
# Options (the per-client ones also from the environment variables under them):
#   --replicas N                  app processes (1..32; one per core)                      [2]
#   --port P, --address A         where nginx listens; replica i listens on 127.0.0.1:P+i  [8501, 127.0.0.1]
#   --per-client-connections N    requests in progress and open pages (websockets) at once
#                                 per client address; static files get 4 x N   [8; 0 = no bound]
#     ATTENTION_EXPLORER_PER_CLIENT_CONNECTIONS
#   --per-client-rate R           page loads per minute per client address, and as many new
#                                 websockets (each counted on its own)         [30; 0 = no bound]
#     ATTENTION_EXPLORER_PER_CLIENT_RATE
#   --per-client-burst B          loads above the rate served at once before refusing    [20]
#     ATTENTION_EXPLORER_PER_CLIENT_BURST
#   --exempt LIST                 addresses or CIDR ranges never bounded, comma-separated, or
#                                 "none" (default: this machine, 127.0.0.1)   [127.0.0.1]
#     ATTENTION_EXPLORER_EXEMPT
#   --access-code generate        make a long random access code (20 characters from 32: 100
#                                 bits), give it to the replicas and print it once, here (never
#                                 to a log). Your own code: export ATTENTION_EXPLORER_ACCESS_CODE
#   --trusted-proxy LIST          proxies in front of this nginx (a TLS tunnel on this machine:
#                                 127.0.0.1), comma-separated addresses or CIDR ranges: nginx
#                                 takes the client from their X-Forwarded-For (real_ip), so its
#                                 per-client bounds and the access code's limits see the real
#                                 client                                              [none]
#
# Environment: PYTHON (the interpreter of every python this script runs)        [python]
#   ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE=1 with no ATTENTION_EXPLORER_ACCESS_CODE: exit 2 at once.
#   The replicas get ATTENTION_EXPLORER_STATE_DIR (the access limits and the class's poll answers
#   they share, explorer/store.py and explorer/poll.py; default: the run folder) and
#   ATTENTION_EXPLORER_TRUSTED_PROXIES=127.0.0.1 (this nginx).
#   ATTENTION_EXPLORER_PRESENTER_KEY: the key that opens "Ask the class" in presenter mode; unset, a
#   key is made for this run and printed once, here (never to a log). ATTENTION_EXPLORER_POLL_STORE
#   (sqlite:///path or redis://host:port/db) replaces the run folder's polls.sqlite3.
#
# Sticky sessions. A Streamlit session is one websocket, and the download URLs a page makes are
# served by the process that made them: both must reach the same replica. nginx gives every
# browser a cookie (ae_replica) on its first request and routes by a consistent hash of it, so the
# page, its websocket and its downloads stick to one replica (open-source nginx has no `sticky`
# directive; `ip_hash` would send a whole classroom behind one NAT to one replica). The replicas
# share one cookie secret and run in hosted mode (ATTENTION_EXPLORER_HOSTED=1, unless set
# otherwise), each with one torch thread per forward pass and one script thread per session
# (runner.fastReruns off: a new rerun replaces the running one; README).
#
# Supervised. A replica that exits or is killed (SIGKILL too, as the kernel does when memory runs
# out) is started again after 1 s, then 2, 4, ... 30 s while it keeps dying within a minute of its
# start; every exit and restart is logged to stderr, to serve.log in the run folder (printed at
# start) and to that replica's log there. nginx stops sending to a replica that refuses
# connections at once (max_fails=1: a failed request goes to the next replica and the dead one is
# left alone for 5 s), then tries it again; a page that was on it reconnects to another replica
# and, at its next action, is drawn again from its URL. Its browsers go back to it once it answers.
#
# Bounded per client address (the connection's peer; see the README for a class behind one NAT
# address): refusals are answered with status 429 and a short text. Uploads (/_stcore/upload_file:
# the app has none) are refused with 403 and request bodies bounded to 16 KB. Ctrl-C (or SIGTERM)
# stops nginx and every replica.
set -eu
cd "$(dirname "$0")/.."

replicas=2
port=8501
address=127.0.0.1
conns="${ATTENTION_EXPLORER_PER_CLIENT_CONNECTIONS:-8}"
rate="${ATTENTION_EXPLORER_PER_CLIENT_RATE:-30}"
burst="${ATTENTION_EXPLORER_PER_CLIENT_BURST:-20}"
exempt="${ATTENTION_EXPLORER_EXEMPT:-127.0.0.1}"
access_code=""
trusted=""
PY="${PYTHON:-python}"
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || case "$1" in -h|--help) ;; *) echo "serve.sh: $1 needs a value (see --help)" >&2; exit 2 ;; esac
    case "$1" in
        --replicas) replicas="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --address) address="$2"; shift 2 ;;
        --per-client-connections) conns="$2"; shift 2 ;;
        --per-client-rate) rate="$2"; shift 2 ;;
        --per-client-burst) burst="$2"; shift 2 ;;
        --exempt) exempt="$2"; shift 2 ;;
        --access-code) access_code="$2"; shift 2 ;;
        --trusted-proxy) trusted="$2"; shift 2 ;;
        -h|--help) sed -n '2,61p' "$0"; exit 0 ;;
        *) echo "serve.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for pair in "replicas:$replicas" "port:$port" "per-client-connections:$conns" "per-client-rate:$rate" \
            "per-client-burst:$burst"; do
    case "${pair#*:}" in ''|*[!0-9]*) echo "serve.sh: --${pair%%:*} must be a whole number" >&2; exit 2 ;; esac
done
[ "$replicas" -ge 1 ] && [ "$replicas" -le 32 ] || { echo "serve.sh: --replicas must be 1..32" >&2; exit 2; }
case "$exempt" in
    none|'') exempt="" ;;
    *[!0-9a-fA-F.:/,]*) echo "serve.sh: --exempt takes addresses or CIDR ranges, comma-separated, or none" >&2; exit 2 ;;
esac
case "$trusted" in
    *[!0-9a-fA-F.:/,]*) echo "serve.sh: --trusted-proxy takes addresses or CIDR ranges, comma-separated" >&2; exit 2 ;;
esac
command -v "$PY" >/dev/null 2>&1 || { echo "serve.sh: no interpreter $PY (set PYTHON to one with the app's packages)" >&2; exit 2; }
case "$access_code" in
    '') ;;
    generate)
        # 20 characters from 32 (no l, o, 0, 1): 100 bits, in groups of five
        code=$("$PY" -c "import secrets; a = 'abcdefghijkmnpqrstuvwxyz23456789'; c = ''.join(secrets.choice(a) for _ in range(20)); print('-'.join(c[i:i + 5] for i in range(0, 20, 5)))") \
            || { echo "serve.sh: $PY could not make a code" >&2; exit 2; }
        ATTENTION_EXPLORER_ACCESS_CODE=$code
        export ATTENTION_EXPLORER_ACCESS_CODE
        ;;
    *) echo "serve.sh: --access-code takes only 'generate' (a code typed on the command line shows in ps and the shell history); for a code of your own, export ATTENTION_EXPLORER_ACCESS_CODE" >&2; exit 2 ;;
esac
# the presenter key for class polls (explorer/poll_ui.py): the host's, or one made for this run
presenter_made=""
if [ -z "${ATTENTION_EXPLORER_PRESENTER_KEY:-}" ]; then
    ATTENTION_EXPLORER_PRESENTER_KEY=$("$PY" -c "import secrets; a = 'abcdefghijkmnpqrstuvwxyz23456789'; c = ''.join(secrets.choice(a) for _ in range(15)); print('-'.join(c[i:i + 5] for i in range(0, 15, 5)))") \
        || { echo "serve.sh: $PY could not make a presenter key" >&2; exit 2; }
    presenter_made=1
fi
export ATTENTION_EXPLORER_PRESENTER_KEY
# a host who asks for a code and gives none: stop before anything starts (explorer/access.py)
if ! why=$("$PY" -c "from explorer.access import check_required; check_required()" 2>&1); then
    echo "serve.sh: $why" >&2
    exit 2
fi
if ! "$PY" -c "import streamlit" >/dev/null 2>&1; then
    echo "serve.sh: $PY cannot import streamlit (sh scripts/setup.sh installs it; PYTHON=/path/to/venv/bin/python picks another interpreter)" >&2
    exit 2
fi

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing: nginx"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null 2>&1 \
            || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
    else
        echo "serve.sh: needs nginx (sudo apt-get install -y nginx-light)" >&2
        exit 3
    fi
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

run=$(mktemp -d "${TMPDIR:-/tmp}/attention-explorer-serve.XXXXXX")
secret=$("$PY" -c "import secrets; print(secrets.token_hex(32))")
state="${ATTENTION_EXPLORER_STATE_DIR:-$run/state}"  # the access limits the replicas share (explorer/store.py)
pids=""
cleanup() {
    trap - EXIT INT TERM
    [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true
    for p in $pids; do kill "$p" 2>/dev/null || true; done  # supervisors stop their replica first
    wait 2>/dev/null || true
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

log() {  # one line to stderr, to the run folder's serve.log and to the file given first (if any)
    to=$1
    shift
    line="serve.sh $(date '+%Y-%m-%d %H:%M:%S'): $*"
    echo "$line" >&2
    echo "$line" >>"$run/serve.log"
    [ -z "$to" ] || echo "$line" >>"$to"
}

# One replica, started again whenever it exits: runs in a background subshell, which stops its
# replica when told to (SIGTERM) and gives up if serve.sh itself is gone.
supervise() {
    i=$1
    p=$2
    child=""
    starts=0
    delay=1
    trap 'trap - TERM; [ -z "$child" ] || kill "$child" 2>/dev/null; wait; exit 0' TERM
    while :; do
        started=$(date +%s)
        # runner.fastReruns off: a session's new rerun replaces its running one on the same thread
        # (at the script's next st.* call) instead of starting another thread beside it (README)
        ATTENTION_EXPLORER_HOSTED="${ATTENTION_EXPLORER_HOSTED:-1}" \
        OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" \
        STREAMLIT_SERVER_COOKIE_SECRET="$secret" \
        ATTENTION_EXPLORER_STATE_DIR="$state" ATTENTION_EXPLORER_TRUSTED_PROXIES=127.0.0.1 \
            "$PY" -m streamlit run explorer/app.py --server.address 127.0.0.1 --server.port "$p" \
            --server.headless true --runner.fastReruns false >>"$run/replica-$i.log" 2>&1 &
        child=$!
        echo "$child" >"$run/replica-$i.pid"
        starts=$((starts + 1))
        [ "$starts" -eq 1 ] || log "$run/replica-$i.log" "replica $i (port $p) started again: pid $child"
        rc=0
        wait "$child" || rc=$?
        kill -0 "$main" 2>/dev/null || exit 0  # serve.sh is gone (killed): nothing to serve for
        ran=$(($(date +%s) - started))
        how="exited with status $rc"
        [ "$rc" -le 128 ] || how="was killed by signal $((rc - 128))"
        [ "$ran" -lt 60 ] || delay=1
        log "$run/replica-$i.log" "replica $i (port $p, pid $child) $how after $ran s; starting it again in $delay s"
        child=""
        sleep "$delay" &
        wait $! || true
        delay=$((delay * 2))
        [ "$delay" -le 30 ] || delay=30
    done
}

main=$$
upstream=""
i=1
while [ "$i" -le "$replicas" ]; do
    p=$((port + i))
    : >"$run/replica-$i.log"
    supervise "$i" "$p" &
    pids="$pids $!"
    # a replica that refuses a connection is left alone for 5 s, then tried again
    upstream="$upstream        server 127.0.0.1:$p max_fails=1 fail_timeout=5s;
"
    i=$((i + 1))
done

# Per-client bounds. The key is the client's address; an empty key (an exempt address) is never
# counted. A directive with a bound of 0 is left out.
geo=""
for a in $(echo "$exempt" | tr ',' ' '); do geo="$geo        $a 1;
"; done
conn_all="" conn_static="" req_page="" req_stream=""
if [ "$conns" -gt 0 ]; then
    conn_all="limit_conn ae_conn $conns;"
    conn_static="limit_conn ae_static $((conns * 4));"
fi
zone_rate=$rate
if [ "$rate" -gt 0 ]; then
    req_page="limit_req zone=ae_page burst=$burst nodelay;"
    req_stream="limit_req zone=ae_stream burst=$burst nodelay;"
else
    zone_rate=1  # the zones are declared either way; nothing refers to them
fi

# Proxies in front of this nginx (--trusted-proxy): the client is the rightmost address of their
# X-Forwarded-For that is not one of them, for the bounds below and for what the replicas are told.
realip=""
if [ -n "$trusted" ]; then
    for a in $(echo "$trusted" | tr ',' ' '); do realip="$realip    set_real_ip_from $a;
"; done
    realip="$realip    real_ip_header X-Forwarded-For;
    real_ip_recursive on;
"
fi

mkdir -p "$run/tmp"
cat >"$run/nginx.conf" <<EOF
worker_processes auto;
pid $run/nginx.pid;
error_log $run/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server_tokens off;
    client_max_body_size 16k;  # no page of the app sends a body larger than a few bytes (as deploy/nginx.conf)
$realip    client_body_temp_path $run/tmp/body;
    proxy_temp_path $run/tmp/proxy;
    fastcgi_temp_path $run/tmp/fastcgi;
    uwsgi_temp_path $run/tmp/uwsgi;
    scgi_temp_path $run/tmp/scgi;
    # the replica a browser sticks to: its cookie, or (first request) a new random value
    map \$cookie_ae_replica \$ae_replica { "" \$request_id; default \$cookie_ae_replica; }
    map \$http_upgrade \$connection_upgrade { default upgrade; "" close; }
    upstream explorer {
        hash \$ae_replica consistent;
$upstream    }

    # per-client bounds: connections at once, page loads and new websockets per minute
    geo \$ae_exempt {
        default 0;
$geo    }
    map \$ae_exempt \$ae_client { 1 ""; default \$binary_remote_addr; }
    limit_conn_zone \$ae_client zone=ae_conn:10m;
    limit_conn_zone \$ae_client zone=ae_static:10m;
    limit_req_zone \$ae_client zone=ae_page:10m rate=${zone_rate}r/m;
    limit_req_zone \$ae_client zone=ae_stream:10m rate=${zone_rate}r/m;
    limit_conn_status 429;
    limit_req_status 429;
    limit_conn_log_level warn;
    limit_req_log_level warn;

    server {
        listen $address:$port;
        proxy_http_version 1.1;
        proxy_set_header Upgrade \$http_upgrade;
        proxy_set_header Connection \$connection_upgrade;
        proxy_set_header Host \$http_host;
        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        proxy_read_timeout 1d;
        proxy_send_timeout 1d;
        proxy_connect_timeout 5s;
        proxy_buffering off;
        # a replica that refuses the connection (dead, restarting): the request goes to the next one
        proxy_next_upstream error timeout;
        add_header Set-Cookie "ae_replica=\$ae_replica; Path=/; HttpOnly; SameSite=Lax" always;
        error_page 429 @refused;

        location / {  # the page (any path that is not one of the below)
            $conn_all
            $req_page
            proxy_pass http://explorer;
        }
        location = /_stcore/stream {  # the session's websocket
            $conn_all
            $req_stream
            proxy_pass http://explorer;
        }
        location /_stcore/ {  # health and host-config, which the page asks before (re)connecting
            $conn_all
            proxy_pass http://explorer;
        }
        location ^~ /_stcore/upload_file {  # the app has no file uploader: nothing is stored
            default_type text/plain;
            return 403 "This app takes no file uploads.\n";
        }
        location /media/ {  # downloads; one made while this browser's replica was down is on the next
            $conn_all
            proxy_next_upstream error timeout http_404;
            proxy_pass http://explorer;
        }
        location /static/ {  # the page's scripts and styles: a browser fetches several at once
            $conn_static
            proxy_pass http://explorer;
        }
        location @refused {
            default_type text/plain;
            add_header Retry-After 10 always;
            return 429 "Too many requests from your address (pages, connections or reloads). Wait a few seconds, then reload the page.\n";
        }
    }
}
EOF

# every replica answers its health check before the balancer opens
i=1
while [ "$i" -le "$replicas" ]; do
    p=$((port + i))
    tries=0
    until "$PY" -c "import urllib.request,sys; sys.exit(urllib.request.build_opener(urllib.request.ProxyHandler({})).open('http://127.0.0.1:$p/_stcore/health', timeout=2).read().strip() != b'ok')" 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt 240 ]; then
            echo "serve.sh: replica $i (port $p) did not start; its log:" >&2
            tail -n 30 "$run/replica-$i.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    i=$((i + 1))
done
"$NGINX" -t -q -c "$run/nginx.conf" -p "$run"
bounds="per client address: at most $conns connections, $rate page loads/min (0 = no bound)"
if [ "$access_code" = generate ]; then  # once, here: never to serve.log or a replica's log
    echo "Access code (made for this run, shown only here): $ATTENTION_EXPLORER_ACCESS_CODE"
fi
if [ -n "$presenter_made" ]; then  # once, here: never to serve.log or a replica's log
    echo "Presenter key (opens Ask the class in presenter mode; made for this run, shown only here): $ATTENTION_EXPLORER_PRESENTER_KEY"
fi
echo "Attention Explorer: http://$address:$port ($replicas replicas, sticky sessions, supervised; $bounds; logs in $run; Ctrl-C stops)"
"$NGINX" -c "$run/nginx.conf" -p "$run" -g "daemon off;" &
pids="$pids $!"
wait
