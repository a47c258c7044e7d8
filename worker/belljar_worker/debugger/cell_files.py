"""Where the debugger finds a cell: a file named by the hash of its text.

JupyterLab computes a cell's file name itself, `tmpFilePrefix + murmur2(code, hashSeed) +
tmpFileSuffix` (its debugger's hash.ts, over the cell's UTF-8 bytes, printed as an unsigned
decimal), and matches it with the paths in breakpoints and stack frames. So every cell of a
session that can debug is compiled under that name, and `dumpCell` writes the text there for
pydevd, which reads breakpoint lines from the file.

The prefix is a directory of the sandbox's own /tmp, random per worker start: a pid would
be the same after every restart inside the sandbox's pid namespace, and JupyterLab moves its
breakpoints to the new prefix (and dumps the cells again) only when the prefix changed.
"""
import os

HASH_SEED = 0xC70F6907  # the seed ipykernel gives; JupyterLab takes whatever debugInfo says
SUFFIX = ".py"
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data, seed=HASH_SEED):
    """MurmurHash2, 32-bit, little-endian blocks: the hash JupyterLab's debugger uses."""
    length = len(data)
    h = (seed ^ length) & _MASK
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


class CellFiles:
    def __init__(self, tmp_dir=None):
        base = tmp_dir or os.environ.get("TMPDIR") or "/tmp"
        self.prefix = os.path.join(base, "belljar-debug-%s" % os.urandom(4).hex()) + os.sep

    def name(self, code):
        return "%s%d%s" % (self.prefix, murmur2(code.encode("utf-8", "surrogatepass")), SUFFIX)

    def dump(self, code):
        """Write the cell where its name says; the path written."""
        path = self.name(code)
        os.makedirs(self.prefix, mode=0o700, exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(code)
        return path
