"""A hook that is not keel: it logs what the client sent and prints a fixed reply.

    python -S reply_hook.py LOG LABEL [REPLY_FILE [DELAY]]

Appends ``{"label", "stdin", "t"}`` (stdin parsed as JSON) as one line to LOG, sleeps DELAY
seconds if given, then prints the contents of REPLY_FILE (if given and not empty) to stdout
verbatim and exits 0. Used to capture a client's
hook contract (e.g. a rewrite of a shell call) without keel's adapter in between.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    log, label = argv[0], argv[1]
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = raw
    with open(log, "a") as fh:
        fh.write(json.dumps({"label": label, "stdin": payload, "t": time.time()}) + "\n")
    if len(argv) > 3:
        time.sleep(float(argv[3]))
    if len(argv) > 2 and argv[2]:
        with open(argv[2]) as fh:
            sys.stdout.write(fh.read())
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
