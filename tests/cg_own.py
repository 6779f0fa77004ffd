#!/usr/bin/env python3
"""cg_own.py CALLGRIND.OUT BINARY [--calls FN] [--calls-into OBJ] [--loop FN@OBJ [--ideal LONGER.OUT N]] [--per-fn] — a
program's own instructions in a callgrind profile (tests/instr.sh).

Own: instructions executed in BINARY's own code (callgrind's object: the path ends in BINARY), not in
shared libraries (libfabric, libc, the loader, PMIx) nor the vDSO. Prints key=value lines:
  own=N                 the own instructions of the whole run
  calls.FN.CALLER=N     with --calls FN: how often each own function called the own function FN
                        (efax_progress: the polls, by the wait that polled)
  into.OBJ.CALLER=N     with --calls-into OBJ: how often each own function called into objects whose
                        path holds OBJ (libfabric: a wait's CQ reads, its polls, where efax_progress's
                        body is inline in the wait)
  loop.polls=P loop.calls=C loop.empty=E
                        with --loop FN@OBJ (a profile taken with --dump-instr=yes): FN's calls into
                        objects whose path holds OBJ (fi_pingpong's pp_get_cq_comp into libfabric: its
                        fi_cq_read, the polls P), FN's own calls C, and E, the instructions of FN that
                        run once per poll: the poll loop's own cost per empty poll. An instruction is
                        the loop's when it ran at least P - C times (each call's polls found one
                        completion at most once per poll: the loop's head runs P times, its empty path
                        P - found times, everything else C times or fewer); told apart only when the
                        loop polled at least 3C times, else E=-1
  ideal=X               with --loop and --ideal (both profiles taken with --dump-instr=yes, LONGER.OUT
                        of the same program with N more loop iterations): the own instructions of one
                        iteration in which nothing depended on timing: each instruction counted as
                        often per iteration as the longer run executed it more, rounded (a post the
                        provider refused and retried now and then rounds away), except FN's poll loop:
                        its head (run once per poll) once, its empty path never. The poll loop is told
                        apart in whichever profile polled more per call; where neither polled 3 times
                        per call, the runs must differ by under half an empty poll per iteration (which
                        then rounds away), else ideal=-1
  fn.NAME=SELF,CALLS    with --per-fn: every own function's instructions and calls
Standard library only."""
import sys
from collections import defaultdict

KINDS = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl", "fn": "fn", "cfn": "fn"}


def parse(path):
    names = {"ob": {}, "fl": {}, "fn": {}}
    self_cost = defaultdict(int)  # (ob, fn) -> instructions
    calls = defaultdict(int)      # ((ob, fn), (cob, cfn)) -> count
    per_instr = defaultdict(lambda: defaultdict(int))  # (ob, fn) -> address -> count
    npos = 1
    ob = fn = cob = cfn = None
    after_calls = False
    addr = 0

    def name(kind, text):
        text = text.strip()
        if text.startswith("("):
            end = text.index(")")
            ident, rest = text[1:end], text[end + 1:].strip()
            if rest:
                names[kind][ident] = rest
            return names[kind].get(ident, "?")
        return text

    def position(tok, last):
        if tok == "*":
            return last
        if tok[0] in "+-":
            return last + int(tok, 0)
        return int(tok, 0)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
                continue
            key, eq, val = line.partition("=")
            if eq and key in KINDS:
                v = name(KINDS[key], val)
                if key == "ob":
                    ob = v
                elif key == "fn":
                    fn, cob = v, None
                elif key == "cob":
                    cob = v
                elif key == "cfn":
                    cfn = v
                continue
            if eq and key == "calls":
                calls[((ob, fn), (cob or ob, cfn))] += int(val.split()[0])
                cob = None
                after_calls = True
                continue
            if line[0] in "+-*0123456789":
                toks = line.split()
                if npos > 1:  # instr line: the first position is the instruction's address
                    addr = position(toks[0], addr)
                cost = int(toks[npos]) if len(toks) > npos else 0
                if after_calls:  # the inclusive cost of the call just named: not this function's own
                    after_calls = False
                    continue
                if fn is not None:
                    self_cost[(ob, fn)] += cost
                    if npos > 1:
                        per_instr[(ob, fn)][addr] += cost
    return self_cost, calls, per_instr


