"""Which steps are done, kept in <work>/state.json and rewritten atomically after each step, so an
interrupted run resumes at the step it was in (that step starts again from scratch)."""
import json
import os
import time


class State:
    def __init__(self, work, mode):
        self.path = os.path.join(work, "state.json")
        self.data = {"mode": mode, "done": {}}
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.data = json.load(f)
        os.makedirs(work, exist_ok=True)

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

    def _save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
