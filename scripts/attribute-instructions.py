#!/usr/bin/env python3
"""Where a probe run's instructions go, by npusim function or source line.

Each instruction callgrind counted in the probe binary is given to the outermost npusim
function it was inlined into (`--by stage`: ingest, the tick, dispatch, the launch, ...), to
the innermost npusim source line (`--by line`), to whose code it is (`--by owner`: npusim's or
bevy_ecs's; the standard library's and other crates' code inlined into either counts for the one
that called it), or, for bevy's, to the npusim line whose call it is in (`--by bevy-site`:
an entity lookup, a resource fetch, ...; outside any npusim line it is the schedule's and the
system parameters' own), through the binary's debug line tables (`addr2line -i`). Instructions
in other objects (the C library, the loader) are counted apart. Divide by the kernels the run
launched to read the figures per kernel.

    cargo bench --bench probe --no-run
    probe=$(ls -t target/release/deps/probe-* | grep -v '\\.d$' | head -n 1)
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=cg.out "$probe" pipeline
    python3 scripts/attribute-instructions.py cg.out "$probe" --per 100000
    python3 scripts/attribute-instructions.py cg.out "$probe" --per 100000 --by line \\
        --within hardware_tick
    python3 scripts/attribute-instructions.py cg.out "$probe" --per 100000 --by owner

Needs valgrind and binutils (`addr2line`).
"""

import argparse
import collections
import re
import subprocess


def parse_position(token, previous):
    """A callgrind position: absolute, relative (+n / -n) or the same (*)."""
    if token == "*":
        return previous
    if token[0] in "+-":
        step = int(token[1:], 0)
        return previous + step if token[0] == "+" else previous - step
    return int(token, 0)


def instruction_counts(path, binary_name):
    """Instructions per address inside `binary_name`, and per other object."""
    objects, current, address = {}, None, 0
    counts, elsewhere = collections.Counter(), collections.Counter()
    after_call = False
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith(("ob=", "cob=")):
            m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line)
            if m.group(2):
                objects[m.group(1)] = m.group(2)
            if line.startswith("ob="):
                current = objects.get(m.group(1))
            continue
        if line.startswith("calls="):
            # The next line is the call's inclusive cost, not this function's own.
            after_call = True
            continue
        if not line or line[0] not in "+-*0123456789":
            continue
        fields = line.split()
        address = parse_position(fields[0], address)
        if after_call:
            after_call = False
            continue
        if len(fields) >= 3:
            if current and current.endswith(binary_name):
                counts[address] += int(fields[-1])
            else:
                elsewhere[current] += int(fields[-1])
    return counts, elsewhere


def inline_chains(binary, addresses):
    """Per address, its (function, file:line) frames, innermost first."""
    text = "\n".join(hex(a) for a in addresses)
    out = subprocess.run(
        ["addr2line", "-i", "-f", "-C", "-a", "-e", binary],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    chains, address, lines = {}, None, []
    for line in out + ["0x0"]:
        if re.match(r"^0x[0-9a-f]+$", line):
            if address is not None:
                chains[address] = list(zip(lines[0::2], lines[1::2]))
            address, lines = int(line, 16), []
        else:
            lines.append(line)
    return chains


def in_tree(location):
    """Whether a source location is one of npusim's crates (not a dependency's, not std's)."""
    if ".cargo/registry" in location or location.startswith("/rustc/"):
        return False
    return any(f"{d}/src/" in location for d in ("engine", "systems", "components", "device"))


def short(location):
    """A location from its crate directory on (`systems/src/tick.rs:261`)."""
    m = re.search(r"(engine|systems|components|device)/src/\S*", location)
    return m.group(0) if m else location.split(" ")[0]


def ours(function, location):
    """Whether a frame is npusim's: its own code, or a generic instantiated for npusim's types
    (a system's `run` is named by its parameters)."""
    return "npusim" in function or in_tree(location)


def is_bevy(location):
    """Whether a frame is one of bevy's crates (`bevy_ecs`, `bevy_ptr`, ...)."""
    return "/bevy_" in location


def owner(chain):
    """Whose code an instruction is: the innermost frame that is npusim's (the probe's own
    program included) or bevy's; the standard library's and other crates' code count for the
    one they were inlined into."""
    for function, location in chain:
        if is_bevy(location):
            return "bevy_ecs"
        if in_tree(location) or "/benches/" in location:
            return "npusim"
    return "other (no npusim or bevy frame)"


def bevy_site(chain):
    """For an instruction of bevy's code, the npusim line whose call it is in (the innermost
    npusim line it was inlined into); None for any other instruction."""
    if owner(chain) != "bevy_ecs":
        return None
    return next(
        (short(loc) for f, loc in chain if in_tree(loc) or "/benches/" in loc),
        "(no npusim line: the schedule, system parameters, resource fetches)",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("callgrind_out")
    parser.add_argument("binary")
    parser.add_argument("--per", type=float, default=1.0, help="divide every count by this")
    parser.add_argument("--by", choices=["stage", "line", "owner", "bevy-site"], default="stage")
    parser.add_argument("--within", help="only instructions whose stage matches this regex")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    counts, elsewhere = instruction_counts(args.callgrind_out, args.binary.split("/")[-1])
    chains = inline_chains(args.binary, sorted(counts))
    table = collections.Counter()
    for address, n in counts.items():
        chain = chains.get(address, [])
        stage = next((f for f, loc in reversed(chain) if ours(f, loc)), "(bevy, std: no npusim frame)")
        stage = re.sub(r"<.*?>", "", stage)
        if args.within and not re.search(args.within, stage):
            continue
        if args.by == "stage":
            key = stage[:100]
        elif args.by == "owner":
            key = owner(chain)
        elif args.by == "bevy-site":
            key = bevy_site(chain)
            if key is None:
                continue
        else:
            key = next(
                (f"{re.sub(r'<.*?>', '', f)[-40:]} @ {short(loc)}" for f, loc in chain if in_tree(loc)),
                re.sub(r"<.*?>", "", chain[0][0])[:60] if chain else "?",
            )
        table[key] += n
    for key, n in table.most_common(args.top):
        print(f"{n / args.per:10.1f}  {key}")
    print(f"{sum(table.values()) / args.per:10.1f}  total (in the probe binary)")
    for obj, n in elsewhere.most_common(3):
        print(f"{n / args.per:10.1f}  in {obj}")


if __name__ == "__main__":
    main()
