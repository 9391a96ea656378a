#!/usr/bin/env python3
"""How long the streams of unsorted input would be with a page pool instead
of whole arenas: a model, not a measurement of the library.

Records of one size arrive with uniformly random partition ids and are
appended to their partition's chain of pages, as src/intake.c does. With
--policy arena (the library today) a record that needs a page when none is
left flushes every chain: each becomes one stream, and all pages are free
again. With --policy pool the chains holding the most bytes are flushed until
half the pages are free, and the short chains stay to grow (a page pool that
takes pages back as their jobs end; the jobs' time is not modelled: pages come
back at once). Prints, per policy, the streams made and their mean length.

    bench/arena_pool_sim.py --partitions 10000 --pages 16384 --page 512
    bench/arena_pool_sim.py --partitions 200 --pages 256 --page 4096
"""
import argparse
import random


def simulate(partitions, npages, page, record, total, policy, seed):
    rng = random.Random(seed)
    fill = [0] * partitions   # bytes in each partition's chain
    pages = [0] * partitions  # pages in it
    free = npages
    streams = []
    for _ in range(total // record):
        p = rng.randrange(partitions)
        if pages[p] == 0 or fill[p] + record > pages[p] * page:
            if free == 0:
                if policy == "arena":
                    order = [q for q in range(partitions) if pages[q]]
                    target = npages
                else:
                    order = sorted((q for q in range(partitions) if pages[q]), key=lambda q: -fill[q])
                    target = npages // 2
                for q in order:
                    if free >= target:
                        break
                    streams.append(fill[q])
                    free += pages[q]
                    fill[q] = pages[q] = 0
            pages[p] += 1
            free -= 1
        fill[p] += record
    streams.extend(f for f in fill if f)
    return len(streams), sum(streams) / len(streams)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--pages", type=int, default=16384, help="pages in the arena or pool")
    ap.add_argument("--page", type=int, default=512, help="bytes a page")
    ap.add_argument("--record", type=int, default=68, help="bytes a record (the CLI's rows)")
    ap.add_argument("--mib", type=int, default=32, help="input of one task, MiB")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if min(a.partitions, a.pages, a.page, a.record, a.mib) <= 0 or a.record > a.page:
        ap.error("every size must be positive, and a record no larger than a page")
    base = None
    for policy in ("arena", "pool"):
        n, mean = simulate(a.partitions, a.pages, a.page, a.record, a.mib << 20, policy, a.seed)
        base = base or mean
        print(f"{policy:6s} {n:8d} streams, mean {mean:9.1f} bytes ({mean / base:.2f}x the arena's)")


if __name__ == "__main__":
    main()
