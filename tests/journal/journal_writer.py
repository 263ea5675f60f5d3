"""A writer process for the journal tests: ``python journal_writer.py ROOT NAME COUNT [GATE]``.

Opens ROOT's journal and appends COUNT events (forever when COUNT is 0) as session NAME, one
transaction each. With GATE, it prints ``ready`` once the journal is open and waits for the
file GATE to exist before appending, so several writers start at the same moment. When COUNT
is 0 it prints the number appended after each append.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from keel.core.events import Event, ToolCallPayload
from keel.journal import open_journal


def main() -> None:
    root, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    gate = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    with open_journal(root) as journal:
        if gate is not None:
            print("ready", flush=True)
            while not gate.exists():
                time.sleep(0.001)
        i = 0
        while count == 0 or i < count:
            payload = ToolCallPayload(
                tool="Bash", kind="exec", command=f"echo {i}", args={"proc": name, "i": i}
            )
            journal.append(Event("tool.call", name, payload, agent="writer"))
            i += 1
            if count == 0:
                print(i, flush=True)


if __name__ == "__main__":
    main()
