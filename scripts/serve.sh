#!/bin/sh
# Serve Attention Explorer to a class: N app processes behind nginx, with sticky sessions.
#
#   sh scripts/serve.sh                      2 replicas, the balancer on port 8501
#   sh scripts/serve.sh --replicas 4 --port 8080 --address 0.0.0.0
#
# A Streamlit session is one websocket, and the download URLs a page makes are served by the
# process that made them: both must reach the same replica. nginx gives every browser a cookie
# (ae_replica) on its first request and routes by a consistent hash of it, so the page, its
# websocket and its downloads stick to one replica (open-source nginx has no `sticky` directive;
# `ip_hash` would send a whole classroom behind one NAT to one replica). The replicas share one
# cookie secret and run in hosted mode (ATTENTION_EXPLORER_HOSTED=1, unless set otherwise), each
# with one torch thread per forward pass. Ctrl-C (or SIGTERM) stops nginx and every replica.
set -eu
cd "$(dirname "$0")/.."

replicas=2
port=8501
address=127.0.0.1
while [ $# -gt 0 ]; do
    case "$1" in
        --replicas) replicas="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --address) address="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "serve.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$replicas" in ''|*[!0-9]*) echo "serve.sh: --replicas must be a whole number" >&2; exit 2 ;; esac
case "$port" in ''|*[!0-9]*) echo "serve.sh: --port must be a whole number" >&2; exit 2 ;; esac
[ "$replicas" -ge 1 ] && [ "$replicas" -le 32 ] || { echo "serve.sh: --replicas must be 1..32" >&2; exit 2; }

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
secret=$(python -c "import secrets; print(secrets.token_hex(32))")
pids=""
cleanup() {
    trap - EXIT INT TERM
    [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

upstream=""
i=1
while [ "$i" -le "$replicas" ]; do
    p=$((port + i))
    ATTENTION_EXPLORER_HOSTED="${ATTENTION_EXPLORER_HOSTED:-1}" \
    OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" \
    STREAMLIT_SERVER_COOKIE_SECRET="$secret" \
        python -m streamlit run explorer/app.py --server.address 127.0.0.1 --server.port "$p" \
        --server.headless true >"$run/replica-$i.log" 2>&1 &
    pids="$pids $!"
    upstream="$upstream        server 127.0.0.1:$p max_fails=0;
"
    i=$((i + 1))
done

mkdir -p "$run/tmp"
cat >"$run/nginx.conf" <<EOF
worker_processes auto;
pid $run/nginx.pid;
error_log $run/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $run/tmp/body;
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
    server {
        listen $address:$port;
        location / {
            proxy_pass http://explorer;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_set_header Host \$http_host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_read_timeout 1d;
            proxy_send_timeout 1d;
            proxy_buffering off;
            add_header Set-Cookie "ae_replica=\$ae_replica; Path=/; HttpOnly; SameSite=Lax" always;
        }
    }
}
EOF

# every replica answers its health check before the balancer opens
i=1
while [ "$i" -le "$replicas" ]; do
    p=$((port + i))
    tries=0
    until python -c "import urllib.request,sys; sys.exit(urllib.request.build_opener(urllib.request.ProxyHandler({})).open('http://127.0.0.1:$p/_stcore/health', timeout=2).read().strip() != b'ok')" 2>/dev/null; do
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
echo "Attention Explorer: http://$address:$port ($replicas replicas, sticky sessions; Ctrl-C stops)"
"$NGINX" -c "$run/nginx.conf" -p "$run" -g "daemon off;" &
pids="$pids $!"
wait
