# Sourced by the serving benchmarks: start_server LOG ARGS... runs `$BIN serve
# ARGS... --http-port PORT` on a free port in the background, sets SERVER (its
# pid) and URL, stops it when the calling script exits, and returns once it
# reports ready (or prints LOG and fails if it dies first). With SERVER_CPUS
# set (a taskset CPU list) the server runs on those CPUs only.
start_server() {
  local log=$1
  shift
  local port
  port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  URL="http://127.0.0.1:$port"
  # A plain command, not on_cpus: a function in the background is a subshell,
  # and $! would be its pid, not the server's.
  ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$BIN" serve "$@" --http-port "$port" 2> "$log" &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 600); do
    python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
      "$URL/v2/health/ready" 2> /dev/null && return 0
    kill -0 "$SERVER" 2>/dev/null || { cat "$log"; return 1; }
    sleep 0.2
  done
  echo "the server did not become ready; its log: $log" >&2
  return 1
}

# on_cpus CPUS COMMAND...: runs COMMAND pinned to the taskset CPU list CPUS, or
# unpinned when CPUS is empty.
on_cpus() {
  local cpus=$1
  shift
  if [ -n "$cpus" ]; then taskset -c "$cpus" "$@"; else "$@"; fi
}

# minilm_shape_model DIR TOKENIZER_DIR: all-MiniLM-L6-v2's shape (6 layers,
# hidden 384, 12 heads, FFN 1,536, mean pooling, normalized) with random
# weights and the tokenizer files of TOKENIZER_DIR, in DIR unless there.
minilm_shape_model() {
  [ -f "$1/model.safetensors" ] || python3 scripts/make_random_model.py --preset bert-base \
    --hidden 384 --layers 6 --heads 12 --intermediate 1536 --head sentence --pooling mean \
    --normalize --max-seq-length 256 --tokenizer-from "$2" -o "$1" > /dev/null
}