def ideal_iter(per_instr, calls, mine, key, obj, empty, polls, ncalls, ideal):
    """One loop iteration's own instructions with nothing that depended on timing (see --ideal)."""
    path, n = ideal
    _, calls2, per_instr2 = parse(path)
    polls2 = sum(c for (caller, callee), c in calls2.items() if caller == key and obj in (callee[0] or ""))
    ncalls2 = sum(c for (caller, callee), c in calls2.items() if callee == key)
    # the profile that tells the poll loop apart: more polls per call
    if polls2 >= 3 * ncalls2 and (empty < 0 or polls2 * ncalls > polls * ncalls2):
        loop_counts, p = per_instr2.get(key, {}), polls2
        lo = polls2 - ncalls2
    elif empty >= 0:
        loop_counts, p, lo = per_instr.get(key, {}), polls, polls - ncalls
    elif ((polls2 - ncalls2) - (polls - ncalls)) / n < 0.5:
        # almost every poll found its completion (an idle host answers a slowed client at once): the
        # empty path ran less than every other iteration, so the rounding below drops it
        loop_counts, p, lo = {}, 0, 0
    else:
        return -1
    in_loop = {a: c == p for a, c in loop_counts.items() if c >= lo}  # address -> is the head
    total = 0
    for fkey in set(k for k in per_instr2 if mine(k[0])) | set(k for k in per_instr if mine(k[0])):
        a1, a2 = per_instr.get(fkey, {}), per_instr2.get(fkey, {})
        for addr in set(a1) | set(a2):
            if fkey == key and addr in in_loop:
                total += 1 if in_loop[addr] else 0
            else:
                total += round((a2.get(addr, 0) - a1.get(addr, 0)) / n)
    return total


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    path, binary, rest = args[0], args[1], args[2:]
    calls_fn = loop = ideal = into = None
    per_fn = False
    while rest:
        if rest[0] == "--calls" and len(rest) > 1:
            calls_fn, rest = rest[1], rest[2:]
        elif rest[0] == "--calls-into" and len(rest) > 1:
            into, rest = rest[1], rest[2:]
        elif rest[0] == "--loop" and len(rest) > 1 and "@" in rest[1]:
            loop, rest = rest[1], rest[2:]
        elif rest[0] == "--ideal" and len(rest) > 2:
            ideal, rest = (rest[1], int(rest[2])), rest[3:]
        elif rest[0] == "--per-fn":
            per_fn, rest = True, rest[1:]
        else:
            raise SystemExit(f"cg_own.py: bad argument {rest[0]} (see cg_own.py without arguments)")
    self_cost, calls, per_instr = parse(path)

    def mine(ob):
        return bool(ob) and ob.endswith(binary)

    own = {k: v for k, v in self_cost.items() if mine(k[0])}
    if not own:
        raise SystemExit(f"cg_own.py: {path} has no function of an object ending in {binary}")
    print(f"own={sum(own.values())}")
    if calls_fn:
        by = defaultdict(int)
        for (caller, callee), n in calls.items():
            if callee[1] == calls_fn and mine(callee[0]) and mine(caller[0]) and caller[1] != calls_fn:
                by[caller[1]] += n
        for caller, n in sorted(by.items()):
            print(f"calls.{calls_fn}.{caller}={n}")
    if into:
        by = defaultdict(int)
        for (caller, callee), n in calls.items():
            if mine(caller[0]) and not mine(callee[0]) and into in (callee[0] or ""):
                by[caller[1]] += n
        for caller, n in sorted(by.items()):
            print(f"into.{into}.{caller}={n}")
    if loop:
        fn, obj = loop.split("@", 1)
        key = next((k for k in own if k[1] == fn), None)
        if key is None:
            raise SystemExit(f"cg_own.py: no own function {fn} in {path}")
        polls = sum(n for (caller, callee), n in calls.items() if caller == key and obj in (callee[0] or ""))
        ncalls = sum(n for (caller, callee), n in calls.items() if callee == key)
        counts = per_instr.get(key)
        if not counts:
            raise SystemExit(f"cg_own.py: {path} has no instruction counts (take it with --dump-instr=yes)")
        empty = sum(1 for c in counts.values() if c >= polls - ncalls) if polls >= 3 * ncalls else -1
        print(f"loop.polls={polls}\nloop.calls={ncalls}\nloop.empty={empty}")
        if ideal:
            print(f"ideal={ideal_iter(per_instr, calls, mine, key, obj, empty, polls, ncalls, ideal)}")
    if per_fn:
        ncalls = defaultdict(int)
        for (caller, callee), n in calls.items():
            if callee in own:
                ncalls[callee] += n
        for k, v in sorted(own.items(), key=lambda kv: -kv[1]):
            print(f"fn.{k[1]}={v},{ncalls[k]}")


if __name__ == "__main__":
    main()
