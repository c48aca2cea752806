"""Which steps are done, kept in <work>/state.json and rewritten atomically after each step, so an
interrupted run resumes at the step it was in (that step starts again from scratch)."""
import json
import os
import time


class StateError(Exception):
    pass


class State:
    def __init__(self, work, mode, fs):
        self.path = os.path.join(work, "state.json")
        self.fs = fs
        self.data = {"mode": mode, "done": {}}
        if os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    self.data = json.load(f)
            except (OSError, ValueError) as e:
                raise StateError(f"{self.path}: cannot read the finished steps ({e}); remove it "
                                 "to start over") from None
            if not (isinstance(self.data, dict) and isinstance(self.data.get("done"), dict)):
                raise StateError(f"{self.path}: not a state file of this runner (no 'done' "
                                 "object); remove it to start over")
        fs.makedirs(work)

    @property
    def mode(self):
        return self.data.get("mode")

    def set_mode(self, mode):
        self.data["mode"] = mode
        self._save()

    def done(self, step):
        return step in self.data["done"]

    def info(self, step):
        return self.data["done"].get(step, {})

    def mark(self, step, **info):
        info["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.data["done"][step] = info
        self._save()

    def forget(self, pred):
        """Forget every step for which pred(step) is true; returns them."""
        gone = [s for s in self.data["done"] if pred(s)]
        for s in gone:
            del self.data["done"][s]
        if gone:
            self._save()
        return gone

    def save(self):
        """Writes the state now (after a change to data outside mark and forget)."""
        self._save()

    def _save(self):
        tmp = self.path + ".tmp"
        with self.fs.open(tmp) as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        self.fs.replace(tmp, self.path)
