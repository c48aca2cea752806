"""The live line: which step of how many, what it is doing, for how long. Redrawn on stderr a few
times a second while a step runs (a plain line per step when stderr is not a terminal)."""
import sys
import threading
import time


class Progress:
    def __init__(self, total, stream=sys.stderr):
        self.total = total
        self.n = 0
        self.stream = stream
        self.tty = stream.isatty()
        self.label = ""
        self.start = 0.0
        self._stop = threading.Event()
        self._thread = None

    def begin(self, label):
        self.n += 1
        self.label = label
        self.start = time.monotonic()
        if not self.tty:
            print(f"[{self.n}/{self.total}] {label} ...", file=self.stream, flush=True)
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _draw(self, end=""):
        el = time.monotonic() - self.start
        self.stream.write(f"\r[{self.n}/{self.total}] {self.label}  {el:6.1f}s\033[K{end}")
        self.stream.flush()

    def _loop(self):
        while not self._stop.wait(0.25):
            self._draw()

    def end(self, verdict):
        el = time.monotonic() - self.start
        if self._thread:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.stream.write(f"\r[{self.n}/{self.total}] {self.label}: {verdict} "
                              f"({el:.1f}s)\033[K\n")
        else:
            print(f"[{self.n}/{self.total}] {self.label}: {verdict} ({el:.1f}s)",
                  file=self.stream, flush=True)

    def skip(self, label, why):
        self.n += 1
        print(f"[{self.n}/{self.total}] {label}: {why}", file=self.stream, flush=True)
