#!/usr/bin/env python3
"""What p99 latency an ideal server can reach at a given load: a model, not a measurement.

Arrivals at RATE requests/s (Poisson, or with --distribution constant every
1 / RATE seconds, as `bertrt bench --request-distribution` sends them) meet one instance that runs one batch at a
time. A batch of k requests takes FIXED + PER_REQUEST * k seconds (fit both to
measured batch times). With --batching the instance takes everything queued
when it frees (up to --max-batch requests), as bertrt's scheduler does; without,
one request at a time. There is no front end, no tokenization and no
first-use cost, so any real server's p99 is at least this.

Prints p50/p99 of the response time, the mean compute per request (the time of
the batch each request was in) and serve_bench's half-load bound, 2 x compute
per request + 1 ms, to show whether that bound is reachable at all.

  python3 bench/queue_model.py --rate 52.24 --fixed-ms 0 --per-request-ms 10.5
  python3 bench/queue_model.py --rate 1288 --fixed-ms 0.376 --per-request-ms 0.354 --batching
  python3 bench/queue_model.py --rate 52.24 --fixed-ms 0 --per-request-ms 10.5 --distribution constant
"""
import argparse
import random
import statistics


def simulate(rate, fixed_s, per_request_s, batching, max_batch, requests, seed, constant=False):
    rnd = random.Random(seed)
    arrivals, t = [], 0.0
    for _ in range(requests):
        t += 1 / rate if constant else rnd.expovariate(rate)
        arrivals.append(t)
    free, i, response, compute = 0.0, 0, [], []
    while i < requests:
        start = max(free, arrivals[i])
        j = i + 1
        if batching:
            while j < requests and arrivals[j] <= start and j - i < max_batch:
                j += 1
        duration = fixed_s + per_request_s * (j - i)
        for q in range(i, j):
            response.append(start + duration - arrivals[q])
            compute.append(duration)
        free, i = start + duration, j
    response.sort()
    return (response[len(response) // 2], response[int(0.99 * len(response))],
            statistics.mean(compute))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, required=True, help="requests per second")
    p.add_argument("--fixed-ms", type=float, required=True, help="a batch's fixed cost")
    p.add_argument("--per-request-ms", type=float, required=True, help="its cost per request")
    p.add_argument("--batching", action="store_true", help="take everything queued")
    p.add_argument("--distribution", choices=["poisson", "constant"], default="poisson",
                   help="arrival gaps: exponential, or all 1 / RATE")
    p.add_argument("--max-batch", type=int, default=64, help="requests per batch at most")
    p.add_argument("--requests", type=int, default=200000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    p50, p99, compute = simulate(a.rate, a.fixed_ms / 1e3, a.per_request_ms / 1e3, a.batching,
                                 a.max_batch, a.requests, a.seed,
                                 a.distribution == "constant")
    bound = 2 * compute * 1e3 + 1
    print(f"p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms, compute per request "
          f"{compute * 1e3:.2f} ms, bound 2 x compute + 1 = {bound:.2f} ms: "
          f"{'reachable' if p99 * 1e3 <= bound else 'NOT reachable'} by this ideal server")


if __name__ == "__main__":
    main()
