"""Run an example through the real ``fdb`` binding over ``memory.install()``.

``python .ci/through_binding.py examples/quickstart.py [ARGS...]`` runs the example as
``--cluster-file`` users run it (``fdbqueue.binding.open_database`` choosing the API version,
the binding's own Database), with the in-memory client library in place of libfdb_c.
"""

import runpy
import sys
import tempfile
from pathlib import Path

from fdbqueue import memory

memory.install()
example = Path(sys.argv[1])
cluster_file = Path(tempfile.mkdtemp()) / "fdb.cluster"
cluster_file.write_text("example:example@127.0.0.1:4500\n")
sys.path.insert(0, str(example.parent))
sys.argv = [str(example), "--cluster-file", str(cluster_file), *sys.argv[2:]]
runpy.run_path(str(example), run_name="__main__")
