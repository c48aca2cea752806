"""Every file the runner writes, removes or lets a program write goes through Confine.target: the
path is resolved (os.path.realpath, every symbolic link followed) and refused unless it lies in
the output folder or the work folder as they resolved when the config was read. A name that
climbs out ('..', an absolute path) or a symbolic link planted in the tree ends in Outside, never
in a write elsewhere."""
import os
import shutil


class Outside(Exception):
    pass


class Confine:
    def __init__(self, output, work):
        self.roots = [os.path.realpath(output), os.path.realpath(work)]

    def target(self, path):
        """The one check: |path| resolved, or Outside."""
        real = os.path.realpath(path)
        for r in self.roots:
            if real == r or real.startswith(r.rstrip(os.sep) + os.sep):
                return real
        raise Outside(f"refusing to write {path}: it resolves to {real}, outside the output "
                      f"folder {self.roots[0]} and the work folder {self.roots[1]} (a symbolic "
                      "link in the tree?)")

    def makedirs(self, path):
        self.target(path)
        os.makedirs(path, exist_ok=True)

    def open(self, path, mode="w"):
        self.target(path)
        return open(path, mode)

    def copy(self, src, dst):
        self.target(dst)
        shutil.copy2(src, dst)

    def remove(self, path):
        self.target(path)
        os.remove(path)

    def replace(self, src, dst):
        self.target(src)
        self.target(dst)
        os.replace(src, dst)

    def rmtree(self, path):
        """Removes the folder |path| if there is one (a link to a folder inside: the link only)."""
        self.target(path)
        if os.path.islink(path):
            os.remove(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)


def symlinks_under(top):
    """The symbolic links under |top| (repository_checks.sh refuses any; |top| itself, the user's
    output folder, may be one)."""
    found = []
    for d, dirs, files in os.walk(top):
        found += [os.path.join(d, n) for n in dirs + files if os.path.islink(os.path.join(d, n))]
    return found
